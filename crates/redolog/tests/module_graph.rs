//! Goal: no import loop among the library's modules (docs/DESIGN.md §1, "Who
//! owns what"): each owner depends only on the owners below it, so a stage's
//! state can be read and changed only through what its module offers.
//! Method: every `crate::<module>` path in the sources of a top-level module
//! (`foo.rs`, or `foo/` with its submodules) is an edge to `<module>`; the
//! graph must have no cycle. A cycle is reported as the modules along it.
//! (The same check as `cargo modules dependencies --lib --acyclic` at the
//! granularity of top-level modules, without its install.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's sources, each with the top-level module it belongs to.
fn sources() -> Vec<(String, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let relative = path.strip_prefix(&src).expect("under src");
                let first = relative.components().next().expect("a component");
                let module = first.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned();
                files.push((module, path));
            }
        }
    }
    files
}

/// The modules a file names with `crate::<module>`, outside comments.
fn references(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// A cycle in `graph`, if there is one, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(2) => return None,
            Some(1) => {
                let start = path.iter().position(|step| step == node).expect("on the path");
                let mut cycle = path[start..].to_vec();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(node.to_owned(), 1);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, path) {
                return Some(cycle);
            }
        }
        path.pop();
        state.insert(node.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    graph.keys().find_map(|node| visit(node, graph, &mut state, &mut Vec::new()))
}

#[test]
fn the_library_modules_import_each_other_without_a_loop() {
    let files = sources();
    let modules: BTreeSet<String> = files.iter().map(|(module, _)| module.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).expect("source is readable");
        let edges = graph.entry(module.clone()).or_default();
        for target in references(&text) {
            if &target != module && modules.contains(&target) {
                edges.insert(target);
            }
        }
    }
    // The check sees the graph: the owners are there and depend downwards.
    assert!(graph["core"].contains("pipeline") && graph["append"].contains("pipeline"));
    assert!(!graph["pipeline"].contains("core"), "the commit protocol reaches the log only through its Port");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import loop among the library's modules: {}", cycle.join(" → "));
    }
}

#[test]
fn a_loop_is_found_and_named() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.entry("core".into()).or_default().insert("checkpoint".into());
    graph.entry("checkpoint".into()).or_default().insert("commit".into());
    graph.entry("commit".into()).or_default().insert("core".into());
    let cycle = find_cycle(&graph).expect("the loop");
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4);
    assert_eq!(references("use crate::lsn::Lsn; // crate::core"), BTreeSet::from(["lsn".to_owned()]));
}

//! Goal: no import loop anywhere in the workspace (docs/DESIGN.md §1, "Who
//! owns what"): in every crate under `crates/`, each source file depends only
//! on files below it, so a stage's state can be read and changed only through
//! what its module offers, and a workload, a store or a statement never reaches
//! back into what calls it.
//! Method: every source file is a node, named by its module path (`lib.rs` and
//! `main.rs` are the crate root, `foo/mod.rs` is `foo`, `foo/bar.rs` is
//! `foo::bar`). Every path a file names — in `use` trees (braces expanded) and
//! in code — that starts with `crate::`, `super::`, `self::` or a child
//! module's name is an edge to the deepest module file it reaches; a name a
//! module only re-exports (`pub use child::Name`) leads on to the child that
//! defines it. `mod foo;` declarations and re-exports themselves are not
//! edges: a facade that re-exports its children's items depends on nothing. A file's `#[cfg(test)]`
//! module at its end is left out (a test module uses its parent by design).
//! The graph must have no cycle: a parent that declares a child and also
//! holds what the child imports is a loop (move the shared items to a
//! sibling). A cycle is reported as the files along it.
//! (The same check as `cargo modules dependencies --acyclic` at the
//! granularity of files, for every crate, without its install.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's source files: module path → file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut files = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let relative = path.strip_prefix(src).expect("under src").with_extension("");
                let mut parts: Vec<String> =
                    relative.components().map(|part| part.as_os_str().to_string_lossy().into_owned()).collect();
                if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    parts.pop();
                }
                files.insert(parts.join("::"), path);
            }
        }
    }
    files
}

/// The code of a file without comments, without the text of string and
/// character literals, and without a trailing `#[cfg(test)]` module.
fn code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let test_module = (0..lines.len()).find(|&at| {
        let attribute = lines[at].trim();
        if !(attribute.starts_with("#[cfg(") && attribute.contains("test")) {
            return false;
        }
        let item = lines[at + 1..].iter().map(|line| line.trim()).find(|line| !line.starts_with("#["));
        item.is_some_and(|item| item.starts_with("mod ") && item.ends_with('{'))
    });
    let text = lines[..test_module.unwrap_or(lines.len())].join("\n");
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for skipped in chars.by_ref() {
                    if skipped == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for skipped in chars.by_ref() {
                    if last == '*' && skipped == '/' {
                        break;
                    }
                    last = skipped;
                }
            }
            '"' => {
                let mut escaped = false;
                for skipped in chars.by_ref() {
                    match (escaped, skipped) {
                        (false, '"') => break,
                        (false, '\\') => escaped = true,
                        _ => escaped = false,
                    }
                }
                out.push_str("\"\"");
            }
            // A character literal ('x', '\n', '"'), not a lifetime ('a).
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                let at = |n: usize| rest.chars().nth(n);
                let literal = match (at(0), at(1), at(2)) {
                    (Some('\\'), _, Some('\'')) => Some(3),
                    (Some(c), Some('\''), _) if c != '\\' => Some(2),
                    _ => None,
                };
                match literal {
                    Some(length) => {
                        chars.by_ref().take(length).for_each(drop);
                        out.push_str("' '");
                    }
                    None => out.push(c),
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or_default().trim();
        return if path.is_empty() { Vec::new() } else { vec![path.to_owned()] };
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .flat_map(expand)
        .map(|rest| if rest == "self" { prefix.trim_end_matches("::").to_owned() } else { format!("{prefix}{rest}") })
        .collect()
}

/// Every path the code names: `use` trees expanded, then the paths in the
/// rest of the code. The second element is true for a `pub use`.
fn paths(code: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    let mut rest = code;
    let mut plain = String::new();
    while let Some(at) = rest.find("use ") {
        let before = &rest[..at];
        let starts_item = before.chars().last().is_none_or(|c| c.is_whitespace() || c == ';' || c == '{' || c == '}');
        plain.push_str(before);
        if !starts_item {
            plain.push_str("use ");
            rest = &rest[at + 4..];
            continue;
        }
        let public = before.trim_end().ends_with("pub") || before.trim_end().ends_with(')');
        let end = rest[at..].find(';').map_or(rest.len(), |end| at + end);
        found.extend(expand(&rest[at + 4..end]).into_iter().map(|path| (path, public)));
        rest = &rest[end..];
    }
    plain.push_str(rest);
    let bytes = plain.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut at = 0;
    while at < bytes.len() {
        if is_ident(bytes[at]) && (at == 0 || !(is_ident(bytes[at - 1]) || bytes[at - 1] == b':')) {
            let mut end = at;
            while end < bytes.len()
                && (is_ident(bytes[end]) || (bytes[end] == b':' && bytes.get(end + 1) == Some(&b':')))
            {
                end += if bytes[end] == b':' { 2 } else { 1 };
            }
            let path = plain[at..end].trim_end_matches(':');
            if path.contains("::") {
                found.push((path.to_owned(), false));
            }
            at = end.max(at + 1);
        } else {
            at += 1;
        }
    }
    found
}

/// The module path `path` names from module `here`, as segments, if it is a
/// path into this crate.
fn absolute(here: &str, path: &str, modules: &BTreeMap<String, PathBuf>) -> Option<Vec<String>> {
    let mut segments: Vec<&str> = path.split("::").map(str::trim).collect();
    let mut base: Vec<String> = if here.is_empty() { Vec::new() } else { here.split("::").map(String::from).collect() };
    match segments.first().copied()? {
        "crate" => {
            base.clear();
            segments.remove(0);
        }
        "self" => {
            segments.remove(0);
        }
        "super" => {
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop()?;
            }
        }
        first => {
            let child = if here.is_empty() { first.to_owned() } else { format!("{here}::{first}") };
            if !modules.contains_key(&child) {
                return None;
            }
        }
    }
    base.extend(segments.into_iter().map(String::from));
    Some(base)
}

/// The module file `segments` reaches: the deepest module on it, or, where
/// the next name is one that module re-exports, the module that defines it.
fn target(
    segments: &[String],
    modules: &BTreeMap<String, PathBuf>,
    exports: &BTreeMap<(String, String), String>,
) -> String {
    let mut module = String::new();
    for (depth, segment) in segments.iter().enumerate() {
        let deeper = if depth == 0 { segment.clone() } else { format!("{module}::{segment}") };
        if modules.contains_key(&deeper) {
            module = deeper;
        } else if let Some(defined) = exports.get(&(module.clone(), segment.clone())) {
            return defined.clone();
        } else {
            break;
        }
    }
    module
}

/// One crate's import graph, file by file (by module path).
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let codes: BTreeMap<&String, String> = modules
        .iter()
        .map(|(module, path)| (module, code(&std::fs::read_to_string(path).expect("source is readable"))))
        .collect();
    // Re-exports first: (module, name) → the module that defines the name.
    let mut exports = BTreeMap::new();
    for _ in 0..4 {
        for (module, code) in &codes {
            for (path, public) in paths(code) {
                let Some(segments) = absolute(module, &path, &modules).filter(|_| public) else { continue };
                let name = segments.last().cloned().unwrap_or_default();
                let defined = target(&segments, &modules, &exports);
                if &defined != *module {
                    exports.insert(((*module).clone(), name), defined);
                }
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in &codes {
        let edges = graph.entry((*module).clone()).or_default();
        // A re-export is a facade, not a use: it is followed, not an edge.
        for (path, _) in paths(code).into_iter().filter(|(_, public)| !public) {
            if let Some(segments) = absolute(module, &path, &modules) {
                let to = target(&segments, &modules, &exports);
                if &to != *module {
                    edges.insert(to);
                }
            }
        }
    }
    graph
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

/// The workspace's crates: every `crates/*/src`.
fn crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crates: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .expect("crates/ is readable")
        .filter_map(|entry| {
            let dir = entry.ok()?.path();
            let src = dir.join("src");
            let name = dir.file_name()?.to_string_lossy().into_owned();
            src.is_dir().then_some((name, src))
        })
        .collect();
    crates.sort();
    crates
}

#[test]
fn no_crate_of_the_workspace_has_an_import_loop() {
    let crates = crates();
    let names: Vec<&str> = crates.iter().map(|(name, _)| name.as_str()).collect();
    for expected in ["redolog", "redolog-bench", "redolog-cli", "redolog-kv", "redolog-pagestore", "redolog-raft"] {
        assert!(names.contains(&expected), "{expected} not found among {names:?}");
    }
    let mut loops = Vec::new();
    for (name, src) in &crates {
        let graph = graph(src);
        if name == "redolog" {
            // The check sees the graph: the owners are there and depend downwards.
            assert!(graph["core"].contains("pipeline") && graph["append"].contains("pipeline"));
            assert!(!graph["pipeline"].contains("core"), "the commit protocol reaches the log only through its Port");
        }
        if let Some(cycle) = find_cycle(&graph) {
            let shown: Vec<&str> =
                cycle.iter().map(|module| if module.is_empty() { "(root)" } else { module }).collect();
            loops.push(format!("{name}: {}", shown.join(" → ")));
        }
    }
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
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
}

/// The pieces see what a reader sees: braces expanded, comments and the test
/// module left out, a parent holding what its child imports is a loop, a
/// re-export is followed to where the name is defined.
#[test]
fn paths_are_read_as_the_compiler_resolves_them() {
    assert_eq!(
        expand("crate::harness::{machine, plot::{Line, self}, BoxError}"),
        ["crate::harness::machine", "crate::harness::plot::Line", "crate::harness::plot", "crate::harness::BoxError"]
    );
    let code = code("use crate::lsn::Lsn; // crate::core\nfn f() { crate::a::b(); }\n#[cfg(test)]\nmod tests {\n use super::*;\n}\n");
    let found: Vec<String> = paths(&code).into_iter().map(|(path, _)| path).collect();
    assert_eq!(found, ["crate::lsn::Lsn", "crate::a::b"]);

    let dir = tempfile::tempdir().expect("tempdir");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("main.rs", "mod oltp;\nmod harness;\nfn main() { oltp::run(); }\n");
    write("harness/mod.rs", "pub mod stats;\npub use stats::median;\n");
    write("harness/stats.rs", "pub fn median() {}\n");
    write(
        "oltp/mod.rs",
        "mod rocksdb;\nuse crate::harness::median;\npub struct Statement;\npub fn run() { rocksdb::open(); }\n",
    );
    write("oltp/rocksdb.rs", "use super::Statement;\npub fn open() {}\n");
    let graph = graph(dir.path());
    assert!(graph["oltp"].contains("harness::stats"), "the re-export is followed: {graph:?}");
    let cycle = find_cycle(&graph).expect("the parent and its child import each other");
    assert!(cycle.contains(&"oltp".to_owned()) && cycle.contains(&"oltp::rocksdb".to_owned()), "{cycle:?}");
    write("oltp/statement.rs", "pub struct Statement;\n");
    write("oltp/mod.rs", "mod rocksdb;\nmod statement;\npub fn run() { rocksdb::open(); }\n");
    write("oltp/rocksdb.rs", "use super::statement::Statement;\npub fn open() {}\n");
    assert_eq!(find_cycle(&self::graph(dir.path())), None);
}

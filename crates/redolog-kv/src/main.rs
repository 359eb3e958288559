//! `redolog-kv`: one node of the replicated key-value service, on a
//! redolog-raft store (the crate's documentation has the commands).

use clap::Parser;

/// A node of the replicated key-value service: an openraft 0.10 node on a
/// redolog log store, serving Raft's RPCs and a key-value API over HTTP.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    node: redolog_kv::Options,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    redolog_kv::log_to_stderr();
    let served = cli.node.runtime().map_err(redolog_kv::Failure::from).and_then(|runtime| {
        runtime.block_on(async {
            let store = redolog_kv::open_store(&cli.node)?;
            redolog_kv::serve(cli.node, store).await
        })
    });
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // What stopped the node, as a sentence: its store, its identity
        // (KV-9), its address, its Raft.
        Err(failure) => {
            eprintln!("redolog-kv: {failure}");
            std::process::ExitCode::FAILURE
        }
    }
}

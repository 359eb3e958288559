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

fn main() -> Result<(), redolog_kv::Failure> {
    let cli = Cli::parse();
    cli.node.runtime()?.block_on(async {
        let store = redolog_kv::open_store(&cli.node)?;
        redolog_kv::serve(cli.node, store).await
    })
}

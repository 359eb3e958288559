#!/usr/bin/env bash
# The published crates as a user gets them: `cargo package` (with its
# verification build) for redolog, redolog-raft, redolog-pagestore and
# redolog-kv, then, from each .crate alone, every test, example and benchmark
# built and every doctest run, with every feature. The workspace's crates are
# not on crates.io yet, so the .crates that depend on each other are patched
# to the unpacked ones; nothing else of the repository is in reach.
#
# Usage: scripts/check-packages.sh [--allow-dirty]   (run by .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

published=(redolog redolog-raft redolog-pagestore redolog-kv)
version=$(cargo metadata --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "redolog") | .version')

# Verifying a package that depends on another of the workspace, cargo unpacks
# that one from a local registry of the packages just made into
# $CARGO_HOME/registry/src/-<hash>/, and reuses a copy of the same version
# unpacked by an earlier run: it would verify against stale sources.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for name in "${published[@]}"; do
    rm -rf "$cargo_home"/registry/src/-*/"$name-$version"
done

echo "== cargo package ${published[*]}"
cargo package --workspace --exclude redolog-bench --exclude redolog-cli "$@"

unpacked=$(mktemp -d /tmp/redolog-packages.XXXXXX)
trap 'rm -rf "$unpacked"' EXIT
for name in "${published[@]}"; do
    tar xzf "target/package/$name-$version.crate" -C "$unpacked"
done
# The unpacked crates a .crate's manifest names, directly or through another.
patches_for() {
    local name=$1 other
    for other in "${published[@]}"; do
        [[ $other == "$name" ]] && continue
        if grep -qE "^\[(dev-)?dependencies\.$other\]" "$unpacked/$name-$version/Cargo.toml"; then
            echo "--config"
            echo "patch.crates-io.$other.path='$unpacked/$other-$version'"
            patches_for "$other"
        fi
    done
}

# One target directory for the four (their dependencies build once), outside
# the unpacked tree, which holds nothing but the .crates' files.
export CARGO_TARGET_DIR="$PWD/target/package-tests"
for name in "${published[@]}"; do
    echo "== $name-$version.crate: cargo test --all-features --no-run, cargo test --all-features --doc"
    mapfile -t patches < <(patches_for "$name" | paste - - | sort -u | tr '\t' '\n')
    (
        cd "$unpacked/$name-$version"
        # A .crate's tests that reach outside it, or lose a feature with the
        # path-only dev-dependency cargo leaves out, fail to build here.
        cargo test ${patches[@]+"${patches[@]}"} --all-features --all-targets --no-run
        cargo test ${patches[@]+"${patches[@]}"} --all-features --doc
        if [[ $name == redolog ]]; then
            # The library's unit tests without its optional cipher: a log
            # that needs it is refused by name (Error::EncryptionNotBuilt).
            cargo test --lib --features testkit
        fi
    )
done

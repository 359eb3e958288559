#!/usr/bin/env python3
"""Same-run check of two `redolog` binaries (docs/BENCHMARKS.md, "Same-run
check against the previous main").

Runs `BIN bench --systems redolog` (or `--system NAME`) for each binary in paired rounds, the order of
the two binaries alternating from round to round, and prints for every thread
count the median over rounds of the paired ratio new ÷ old of commits/s, with
the spread. On this machine the same binary against itself varies by ±5-20 % on
tmpfs: only the pairing and the rounds make a ratio mean something.

    scripts/compare-binaries.py OLD NEW --device tmpfs --threads 1,16,64,256 --rounds 5

Build OLD from the previous main in a worktree, e.g.
    git worktree add /tmp/old main~1 && (cd /tmp/old && cargo build --release)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(binary, args, threads, out):
    command = [
        binary, "bench", "--systems", args.system, "--device", args.device, "--threads", threads,
        "--rounds", "1", "--seconds", str(args.seconds), "--durability", args.durability,
        "--intervals", "false", "--json", out,
    ] + (["--no-wait"] if args.no_wait else [])
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        points = json.load(f)["points"]
    return {p["threads"]: p["commits_per_sec"] for p in points if p["system"] == args.system}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--device", default="tmpfs")
    parser.add_argument("--system", default="redolog", help="the system both binaries run (`bench --systems`)")
    parser.add_argument("--threads", default="1,16,64,256")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2)
    parser.add_argument("--durability", default="synced")
    parser.add_argument("--no-wait", action="store_true", help="append only: the append path alone")
    args = parser.parse_args()
    ratios, olds, news = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            order = [("old", args.old), ("new", args.new)]
            if round_no % 2:
                order.reverse()
            results = {}
            for name, binary in order:
                results[name] = run(binary, args, args.threads, os.path.join(tmp, f"{name}.json"))
            for threads, new in results["new"].items():
                old = results["old"][threads]
                ratios.setdefault(threads, []).append(new / old)
                olds.setdefault(threads, []).append(old)
                news.setdefault(threads, []).append(new)
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    mode = "append only (--no-wait)" if args.no_wait else f"durability {args.durability}"
    print(f"system {args.system}, device {args.device}, {mode}, {args.rounds} rounds of {args.seconds} s, order alternating")
    print("| threads | old commits/s (median) | new commits/s (median) | new ÷ old, median of paired rounds | min..max |")
    print("|---:|---:|---:|---:|---|")
    for threads in sorted(ratios):
        r = ratios[threads]
        print(f"| {threads} | {statistics.median(olds[threads]):,.0f} | {statistics.median(news[threads]):,.0f} | "
              f"**{statistics.median(r):.3f}** | {min(r):.3f}..{max(r):.3f} |")


if __name__ == "__main__":
    main()

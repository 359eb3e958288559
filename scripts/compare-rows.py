#!/usr/bin/env python3
"""Same-run check of two benchmark binaries on any table they print
(docs/BENCHMARKS.md, "Same-run check of the house reorganisation").

Runs `OLD ARGS...` and `NEW ARGS...` in pairs, the order alternating from pair
to pair, picks from each run's output the lines matching --rows, and prints
for every key (column --key of those lines) the median of the old and new
values (column --value) and the median of the per-pair ratios new / old, with
the spread. Columns count from 1, whitespace-separated. The two binaries may
name the benchmark differently (`redolog bench` before the split,
`redolog-bench bench` after): ARGS are given to both as they are.

    scripts/compare-rows.py OLD NEW --rows '^redolog-raft ' --key 2 --value 3 --pairs 6 -- \\
        bench --workload raft --tasks 16,256 --time 2 --rounds 1 --device sim:100us --report-interval 0

When NEW's table has columns OLD's has not, or NEW needs a flag OLD does not
know, --new-key, --new-value and --new-arg (repeatable) apply to NEW only:

    scripts/compare-rows.py OLD NEW --rows '^redolog-raft ' --key 2 --value 3 \\
        --new-key 3 --new-value 4 --new-arg=--openraft --new-arg=0.9 -- bench --workload raft ...

Build OLD from the previous main in a worktree, e.g.
    git worktree add /tmp/old main~1 && (cd /tmp/old && cargo build --release)
"""

import argparse
import re
import statistics
import subprocess
import sys


def run(binary, args, rows, key, value):
    output = subprocess.run([binary] + args, check=True, capture_output=True, text=True).stdout
    found = {}
    for line in output.splitlines():
        if re.search(rows, line):
            columns = line.split()
            found[columns[key - 1]] = float(columns[value - 1])
    if not found:
        raise SystemExit(f"{binary}: no line matches {rows!r}")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rows", required=True, help="a regular expression for the table's lines")
    parser.add_argument("--key", type=int, required=True, help="the column that names a point")
    parser.add_argument("--value", type=int, required=True, help="the column to compare")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--new-key", type=int, help="NEW's --key, when its columns differ")
    parser.add_argument("--new-value", type=int, help="NEW's --value, when its columns differ")
    parser.add_argument("--new-arg", action="append", default=[], help="an argument for NEW only")
    argv = sys.argv[1:]
    if "--" not in argv:
        parser.error("give the benchmark's arguments after --")
    split = argv.index("--")
    options, args = parser.parse_args(argv[:split]), argv[split + 1 :]
    old, new = {}, {}
    for pair in range(options.pairs):
        order = [("old", options.old), ("new", options.new)]
        if pair % 2:
            order.reverse()
        for name, binary in order:
            if name == "old":
                columns = (args, options.key, options.value)
            else:
                columns = (args + options.new_arg, options.new_key or options.key, options.new_value or options.value)
            for point, value in run(binary, columns[0], options.rows, columns[1], columns[2]).items():
                (old if name == "old" else new).setdefault(point, []).append(value)
    print(f"{'point':>8} {'old (median)':>14} {'new (median)':>14} {'new / old':>10}   per pair")
    for point in old:
        ratios = [n / o for n, o in zip(new.get(point, []), old[point]) if o > 0]
        if not ratios:
            continue
        print(
            f"{point:>8} {statistics.median(old[point]):>14.1f} {statistics.median(new[point]):>14.1f} "
            f"{statistics.median(ratios):>10.3f}   {' '.join(f'{r:.2f}' for r in ratios)}"
        )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Every ratio row of two runs of datastore-bench side by side: compare-runs.py BEFORE AFTER.

Reads the lines the harness writes to standard error ("BACKEND OPERATION n=N: api As raw Rs (X of
raw)") from each run's saved output, matches rows by backend, operation and size, and prints a
Markdown table of the ratios before and after. A row is marked when it moved by more than the
run-to-run noise measured between two runs of one build (Benchmarks/README.md): 0.1 for a read,
0.3 for a write. PostgreSQL rows are left out (they have their own table).
"""
import re
import sys

LINE = re.compile(r"^(.*?) n=(\d+): api ([\d.]+)s raw ([\d.]+)s \(([\d.]+) of raw\)")
WRITES = ("insert", "writeSync", "writeAsync", "Migrator.copy", "import", "load", "cascade", "delete", "copy",
          "upgrade", "schema", "step", "rename", "add", "drop")


def rows(path):
    found = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        match = LINE.match(line.strip())
        if not match or "PostgreSQL" in match.group(1) or "postgres" in match.group(1).lower():
            continue
        found[(match.group(1), int(match.group(2)))] = float(match.group(5))
    return found


before, after = rows(sys.argv[1]), rows(sys.argv[2])
print("| row | items | before | after | change | |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
worse = better = 0
for key in sorted(set(before) | set(after), key=lambda k: (k[1], k[0])):
    name, n = key
    b, a = before.get(key), after.get(key)
    if b is None or a is None:
        print(f"| {name} | {n} | {'–' if b is None else f'{b:.2f}'} | {'–' if a is None else f'{a:.2f}'} | | new row |"
              if b is None else f"| {name} | {n} | {b:.2f} | – | | not in the new run |")
        continue
    noise = 0.3 if any(word in name for word in WRITES) else 0.1
    change = a - b
    mark = ""
    if change < -noise:
        mark, worse = "worse by more than the noise", worse + 1
    elif change > noise:
        mark, better = "better by more than the noise", better + 1
    print(f"| {name} | {n} | {b:.2f} | {a:.2f} | {change:+.2f} | {mark} |")
print(f"\n{len(set(before) & set(after))} rows in both runs: {worse} worse and {better} better by more than the noise.")

#!/usr/bin/env python3
"""Every ratio row of runs of datastore-bench side by side: compare-runs.py BEFORE AFTER [AFTER ...].

Reads the lines the harness writes to standard error ("BACKEND OPERATION n=N: api As raw Rs (X of
raw)") from each run's saved output, matches rows by backend, operation and size, and prints a
Markdown table of the ratio before and after: with several AFTER runs, their median and their
range (min–max). A row is marked when the median moved by more than the run-to-run noise measured
between two runs of one build (Benchmarks/README.md): 0.1 for a read, 0.3 for a write.
PostgreSQL rows are left out (they have their own table).
"""
import re
import statistics
import sys

LINE = re.compile(r"^(.*?) n=(\d+): api ([\d.]+)s raw ([\d.]+)s \(([\d.]+) of raw\)")
WRITES = ("insert", "writeSync", "writeAsync", "Migrator.copy", "import", "load", "cascade", "delete", "copy",
          "upgrade", "schema", "step", "rename", "add", "drop")


def rows(path):
    found = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        match = LINE.match(line.strip())
        if not match or "postgres" in match.group(1).lower():
            continue
        found[(match.group(1), int(match.group(2)))] = float(match.group(5))
    return found


before = rows(sys.argv[1])
afters = [rows(path) for path in sys.argv[2:]]
several = len(afters) > 1
print(f"| row | items | before | after{' (median of %d)' % len(afters) if several else ''} |"
      f"{' range |' if several else ''} change | |")
print(f"| --- | ---: | ---: | ---: |{' ---: |' if several else ''} ---: | --- |")
worse = better = both = 0
keys = set(before) | set().union(*afters)
for key in sorted(keys, key=lambda k: (k[1], k[0])):
    name, n = key
    values = [run[key] for run in afters if key in run]
    b = before.get(key)
    if b is None or not values:
        continue
    both += 1
    a = statistics.median(values)
    noise = 0.3 if any(word in name for word in WRITES) else 0.1
    change = a - b
    mark = ""
    if change < -noise:
        mark, worse = "worse by more than the noise", worse + 1
    elif change > noise:
        mark, better = "better by more than the noise", better + 1
    spread = f" {min(values):.2f}–{max(values):.2f} |" if several else ""
    print(f"| {name} | {n} | {b:.2f} | {a:.2f} |{spread} {change:+.2f} | {mark} |")
print(f"\n{both} rows in both: {worse} worse and {better} better by more than the noise.")
new = sorted(k for k in set().union(*afters) if k not in before)
if new:
    print("\nNew rows (no before):\n")
    print("| row | items | after |" + (" range |" if several else ""))
    print("| --- | ---: | ---: |" + (" ---: |" if several else ""))
    for key in sorted(new, key=lambda k: (k[1], k[0])):
        values = [run[key] for run in afters if key in run]
        spread = f" {min(values):.2f}–{max(values):.2f} |" if several else ""
        print(f"| {key[0]} | {key[1]} | {statistics.median(values):.2f} |{spread}")

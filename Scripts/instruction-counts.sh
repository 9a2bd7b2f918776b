#!/usr/bin/env bash
# The instruction counts of the stores' hot paths against the committed thresholds: each operation
# of Sources/hot-paths runs under callgrind, which counts the instructions of the operation alone
# (--toggle-collect), and the count per item must stay within 5 % of the one committed in
# Scripts/instruction-counts.txt. Counts, not times: the same on a busy machine as on an idle one.
#
#     Scripts/instruction-counts.sh            check (exit 1 when an operation costs 5 % more)
#     Scripts/instruction-counts.sh --update   write the counts of this build as the thresholds
#     Scripts/instruction-counts.sh --install  only install valgrind when it is missing
#
# Builds hot-paths in release into .build without any trait, the default Models off too (where
# Scripts/demo.sh, run by hand, builds migrate-store in release the same way and reuses the
# modules they share; neither fetches swift-syntax). Installs valgrind when it
# is missing (Debian's package).
set -euo pipefail
cd "$(dirname "$0")/.."
update=0 install_only=0
[ "${1:-}" = "--update" ] && update=1
[ "${1:-}" = "--install" ] && install_only=1
if ! command -v valgrind >/dev/null; then
    echo "instruction-counts: installing valgrind" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get install -y -q valgrind >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q valgrind >/dev/null; }
    else sudo apt-get install -y -q valgrind >/dev/null; fi
fi
[ "$install_only" -eq 1 ] && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# (DATASTORE_WARNINGS_AS_ERRORS=1, which CI sets, treats this package's warnings as errors, as the
# demo's build does: the same flags, so that a demo after it reuses what this build compiled.)
flags=()
[ "${DATASTORE_WARNINGS_AS_ERRORS:-}" = 1 ] && flags=(-Xswiftc -warnings-as-errors)
swift build -c release --disable-default-traits --product hot-paths "${flags[@]}" >"$work/build.log" 2>&1 \
    || { grep -E "error:" "$work/build.log" >&2; echo "instruction-counts: hot-paths does not build" >&2; exit 1; }
# valgrind cannot read the debug information Swift 6.3 writes; a copy without it keeps the symbols.
objcopy --strip-debug .build/release/hot-paths "$work/hot-paths"
thresholds=Scripts/instruction-counts.txt
# 5,000 items: the fixed costs of a store (its open, a query's 100 statements) weigh twice what they
# do at 10,000, which the lines were counted at until 3 December 2026; the count under callgrind
# takes a third of the time.
count=5000
measured="$work/measured.txt"
backends=(sqlite lmdb memory)
operations=(insert get fetch forEach visit query unindexed typed-fetch typed-insert model-fetch model-insert small small-off)
# Every operation of a backend in one process, each on a store of its own (callgrind's start is
# about 2.4 s of CPU a run here, more than most operations' count; one process per operation
# counted the same lines within -2.4 % and +0.5 %): callgrind dumps what it counted each time
# runHotPath is entered (--dump-before, which matches the symbol's start: a leading * matched
# nothing), so BACKEND.out.1 is empty, BACKEND.out.2 is the first operation's count, and
# BACKEND.out, written at the end, the last one's. Counts do not depend on what else runs, so the backends run as many at a time as
# there are cores.
measure() {
    local backend=$1 name="$work/$1"
    SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind --toggle-collect='*runHotPath*' \
        --dump-before='$s9hot_paths10runHotPath*' --callgrind-out-file="$name.out" \
        "$work/hot-paths" "$backend" "$list" "$count" >/dev/null 2>"$name.log" \
        || { cat "$name.log" >&2; echo "instruction-counts: $backend failed" >&2; return 1; }
}
export -f measure
export work count
list=$(IFS=,; echo "${operations[*]}")
export list
printf '%s\n' "${backends[@]}" | xargs -P "$(nproc)" -L 1 bash -c 'measure $0' || exit 1
for backend in "${backends[@]}"; do
    part=2
    for operation in "${operations[@]}"; do
        file="$work/$backend.out.$part"
        [ "$operation" = "${operations[-1]}" ] && file="$work/$backend.out"
        total=$(sed -n 's/^totals: \([0-9]*\).*/\1/p' "$file")
        [ -n "$total" ] || { echo "instruction-counts: no count of $backend $operation in $file" >&2; exit 1; }
        echo "$backend $operation $(( total / count ))" >>"$measured"
        part=$(( part + 1 ))
    done
done
if [ "$update" -eq 1 ]; then
    # Each line's number is replaced, and the comments written above the lines kept: the reasons
    # why a line was raised stay next to it.
    python3 - "$thresholds" "$measured" "$count" <<'PY'
import sys
path, measured, count = sys.argv[1], sys.argv[2], sys.argv[3]
counts = {}
order = []
for line in open(measured):
    backend, operation, number = line.split()
    counts[(backend, operation)] = number
    order.append((backend, operation))
out = [f"# Instructions per item of each hot path (Scripts/instruction-counts.sh; {count} items, callgrind).\n",
       "# A check fails when an operation costs more than 5 % above its line.\n"]
written = set()
lines = open(path).readlines()[2:]
for line in lines:
    if line.strip() and not line.startswith("#"):
        backend, operation, _ = line.split()
        if (backend, operation) not in counts:
            continue
        written.add((backend, operation))
        line = f"{backend} {operation} {counts[(backend, operation)]}\n"
    out.append(line)
out += [f"{b} {o} {counts[(b, o)]}\n" for (b, o) in order if (b, o) not in written]
open(path, "w").write("".join(out))
PY
    cat "$thresholds"
    exit 0
fi
python3 - "$thresholds" "$measured" <<'PY'
import sys
committed = {}
for line in open(sys.argv[1]):
    if line.strip() and not line.startswith("#"):
        backend, operation, count = line.split()
        committed[(backend, operation)] = int(count)
failed = []
print(f"{'backend':8} {'operation':13} {'threshold':>10} {'measured':>10} {'change':>8}")
for line in open(sys.argv[2]):
    backend, operation, count = line.split()
    count = int(count)
    limit = committed.get((backend, operation))
    if limit is None:
        failed.append(f"{backend} {operation}: no threshold committed")
        continue
    change = (count - limit) / limit * 100
    print(f"{backend:8} {operation:13} {limit:>10} {count:>10} {change:>+7.1f}%")
    if count > limit * 1.05:
        failed.append(f"{backend} {operation}: {count} instructions per item, {change:+.1f}% over the threshold {limit}")
if failed:
    sys.exit("instruction-counts: a hot path regressed by more than 5 %:\n  " + "\n  ".join(failed))
print("instruction-counts: every hot path within 5 % of its threshold")
PY

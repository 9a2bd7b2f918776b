#!/usr/bin/env bash
# Peak memory of migrate-store copies at 100,000 and 1,000,000 items, both directions, and of
# exporting to and importing from JSON Lines (plain and gzip-compressed).
#
#     Scripts/measure-memory.sh                  # the table in the README's Memory section
#     Scripts/measure-memory.sh --large 10000000 # one SQLite -> LMDB copy of that many items (with times)
# Prints peak VmRSS (all resident memory), RssAnon (heap and stacks) and RssFile (file pages
# mapped into the process: LMDB's memory map) sampled every 20 ms from /proc.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh
swift build -c release --product migrate-store
bin="$(swift build -c release --show-bin-path)/migrate-store"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = "--large" ]; then
    n="${2:?usage: measure-memory.sh --large ITEMS}"
    start=$(date +%s)
    "$bin" seed --to "sqlite:$work/s.sqlite" --items "$n" --progress none >/dev/null
    seeded=$(date +%s)
    echo "seeded $n items in $((seeded - start)) s"
    echo -n "$n items sqlite->lmdb: "
    python3 Scripts/peak-rss.py "$bin" copy --from "sqlite:$work/s.sqlite" --to "lmdb:$work/l.lmdb" --progress none
    echo "copied in $(($(date +%s) - seeded)) s (the copy's check of the source and its verification included)"
    exit 0
fi
for n in 100000 1000000; do
    "$bin" seed --to "sqlite:$work/s$n.sqlite" --items "$n" --progress none >/dev/null
    echo -n "$n items sqlite->lmdb: "
    python3 Scripts/peak-rss.py "$bin" copy --from "sqlite:$work/s$n.sqlite" --to "lmdb:$work/l$n.lmdb" --progress none
    echo -n "$n items lmdb->sqlite: "
    python3 Scripts/peak-rss.py "$bin" copy --from "lmdb:$work/l$n.lmdb" --to "sqlite:$work/b$n.sqlite" --progress none
    for ext in jsonl jsonl.gz; do
        echo -n "$n items sqlite->$ext: "
        python3 Scripts/peak-rss.py "$bin" copy --from "sqlite:$work/s$n.sqlite" --to "jsonl:$work/e$n.$ext" --progress none
        echo -n "$n items $ext->lmdb: "
        python3 Scripts/peak-rss.py "$bin" copy --from "jsonl:$work/e$n.$ext" --to "lmdb:$work/i$n-$ext.lmdb" --progress none
        echo -n "$n items $ext->sqlite: "
        python3 Scripts/peak-rss.py "$bin" copy --from "jsonl:$work/e$n.$ext" --to "sqlite:$work/i$n-$ext.sqlite" --progress none
    done
done

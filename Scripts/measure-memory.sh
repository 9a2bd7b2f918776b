#!/usr/bin/env bash
# Peak memory of migrate-store copies at 100,000 and 1,000,000 items, both directions, and of
# exporting to and importing from JSON Lines (plain and gzip-compressed).
#
#     Scripts/measure-memory.sh                  # the table in the README's Memory section
#     Scripts/measure-memory.sh --large 10000000 # one SQLite -> LMDB copy of that many items (with times)
#     Scripts/measure-memory.sh --import         # JSON import of 100,000 and 1,000,000 customers with two
#                                                # nested orders each, into SQLite and LMDB
# Prints peak VmRSS (all resident memory), RssAnon (heap and stacks) and RssFile (file pages
# mapped into the process: LMDB's memory map) sampled every 20 ms from /proc.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh
swift build -c release --product migrate-store
bin="$(swift build -c release --show-bin-path)/migrate-store"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = "--import" ]; then
    for n in 100000 1000000; do
        python3 - "$n" "$work/customers$n.json" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as out:
    out.write("[")
    for i in range(n):
        orders = ",".join(
            '{"id":%d,"quantity":%d,"total":%d.5,"placed_at":"2024-01-02T03:04:05+00:00","note":"order %d"}'
            % (i * 2 + k, k + 1, k, i * 2 + k) for k in range(2))
        out.write('%s\n{"id":"00000000-0000-0000-0000-%012d","name":"customer %d","email":"c%d@example.com",'
                  '"vip":false,"balance":%d.25,"joined_at":1700000000,"orders":[%s]}'
                  % ("," if i else "", i, i, i, i, orders))
    out.write("\n]\n")
PY
        for kind in sqlite lmdb; do
            "$bin" seed --to "$kind:$work/import$n.$kind" --items 10 --progress none >/dev/null
            echo -n "import of $n customers with 2 nested orders each ($((n * 3)) items, $(( $(stat -c %s "$work/customers$n.json") / 1048576 )) MiB of JSON) into $kind: "
            start=$(date +%s)
            python3 Scripts/peak-rss.py "$bin" import --to "$kind:$work/import$n.$kind" --entity Customer "$work/customers$n.json"
            echo "  in $(($(date +%s) - start)) s"
        done
    done
    exit 0
fi
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

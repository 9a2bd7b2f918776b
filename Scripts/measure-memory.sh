#!/usr/bin/env bash
# Peak memory of migrate-store copies at 100,000 and 1,000,000 items, both directions.
# Prints peak VmRSS (all resident memory), RssAnon (heap and stacks) and RssFile (file pages
# mapped into the process: LMDB's memory map) sampled every 20 ms from /proc.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh
swift build -c release --product migrate-store
bin="$(swift build -c release --show-bin-path)/migrate-store"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for n in 100000 1000000; do
    "$bin" seed --to "sqlite:$work/s$n.sqlite" --items "$n" --progress none >/dev/null
    echo -n "$n items sqlite->lmdb: "
    python3 Scripts/peak-rss.py "$bin" copy --from "sqlite:$work/s$n.sqlite" --to "lmdb:$work/l$n.lmdb" --progress none
    echo -n "$n items lmdb->sqlite: "
    python3 Scripts/peak-rss.py "$bin" copy --from "lmdb:$work/l$n.lmdb" --to "sqlite:$work/b$n.sqlite" --progress none
done

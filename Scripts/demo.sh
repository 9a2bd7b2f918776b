#!/usr/bin/env bash
# The demo: installs what is missing, builds migrate-store (release), seeds a demo SQLite store,
# migrates it to LMDB with progress, verifies it item by item and prints the summary.
#     Scripts/demo.sh [ITEMS]        (default 100000; the stores go to ./demo/)
set -euo pipefail
cd "$(dirname "$0")/.."
items="${1:-100000}"
Scripts/install-deps.sh
# (DATASTORE_WARNINGS_AS_ERRORS=1, which CI sets, treats this package's warnings as errors.)
flags=()
[ "${DATASTORE_WARNINGS_AS_ERRORS:-}" = 1 ] && flags=(-Xswiftc -warnings-as-errors)
swift build -c release --product migrate-store "${flags[@]}"
bin="$(swift build -c release --show-bin-path)/migrate-store"
mkdir -p demo
rm -rf demo/app.sqlite demo/app.sqlite-wal demo/app.sqlite-shm demo/app.lmdb
"$bin" seed --to sqlite:demo/app.sqlite --items "$items" --seed 42
"$bin" copy --from sqlite:demo/app.sqlite --to lmdb:demo/app.lmdb --report demo/summary.json
"$bin" inspect lmdb:demo/app.lmdb
echo "summary written to demo/summary.json"

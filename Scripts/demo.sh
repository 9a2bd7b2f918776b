#!/usr/bin/env bash
# The demo: installs what is missing, builds migrate-store (release), seeds a demo SQLite store,
# migrates it to LMDB with progress, verifies it item by item and prints the summary.
#     Scripts/demo.sh [ITEMS]        (default 100000; the stores go to ./demo/)
#
# DATASTORE_MIGRATE_STORE=PATH runs that migrate-store instead of building one: CI passes the
# test command's build of it (compiled with -O), which is built by then (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
items="${1:-100000}"
Scripts/install-deps.sh
# (DATASTORE_WARNINGS_AS_ERRORS=1, which CI sets, treats this package's warnings as errors.)
flags=()
[ "${DATASTORE_WARNINGS_AS_ERRORS:-}" = 1 ] && flags=(-Xswiftc -warnings-as-errors)
if [ -n "${DATASTORE_MIGRATE_STORE:-}" ]; then
    bin=$DATASTORE_MIGRATE_STORE
    [ -x "$bin" ] || { echo "demo.sh: DATASTORE_MIGRATE_STORE names $bin, which is not an executable" >&2; exit 1; }
else
    # Without the default trait Models: migrate-store does not use the model macro, so the demo
    # neither fetches nor builds swift-syntax.
    swift build -c release --disable-default-traits --product migrate-store "${flags[@]}"
    bin="$(swift build -c release --disable-default-traits --show-bin-path)/migrate-store"
fi
mkdir -p demo
rm -rf demo/app.sqlite demo/app.sqlite-wal demo/app.sqlite-shm demo/app.lmdb
"$bin" seed --to sqlite:demo/app.sqlite --items "$items" --seed 42
"$bin" copy --from sqlite:demo/app.sqlite --to lmdb:demo/app.lmdb --report demo/summary.json
"$bin" inspect lmdb:demo/app.lmdb
echo "summary written to demo/summary.json"

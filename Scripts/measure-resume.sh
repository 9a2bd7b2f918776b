#!/usr/bin/env bash
# What a resume costs next to a fresh copy: seeds a SQLite store with the demo data, copies it
# into LMDB, then copies it again, kills that copy with SIGKILL after the given seconds and times
# `copy --resume`. Both copies run without the source check and the verification, so that the
# times are the copy's alone.
#
#     Scripts/measure-resume.sh                # 1,000,000 items, killed after 3 s and after 8 s
#     Scripts/measure-resume.sh 1000000 5 12   # items, then kill delays in seconds
set -euo pipefail
cd "$(dirname "$0")/.."
items="${1:-1000000}"
shift || true
delays=("${@:-3 8}")
Scripts/install-deps.sh
swift build -c release --product migrate-store
bin="$(swift build -c release --show-bin-path)/migrate-store"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" seed --to "sqlite:$work/source.sqlite" --items "$items" --progress none >/dev/null
flags=(--progress none --no-verify --no-check)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for delay in ${delays[*]}; do
    rm -rf "$work"/*.lmdb "$work"/*.migrating*
    start=$(date +%s%N)
    "$bin" copy --from "sqlite:$work/source.sqlite" --to "lmdb:$work/fresh.lmdb" "${flags[@]}" >/dev/null
    echo "fresh copy of $items items: $(ms "$start") ms"
    "$bin" copy --from "sqlite:$work/source.sqlite" --to "lmdb:$work/killed.lmdb" "${flags[@]}" >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    if ! kill -KILL "$pid" 2>/dev/null; then
        echo "the copy finished before ${delay} s: choose a shorter delay" >&2
        exit 1
    fi
    wait "$pid" 2>/dev/null || true
    start=$(date +%s%N)
    "$bin" copy --from "sqlite:$work/source.sqlite" --to "lmdb:$work/killed.lmdb" --resume "${flags[@]}" \
        --report "$work/report.json" >/dev/null
    echo "resume after a SIGKILL at ${delay} s: $(ms "$start") ms"
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("  items written by the resume:", sum(e["itemsWritten"] for e in r["entities"]))' "$work/report.json"
done

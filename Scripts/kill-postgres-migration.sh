#!/usr/bin/env bash
# A migration SQLite -> PostgreSQL of ITEMS items (default 1,000,000) killed with SIGKILL, then
# finished with `copy --resume`, then checked to be exact: `verify` item for item (exit 0,
# 0 differences) and the counts of every entity in both stores.
#
#     Scripts/kill-postgres-migration.sh [ITEMS] [SECONDS ...]
#
# Each SECONDS is one run of the copy killed after that long (default: 12 and 12: the first
# run, then a resumed run, killed). Uses the release build of migrate-store with the
# `Postgres` trait (built into .build-pg when missing) and a throwaway PostgreSQL 15 server.
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-1000000}
shift || true
delays=("$@")
[ ${#delays[@]} -eq 0 ] && delays=(12 12)
bin=.build-pg/release/migrate-store
if [ ! -x "$bin" ]; then
    swift build -c release --traits Postgres --scratch-path .build-pg --product migrate-store
fi
dir=$(mktemp -d /tmp/kill-pg-XXXXXX)
chmod 755 "$dir"
trap 'Scripts/postgres-server.sh stop "$dir/pg"; rm -rf "$dir"' EXIT
Scripts/postgres-server.sh start "$dir/pg" >/dev/null
source="sqlite:$dir/source.sqlite"
target="postgres://postgres@/datastore?schema=killed&host=$dir/pg"

milliseconds() { echo $(( $(date +%s%N) / 1000000 )); }
elapsed() { local ms=$(( $(milliseconds) - $1 )); printf "%d.%03d" $((ms / 1000)) $((ms % 1000)); }
t0=$(milliseconds)
"$bin" seed --to "$source" --items "$items" --progress none >/dev/null
echo "seeded $items items in $(elapsed "$t0") s"

resume=()
for delay in "${delays[@]}"; do
    "$bin" copy --from "$source" --to "$target" --progress none "${resume[@]}" >"$dir/run.log" 2>&1 &
    pid=$!
    sleep "$delay"
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null || true
        echo "killed the copy with SIGKILL after $delay s ($([ ${#resume[@]} -eq 0 ] && echo first run || echo resumed run))"
    else
        wait "$pid" || true
        echo "the copy ended before $delay s:"; cat "$dir/run.log"
    fi
    resume=(--resume)
done

t0=$(milliseconds)
"$bin" copy --from "$source" --to "$target" --progress none --resume --report "$dir/report.json"
echo "resumed copy: $(elapsed "$t0") s"
python3 - "$dir/report.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
e = r["entities"]
print("report: resumed", r["resumed"], "verified", r["verified"], "items read", sum(x["itemsRead"] for x in e),
      "written", sum(x["itemsWritten"] for x in e), "verified", sum(x["itemsVerified"] for x in e),
      "differences", sum(x["differences"] for x in e))
sys.exit(0 if r["verified"] and all(x["differences"] == 0 for x in e) else 1)
EOF

"$bin" verify --from "$source" --to "$target"
for entity in Customer Product Order; do
    left=$(sqlite3 "$dir/source.sqlite" "SELECT count(*) FROM \"$entity\"")
    right=$(psql -h "$dir/pg" -U postgres -d datastore -Atc "SELECT count(*) FROM killed.\"$entity\"")
    echo "$entity: sqlite $left, postgres $right"
    [ "$left" = "$right" ] || { echo "counts differ for $entity" >&2; exit 1; }
done
echo "exact: verify found 0 differences and every entity's count matches"

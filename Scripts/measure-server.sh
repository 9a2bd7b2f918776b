#!/usr/bin/env bash
# Loads the example server (Examples/NotesServer) with wrk: 64 connections for DURATION seconds
# (30 by default) on each backend, with the handlers calling the store's async API and then its
# synchronous one; prints requests per second and latency percentiles for each.
#
#     Scripts/measure-server.sh [DURATION]
#
# Each request is GET /notes/ID for one of 1,000 notes (wrk's Lua picks ID at random), a read
# of one item, so that the figures are the server's and the store's, not JSON's. Builds
# notes-server in release mode into .build-release first; needs wrk (apt-get install wrk) and,
# for PostgreSQL, Scripts/postgres-server.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-30}
command -v wrk >/dev/null || { echo "measure-server.sh: wrk is missing (apt-get install wrk)" >&2; exit 1; }
swift build -c release --traits Postgres,ExampleServer --product notes-server --scratch-path .build-release
server=.build-release/release/notes-server
work=$(mktemp -d)
pgdir="${TMPDIR:-/tmp}/datastore-pg-measure-$$"
Scripts/postgres-server.sh start "$pgdir" >/dev/null
trap 'Scripts/postgres-server.sh stop "$pgdir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
cat > "$work/random-note.lua" <<'LUA'
request = function() return wrk.format("GET", "/notes/" .. math.random(1, 1000)) end
LUA
printf '| Backend | API | Requests/s | p50 | p99 |\n| --- | --- | ---: | ---: | ---: |\n'
for backend in sqlite lmdb postgres; do
    for api in async sync; do
        case $backend in
            postgres) store="postgres://postgres@/datastore?schema=load_${api}&host=$pgdir" ;;
            *) store="$backend:$work/notes-$api.$backend" ;;
        esac
        "$server" --store "$store" --port 0 --api "$api" --seed 1000 > "$work/server.out" 2>&1 &
        pid=$!
        for _ in $(seq 1 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
        port=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$work/server.out" | head -1)
        out=$(wrk -t2 -c64 -d"${duration}s" --latency -s "$work/random-note.lua" "http://127.0.0.1:$port")
        kill "$pid"; wait "$pid" 2>/dev/null || true
        rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
        p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
        p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
        errors=$(echo "$out" | awk '/Non-2xx|Socket errors/ {print}')
        printf '| %s | %s | %s | %s | %s |%s\n' "$backend" "$api" "$rps" "$p50" "$p99" "${errors:+ $errors}"
    done
done

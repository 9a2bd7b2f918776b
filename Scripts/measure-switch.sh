#!/usr/bin/env bash
# Measures what a switching store costs the app writing through it, on each pair of backends
# (SQLite to LMDB, LMDB to SQLite, SQLite to PostgreSQL, in-memory to SQLite), with
# `crash-writer switch-bench` built in release mode into .build-release: one switch of a store
# of ITEMS items (1,000,000 by default), then RUNS switches of 100,000 items (10 by default).
# For each it prints the app's write latency (one transaction every 2 ms) without a copy and
# while the copy and follow ran, the write that waited for the cutover, the cutover's pause as
# the store measured it, and the copy's pace.
#
#     Scripts/measure-switch.sh [ITEMS] [RUNS] [PAIR...]
#
# The app writes to PostgreSQL's pair every 10 ms rather than 2: the follow applies each item
# to PostgreSQL in a statement of its own, and an app writing 5,000 items a second outpaces it
# on 2 cores, so that the switch stays in its follow (as its lag shows).
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-1000000}
runs=${2:-10}
shift 2 || true
pairs=${*:-sqlite-lmdb lmdb-sqlite sqlite-postgres memory-sqlite}
# CRASH_WRITER names a release build of crash-writer to use instead of building one.
tool=${CRASH_WRITER:-.build-release/release/crash-writer}
[ -n "${CRASH_WRITER:-}" ] || swift build -c release --traits Postgres --product crash-writer --scratch-path .build-release >&2
work=$(mktemp -d)
pgdir="${TMPDIR:-/tmp}/datastore-pg-switch-$$"
Scripts/postgres-server.sh start "$pgdir" >/dev/null
trap 'Scripts/postgres-server.sh stop "$pgdir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
run=0
measure() { # PAIR SIZE
    run=$((run + 1))
    case $1 in
        sqlite-lmdb) old="sqlite:$work/$run.sqlite"; new="lmdb:$work/$run.lmdb" ;;
        lmdb-sqlite) old="lmdb:$work/$run.lmdb"; new="sqlite:$work/$run.sqlite" ;;
        sqlite-postgres) old="sqlite:$work/$run.sqlite"; new="postgres:postgres://postgres@/datastore?schema=switch_$run&host=$pgdir" ;;
        memory-sqlite) old="memory:m$run"; new="sqlite:$work/$run.sqlite" ;;
    esac
    echo "## $1, $2 items"
    gap=2; [ "$1" = sqlite-postgres ] && gap=10
    "$tool" switch-bench "$old" "$new" "$2" gap "$gap"
    rm -rf "$work"/"$run".*
}
for pair in $pairs; do
    measure "$pair" "$items"
    for _ in $(seq 1 "$runs"); do measure "$pair" 100000; done
done

#!/usr/bin/env bash
# The client's CPU per commit in the writers table's processes row: N processes of
# `datastore-bench --writer-child` (a PostgresStore and one thread each, one-insert writeSyncs for
# SECONDS), each under /usr/bin/time, on the server in PGHOST (Scripts/postgres-server.sh start
# DIR prints it). Prints the commits, the clients' user and system CPU-s summed, and the jiffies
# the whole machine was busy and idle meanwhile (/proc/stat). Run once with SECONDS 0.01 to see
# what starting the processes and opening their stores costs.
#
#     Benchmarks/pgbench/writer-processes-cpu.sh N SECONDS
set -euo pipefail
n=$1 seconds=$2
bench=$(dirname "$0")/../.build/release/datastore-bench
url="postgres://postgres@/datastore?schema=bench_writer_cpu&host=${PGHOST:?set PGHOST to the socket directory of the server}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
base=$(( $(date +%s) % 100000 * 100000000 ))
# The store made first, by one short writer.
echo go | "$bench" --writer-child "$url,0.01,$base" >/dev/null
busy() { awk '/^cpu / { print $2 + $3 + $4 + $6 + $7 + $8, $5 }' /proc/stat; }
read -r busy0 idle0 < <(busy)
for i in $(seq 1 "$n"); do
    # Each process waits for its "go" a second, so that all start writing together.
    ( /usr/bin/time -f "%U %S" -o "$work/time.$i" "$bench" --writer-child "$url,$seconds,$(( base + i * 1000000 ))" \
        < <(sleep 1; echo go) >"$work/out.$i" ) &
done
wait
read -r busy1 idle1 < <(busy)
commits=$(cat "$work"/out.* | awk '/^done/ { n += $2 } END { print n + 0 }')
cpu=$(cat "$work"/time.* | awk '{ u += $1; s += $2 } END { printf "%.2f user, %.2f system", u, s }')
rate=$(awk -v c="$commits" -v s="$seconds" 'BEGIN { printf "%.0f", c / s }')
echo "$n processes, $seconds s: $commits commits ($rate/s); clients $cpu CPU-s; machine busy $(( busy1 - busy0 )), idle $(( idle1 - idle0 )) jiffies"

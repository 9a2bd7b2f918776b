#!/usr/bin/env bash
# A primary and a streaming standby on loopback for the failover test, with synchronous
# replication (synchronous_standby_names = '*': a commit is acknowledged once the standby has
# it on disk):
#   start DIR PRIMARY_PORT STANDBY_PORT [async]
#                                         initdb the primary, pg_basebackup -R the standby, start both
#                                         (with async, replication stays asynchronous: a commit does
#                                         not wait for the standby, which replays it later)
#   kill-primary DIR                      SIGKILL every process of the primary at once
#   promote DIR                           pg_ctl promote the standby, waiting until it accepts writes
#   stop-standby DIR, start-standby DIR   stop the standby (fast: its sessions are ended) or start it again
#   stop DIR                              stop what still runs and remove DIR
# Each server also listens on a Unix socket in its own directory. Runs them as the postgres
# user (initdb refuses root).
set -euo pipefail
usage="usage: postgres-replicas.sh start DIR PORT1 PORT2 [async] | kill-primary DIR | promote DIR | stop-standby DIR | start-standby DIR | stop DIR"
command=${1:?$usage}
dir=${2:?DIR}
bin=/usr/lib/postgresql/15/bin
. "$(dirname "${BASH_SOURCE[0]}")/lib/as-postgres.sh"
# Starts the server of $dir/$1 (primary, standby); when it does not start, says why: the end of
# its log, where PostgreSQL writes the reason (a port taken, the memory it could not have).
start_server() {
    as_postgres "$bin/pg_ctl" -D "$dir/$1" -l "$dir/$1.log" -w start >/dev/null && return 0
    echo "postgres-replicas.sh: the $1 did not start; the end of $dir/$1.log:" >&2
    tail -n 15 "$dir/$1.log" >&2 || true
    return 1
}
case "$command" in
start)
    primary_port=${3:?PRIMARY_PORT}
    standby_port=${4:?STANDBY_PORT}
    mkdir -p "$dir"
    chown postgres "$dir" 2>/dev/null || true
    as_postgres mkdir -p "$dir/primary-socket" "$dir/standby-socket"
    as_postgres "$bin/initdb" -D "$dir/primary" -U postgres --auth=trust --encoding=UTF8 --locale=C >/dev/null
    cat >> "$dir/primary/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $primary_port
unix_socket_directories = '$dir/primary-socket'
wal_level = replica
max_wal_senders = 5
synchronous_commit = on
fsync = on
CONF
    start_server primary
    as_postgres "$bin/createdb" -h "$dir/primary-socket" -p "$primary_port" -U postgres datastore
    as_postgres "$bin/pg_basebackup" -h "$dir/primary-socket" -p "$primary_port" -U postgres -D "$dir/standby" -R -X stream -c fast
    cat >> "$dir/standby/postgresql.conf" <<CONF
port = $standby_port
unix_socket_directories = '$dir/standby-socket'
CONF
    start_server standby
    # Waits (at most 10 s) until pg_stat_replication's COLUMN says VALUE for the standby.
    replication_is() {
        local state=""
        for _ in $(seq 100); do
            state=$(as_postgres psql -h "$dir/primary-socket" -p "$primary_port" -U postgres -d datastore -Atc \
                "SELECT $1 FROM pg_stat_replication" 2>/dev/null || true)
            [ "$state" = "$2" ] && return 0
            sleep 0.1
        done
        echo "postgres-replicas.sh: the standby's $1 is '$state', not $2" >&2
        return 1
    }
    if [ "${5:-sync}" = async ]; then
        replication_is state streaming
        exit 0
    fi
    # Synchronous from now on (createdb and the base backup would have waited for a standby).
    as_postgres psql -q -h "$dir/primary-socket" -p "$primary_port" -U postgres -d datastore \
        -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
    # Until the standby streams, a synchronous commit would wait.
    replication_is sync_state sync
    ;;
kill-primary)
    pid=$(head -1 "$dir/primary/postmaster.pid")
    children=$(pgrep -P "$pid" || true)
    kill -9 "$pid" $children 2>/dev/null || true
    ;;
promote)
    as_postgres "$bin/pg_ctl" -D "$dir/standby" -w promote >/dev/null
    ;;
stop-standby)
    as_postgres "$bin/pg_ctl" -D "$dir/standby" -m fast -w stop >/dev/null
    ;;
start-standby)
    start_server standby
    ;;
stop)
    for server in primary standby; do
        if [ -f "$dir/$server/postmaster.pid" ]; then
            as_postgres "$bin/pg_ctl" -D "$dir/$server" -m immediate -w stop >/dev/null 2>&1 || true
        fi
    done
    rm -rf "$dir"
    ;;
*) echo "$usage" >&2; exit 64 ;;
esac

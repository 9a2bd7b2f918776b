#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server for the tests: `start DIR` installs postgresql-15 when it is
# missing, runs initdb as the postgres user in DIR (initdb refuses root), starts the server
# listening on a Unix socket in DIR only (no TCP), creates the database `datastore`, and prints
# the environment that points libpq-style clients at it; `stop DIR` stops it and removes DIR;
# `install` only installs postgresql-15 when missing, with pg_auto_failover (Debian's
# postgresql-15-auto-failover, which the failover test runs), exit 1 when it cannot.
set -euo pipefail
command=${1:?usage: postgres-server.sh start|stop DIR, or install}
bin=/usr/lib/postgresql/15/bin
install() {
    [ -x "$bin/initdb" ] && command -v psql >/dev/null 2>&1 && command -v pg_autoctl >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || return 1
    sudo_cmd=""
    if [ "$(id -u)" -ne 0 ]; then sudo -n true 2>/dev/null || return 1; sudo_cmd="sudo -n"; fi
    echo "Installing postgresql-15 and pg_auto_failover" >&2
    $sudo_cmd apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq postgresql-15 postgresql-client-15 \
        postgresql-15-auto-failover >/dev/null || return 1
    # Debian's package starts a cluster of its own; the tests never use it.
    [ -x "$bin/initdb" ]
}
if [ "$command" = install ]; then install; exit $?; fi
dir=${2:?usage: postgres-server.sh start|stop DIR}
# Runs a command as the postgres user. runuser and sudo reset the soft limit of open files
# (1,024 here), and initdb and the server also inherit the caller's open files (a test process
# may hold many): the command runs with its soft limit raised to the hard one.
as_postgres() {
    local raised=(bash -c 'ulimit -n "$(ulimit -Hn)" 2>/dev/null || true; exec "$@"' as_postgres "$@")
    if [ "$(id -un)" = postgres ]; then "${raised[@]}"; elif [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "${raised[@]}";
    else sudo -u postgres "${raised[@]}"; fi
}
. "$(dirname "${BASH_SOURCE[0]}")/lib/close-inherited.sh"
case "$command" in
start)
    close_inherited
    install || { echo "postgres-server.sh: PostgreSQL 15 is not installed and cannot be installed" >&2; exit 1; }
    mkdir -p "$dir"
    chown postgres "$dir" 2>/dev/null || true
    as_postgres "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C >/dev/null
    # PG_LISTEN (addresses), PG_PORT and PG_SSL_DIR (server.crt and server.key) make a server on
    # TCP, with TLS, for the TLS tests; by default it listens on its Unix socket only. PG_OPTIONS
    # adds settings (-c lc_messages=de_DE.UTF-8 for the tests in German).
    options="-c listen_addresses='${PG_LISTEN:-}' -c port=${PG_PORT:-5432} -c unix_socket_directories='$dir'"
    options="$options -c fsync=on -c max_connections=200 ${PG_OPTIONS:-}"
    if [ -n "${PG_LISTEN:-}" ]; then
        echo "host all all 0.0.0.0/0 trust" >> "$dir/data/pg_hba.conf"
        echo "host all all ::/0 trust" >> "$dir/data/pg_hba.conf"
    fi
    if [ -n "${PG_SSL_DIR:-}" ]; then
        command install -o postgres -m 600 "$PG_SSL_DIR/server.crt" "$PG_SSL_DIR/server.key" "$dir/data/"
        options="$options -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key"
    fi
    as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o "$options" start >/dev/null
    as_postgres "$bin/createdb" -h "$dir" -p "${PG_PORT:-5432}" -U postgres datastore
    echo "PGHOST=$dir PGPORT=${PG_PORT:-5432} PGUSER=postgres PGDATABASE=datastore"
    ;;
stop)
    if [ -d "$dir/data" ]; then as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true; fi
    rm -rf "$dir"
    ;;
*) echo "usage: postgres-server.sh start|stop DIR, or install" >&2; exit 64 ;;
esac

#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server for the tests: `start DIR` installs postgresql-15 when it is
# missing, runs initdb as the postgres user in DIR (initdb refuses root), starts the server
# listening on a Unix socket in DIR only (no TCP), creates the database `datastore`, and prints
# the environment that points libpq-style clients at it; `stop DIR` stops it and removes DIR;
# `install` only installs postgresql-15 when missing (exit 1 when it cannot).
set -euo pipefail
command=${1:?usage: postgres-server.sh start|stop DIR, or install}
bin=/usr/lib/postgresql/15/bin
install() {
    [ -x "$bin/initdb" ] && command -v psql >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || return 1
    sudo_cmd=""
    if [ "$(id -u)" -ne 0 ]; then sudo -n true 2>/dev/null || return 1; sudo_cmd="sudo -n"; fi
    echo "Installing postgresql-15" >&2
    $sudo_cmd apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq postgresql-15 postgresql-client-15 >/dev/null || return 1
    # Debian's package starts a cluster of its own; the tests never use it.
    [ -x "$bin/initdb" ]
}
if [ "$command" = install ]; then install; exit $?; fi
dir=${2:?usage: postgres-server.sh start|stop DIR}
as_postgres() {
    if [ "$(id -un)" = postgres ]; then "$@"; elif [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@";
    else sudo -u postgres "$@"; fi
}
case "$command" in
start)
    install || { echo "postgres-server.sh: PostgreSQL 15 is not installed and cannot be installed" >&2; exit 1; }
    mkdir -p "$dir"
    chown postgres "$dir" 2>/dev/null || true
    as_postgres "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C >/dev/null
    as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=on -c max_connections=200" start >/dev/null
    as_postgres "$bin/createdb" -h "$dir" -U postgres datastore
    echo "PGHOST=$dir PGUSER=postgres PGDATABASE=datastore"
    ;;
stop)
    if [ -d "$dir/data" ]; then as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true; fi
    rm -rf "$dir"
    ;;
*) echo "usage: postgres-server.sh start|stop DIR, or install" >&2; exit 64 ;;
esac

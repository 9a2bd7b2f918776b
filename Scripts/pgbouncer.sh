#!/usr/bin/env bash
# A throwaway pgbouncer in transaction pooling mode in front of a test server:
# `start DIR SERVER_SOCKET_DIR [SERVER_PORT]` writes its configuration in DIR, starts it as
# the postgres user (pgbouncer refuses root) listening on a Unix socket in DIR, port 6432, and
# prints its socket directory; `stop DIR` stops it and removes DIR; `install` installs Debian's
# pgbouncer when missing (exit 1 when it cannot).
set -euo pipefail
command=${1:?usage: pgbouncer.sh start DIR SERVER_SOCKET_DIR [PORT] | stop DIR | install}
install() {
    command -v pgbouncer >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || return 1
    sudo_cmd=""
    if [ "$(id -u)" -ne 0 ]; then sudo -n true 2>/dev/null || return 1; sudo_cmd="sudo -n"; fi
    echo "Installing pgbouncer" >&2
    $sudo_cmd apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq pgbouncer >/dev/null || return 1
    # Debian's package starts a pgbouncer of its own on port 6432 (loopback); the tests use a socket.
    command -v pgbouncer >/dev/null 2>&1
}
. "$(dirname "${BASH_SOURCE[0]}")/lib/as-postgres.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/close-inherited.sh"
case "$command" in
install) install; exit $? ;;
start)
    dir=${2:?usage: pgbouncer.sh start DIR SERVER_SOCKET_DIR [PORT]}
    server=${3:?usage: pgbouncer.sh start DIR SERVER_SOCKET_DIR [PORT]}
    port=${4:-5432}
    close_inherited
    install || { echo "pgbouncer.sh: pgbouncer is not installed and cannot be installed" >&2; exit 1; }
    mkdir -p "$dir"
    cat > "$dir/pgbouncer.ini" <<CONF
[databases]
datastore = host=$server port=$port dbname=datastore user=postgres

[pgbouncer]
listen_addr =
listen_port = 6432
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 60
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
CONF
    echo '"postgres" ""' > "$dir/users.txt"
    chown -R postgres "$dir" 2>/dev/null || true
    as_postgres pgbouncer -d -q "$dir/pgbouncer.ini"
    for _ in $(seq 50); do [ -S "$dir/.s.PGSQL.6432" ] && break; sleep 0.1; done
    [ -S "$dir/.s.PGSQL.6432" ] || { echo "pgbouncer.sh: pgbouncer did not start (see $dir/pgbouncer.log)" >&2; exit 1; }
    echo "$dir"
    ;;
stop)
    dir=${2:?usage: pgbouncer.sh stop DIR}
    if [ -f "$dir/pgbouncer.pid" ]; then kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true; fi
    for _ in $(seq 50); do [ -S "$dir/.s.PGSQL.6432" ] || break; sleep 0.1; done
    rm -rf "$dir"
    ;;
*) echo "usage: pgbouncer.sh start DIR SERVER_SOCKET_DIR [PORT] | stop DIR | install" >&2; exit 64 ;;
esac

#!/usr/bin/env bash
# A pg_auto_failover formation on loopback for the failover test: a monitor and two PostgreSQL
# nodes (Debian's postgresql-15-auto-failover), each node run by its own `pg_autoctl run`
# keeper. The monitor is tuned to fail over within seconds (health checks every second, a node
# unhealthy after 4 s, a primary given 5 s to demote) rather than its defaults' 30 s. With two
# nodes the primary replicates synchronously while the other is healthy.
#   start DIR MONITOR_PORT NODE1_PORT NODE2_PORT   create and run the monitor and both nodes,
#                                                  waiting until node1 is primary, node2 secondary
#   primary DIR            print the port of the node the monitor has as primary
#   kill-primary DIR       SIGKILL the primary node's keeper and every process of its server at
#                          once (a machine lost); prints the port it killed
#   wait-failover DIR PORT wait until a node other than the one on PORT is primary
#   rejoin DIR PORT        run the keeper of the node on PORT again, waiting until it is secondary
#                          and the other node is primary again (replicating synchronously)
#   stop DIR               stop everything and remove DIR (first copying the monitor's and the
#                          nodes' logs into $DATASTORE_FORMATION_LOGS when it is set)
# Runs them as the postgres user (initdb refuses root).
set -euo pipefail
usage="usage: postgres-auto-failover.sh start DIR MONITOR_PORT NODE1_PORT NODE2_PORT | primary DIR | wait-healthy DIR | kill-primary DIR | wait-failover DIR PORT | rejoin DIR PORT | stop DIR"
command=${1:?$usage}
dir=${2:?DIR}
bin=/usr/lib/postgresql/15/bin
# libpq's variables of the caller's shell (a PGHOST naming another server, as
# Scripts/postgres-server.sh prints) would send pg_autoctl's own connections there: everything
# here names its server explicitly.
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGSERVICE PGSERVICEFILE PGOPTIONS PGPASSFILE PGPASSWORD \
    PGSSLMODE PGTARGETSESSIONATTRS PGDATA
. "$(dirname "${BASH_SOURCE[0]}")/lib/as-postgres.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/close-inherited.sh"
# pg_autoctl as the postgres user, finding pg_ctl, with its state files in DIR.
autoctl() {
    as_postgres env "PATH=$bin:$PATH" "XDG_CONFIG_HOME=$dir/config" "XDG_DATA_HOME=$dir/data" pg_autoctl "$@"
}
# (psql as whoever runs the script: the monitor trusts loopback connections, and a look every
# fraction of a second through runuser would cost a login each time.)
monitor_sql() {
    psql -X -h 127.0.0.1 -p "$(<"$dir/monitor-port")" -U postgres -d pg_auto_failover -Atc "$1"
}
# The node's port and state as the monitor has them: "PORT|reported|assigned", one line per node.
states() {
    monitor_sql "SELECT nodeport || '|' || reportedstate || '|' || goalstate FROM pgautofailover.node ORDER BY nodeid"
}
# The port of the node the monitor has as primary (or is promoting), if any.
primary_port() {
    states | awk -F'|' '$3 == "primary" || $3 == "wait_primary" { print $1 }' | head -1
}
# The node (node1, node2) whose server listens on PORT, as the monitor registered it. (Not from
# the node's configuration: pg_rewind, which a node that rejoins after a failover runs, copies
# the new primary's postgresql.conf, port included, over its own; the keeper starts the server
# with -p.)
node_on_port() {
    local name
    name=$(monitor_sql "SELECT nodename FROM pgautofailover.node WHERE nodeport = $1")
    case "$name" in
    node1 | node2) echo "$name" ;;
    *) echo "postgres-auto-failover.sh: no node has port $1" >&2; return 1 ;;
    esac
}
# SIGKILLs the keeper of DIR/NAME with every process of its session (its supervisors and the
# server it runs), and the server with every process it started. The server is stopped first
# (SIGSTOP), so that it starts no process while they are listed: its processes each run in a
# session of their own, and one that outlived the server (the monitor's health check worker,
# and the logger that waits for it) would run until the machine stops.
kill_node() {
    local keeper server children=""
    server=$(head -1 "$dir/$1/postmaster.pid" 2>/dev/null || true)
    # (A pid file left by a server killed before may name a process that is no longer it.)
    if [ -n "$server" ] && tr '\0' ' ' <"/proc/$server/cmdline" 2>/dev/null | grep -q -- "-D $dir/$1 "; then
        kill -STOP "$server" 2>/dev/null || true
        children=$(pgrep -P "$server" || true)
    else
        server=""
    fi
    for keeper in $(pgrep -f "pg_autoctl run --pgdata $dir/$1\$" || true); do pkill -9 -s "$keeper" 2>/dev/null || true; done
    if [ -n "$server" ]; then
        # shellcheck disable=SC2086 # (one pid a word)
        kill -9 "$server" $children 2>/dev/null || true
    fi
}
# Runs the keeper of the node in DIR/NAME in the background, in a session of its own.
run_keeper() {
    # (Without the caller's descriptors: a keeper that held a pipe of the test process open
    # would keep whoever reads it waiting.)
    (close_inherited; as_postgres env "PATH=$bin:$PATH" "XDG_CONFIG_HOME=$dir/config" "XDG_DATA_HOME=$dir/data" \
        setsid pg_autoctl run --pgdata "$dir/$1" >>"$dir/$1.log" 2>&1 </dev/null &)
}
# Waits (at most 60 s) until the node on PORT reports STATE and is assigned it.
wait_state() {
    for _ in $(seq 600); do
        if states 2>/dev/null | grep -qx "$1|$2|$2"; then return 0; fi
        sleep 0.1
    done
    echo "postgres-auto-failover.sh: the node on port $1 did not reach $2: $(states 2>&1 | tr '\n' ' ')" >&2
    return 1
}
case "$command" in
start)
    monitor_port=${3:?MONITOR_PORT}
    node1_port=${4:?NODE1_PORT}
    node2_port=${5:?NODE2_PORT}
    command -v pg_autoctl >/dev/null || { echo "postgres-auto-failover.sh: pg_autoctl is not installed (postgresql-15-auto-failover)" >&2; exit 1; }
    mkdir -p "$dir"
    chown postgres "$dir" 2>/dev/null || true
    echo "$monitor_port" >"$dir/monitor-port"
    autoctl create monitor --pgdata "$dir/monitor" --pgport "$monitor_port" --hostname 127.0.0.1 \
        --auth trust --no-ssl >"$dir/create.log" 2>&1
    run_keeper monitor
    for _ in $(seq 300); do monitor_sql "SELECT 1" >/dev/null 2>&1 && break; sleep 0.1; done
    # A node is unhealthy when its keeper has not reported for the timeout and the monitor
    # cannot connect to it. A killed server refuses the connection at once, so a long connect
    # timeout costs the failover nothing, while a standby whose keeper and server are slow under
    # the writers' load (reports late, connects in seconds) is not taken for dead: that would
    # set it to catchingup, drop synchronous replication, and leave no node to promote.
    # The monitor compares the LSNs the keepers last reported: a standby's keeper that reports
    # late under the writers' load looks 16 MB (one WAL segment, the default) behind, which
    # also sets it to catchingup. Synchronous replication already keeps every acknowledged
    # commit on the standby, so the thresholds are raised to 1 GB.
    for setting in "health_check_period = 1000" "health_check_timeout = 5000" "health_check_max_retries = 2" \
                   "health_check_retry_delay = 500" "node_considered_unhealthy_timeout = 4000" "primary_demote_timeout = 5000" \
                   "enable_sync_wal_log_threshold = 1073741824" "promote_wal_log_threshold = 1073741824"; do
        monitor_sql "ALTER SYSTEM SET pgautofailover.$setting" >/dev/null
    done
    monitor_sql "SELECT pg_reload_conf()" >/dev/null
    monitor="postgres://autoctl_node@127.0.0.1:$monitor_port/pg_auto_failover?sslmode=disable"
    for node in 1 2; do
        port_var="node${node}_port"
        autoctl create postgres --pgdata "$dir/node$node" --pgport "${!port_var}" --hostname 127.0.0.1 \
            --auth trust --no-ssl --monitor "$monitor" --dbname datastore --name "node$node" >>"$dir/create.log" 2>&1
        run_keeper "node$node"
        if [ "$node" = 1 ]; then wait_state "$node1_port" single; else wait_state "$node2_port" secondary; fi
    done
    wait_state "$node1_port" primary
    ;;
primary)
    primary_port
    ;;
wait-healthy)
    # One node primary and the other secondary, both as reported and as assigned, for 6 s
    # without a break: only then can the monitor promote the secondary when the primary dies.
    # Under load it may take a secondary that answers its health checks late for unhealthy (and
    # a node that rejoined did so a few seconds after it became secondary), set it to
    # catchingup, and then promote nobody.
    # (Timed by the clock: each look is a psql that takes tens of milliseconds under the load.)
    since=""
    deadline=$((SECONDS + 180))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if [ "$(states | awk -F'|' '$2 == $3 && ($2 == "primary" || $2 == "secondary") { print $2 }' | sort | tr '\n' ' ')" \
            = "primary secondary " ]; then
            now=${EPOCHREALTIME/./}
            since=${since:-$now}
            [ $(((now - since) / 1000)) -ge 6000 ] && exit 0
        else
            since=""
        fi
        sleep 0.25
    done
    echo "postgres-auto-failover.sh: the formation is not primary and secondary: $(states 2>&1 | tr '\n' ' ')" >&2
    exit 1
    ;;
kill-primary)
    port=$(primary_port)
    [ -n "$port" ] || { echo "postgres-auto-failover.sh: no primary to kill" >&2; exit 1; }
    kill_node "$(node_on_port "$port")"
    echo "$port"
    ;;
wait-failover)
    old=${3:?PORT}
    for _ in $(seq 600); do
        port=$(primary_port 2>/dev/null || true)
        if [ -n "$port" ] && [ "$port" != "$old" ]; then exit 0; fi
        sleep 0.1
    done
    echo "postgres-auto-failover.sh: no failover from port $old: $(states 2>&1 | tr '\n' ' ')" >&2
    # Why, as the monitor said it: its last decisions.
    grep -aE "catchingup|wait_primary|Setting goal state|unhealthy|behind" "$dir/monitor.log" 2>/dev/null | tail -12 >&2 || true
    exit 1
    ;;
rejoin)
    port=${3:?PORT}
    node=$(node_on_port "$port")
    run_keeper "$node"
    wait_state "$port" secondary
    # The other node replicates synchronously again (primary, no longer wait_primary): only then
    # is the rejoined node a candidate for the next failover.
    other=$(states | awk -F'|' -v port="$port" '$1 != port { print $1 }')
    wait_state "$other" primary
    ;;
stop)
    for node in node1 node2 monitor; do kill_node "$node"; done
    if [ -n "${DATASTORE_FORMATION_LOGS:-}" ]; then mkdir -p "$DATASTORE_FORMATION_LOGS" && cp "$dir"/*.log "$DATASTORE_FORMATION_LOGS"/ 2>/dev/null || true; fi
    rm -rf "$dir"
    ;;
*) echo "$usage" >&2; exit 64 ;;
esac

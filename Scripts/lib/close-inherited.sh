# Sourced by the scripts that start a server or a pooler for the tests.
#
# close_inherited closes the descriptors inherited from the caller past standard error (a test
# process may hold hundreds of stores and pipes open): a server counts them against its own
# limit (PostgreSQL refuses to start when too few are left, "insufficient file descriptors"), and
# a daemon would keep them open for as long as it runs, so that a test running a command at the
# same time would wait for the end of a pipe the daemon holds. The descriptor bash reads the
# running script from stays open.
close_inherited() {
    local fd script="${BASH_SOURCE[${#BASH_SOURCE[@]} - 1]}"
    for fd in /proc/$$/fd/*; do
        fd=${fd##*/}
        [ "$fd" -gt 2 ] 2>/dev/null || continue
        [ "/proc/$$/fd/$fd" -ef "$script" ] && continue
        eval "exec $fd>&-" 2>/dev/null || true
    done
}

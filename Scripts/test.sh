#!/usr/bin/env bash
# The test command: installs the system libraries when missing, then builds and runs every
# test target, the conformance suite on every backend included, and the documentation's code
# blocks; then builds the DocC catalog (Scripts/docs.sh), which must have no warning. Before the
# tests: the Markdown check (Scripts/check-markdown.py) and every Swift block of the README and
# the DocC articles compiled and run as a program of its own, with only the imports it shows
# (Scripts/check-code-blocks.sh).
#
#     Scripts/test.sh [--quick] [swift test arguments]
#
# The tests that measure the async API's scheduling delays under load run last, in a step of
# their own, so that no other test shares the cores with them.
#
# --quick leaves out the slow tests (the damaged-store corpus, the SIGKILL loops, the
# cross-process and PostgreSQL tests), the timing step and the documentation build, and draws 1,000 random
# edge requests per backend instead of 10,000.
#
# The example server (Examples/NotesServer) is built with the package trait ExampleServer, and
# its tests start it and talk to it with curl.
#
# PostgreSQL: when PostgreSQL 15 is installed or installable (Debian's postgresql-15), the
# build enables the package trait `Postgres` (into .build-pg, so that it never invalidates the
# plain build in .build), and the run adds the PostgreSQL tests: they start a throwaway server
# (initdb as the postgres user in a temporary directory, Unix socket only) and stop it at the
# end. The conformance suite also runs through pgbouncer in transaction pooling mode
# (Scripts/pgbouncer.sh, Debian's pgbouncer, installed when missing), and the failover test
# starts a primary and a streaming standby of its own. Where PostgreSQL cannot be installed,
# the command says so and runs everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
    quick=1
    shift
    export DATASTORE_QUICK=1
    export DATASTORE_EDGE_REQUESTS=${DATASTORE_EDGE_REQUESTS:-1000}
fi
started=$(date +%s)
Scripts/install-deps.sh
Scripts/check-markdown.py
Scripts/check-code-blocks.sh
if Scripts/postgres-server.sh install && Scripts/pgbouncer.sh install; then
    swift build --build-tests --traits Postgres,ExampleServer --scratch-path .build-pg
    swift test --skip-build --traits Postgres,ExampleServer --scratch-path .build-pg "$@"
    [ "$quick" -eq 1 ] || DATASTORE_TIMING_TESTS=1 swift test --skip-build --traits Postgres,ExampleServer \
        --scratch-path .build-pg \
        --no-parallel --filter KeepTheCooperativePoolResponsive
else
    echo "test.sh: PostgreSQL 15 or pgbouncer is neither installed nor installable here; the PostgreSQL tests do not run" >&2
    swift build --build-tests --traits ExampleServer
    swift test --skip-build --traits ExampleServer "$@"
    [ "$quick" -eq 1 ] || DATASTORE_TIMING_TESTS=1 swift test --skip-build --traits ExampleServer --no-parallel \
        --filter KeepTheCooperativePoolResponsive
fi
if [ "$quick" -eq 0 ]; then
    Scripts/docs.sh
    echo "test.sh: the documentation built without warnings"
fi
echo "test.sh: every test passed in $(( ($(date +%s) - started) / 60 )) min $(( ($(date +%s) - started) % 60 )) s"

#!/usr/bin/env bash
# The test command: installs the system libraries when missing, then builds and runs every
# test target, the conformance suite on every backend included.
#
# PostgreSQL: when PostgreSQL 15 is installed or installable (Debian's postgresql-15), the
# build enables the package trait `Postgres` (into .build-pg, so that it never invalidates the
# plain build in .build), and the run adds the PostgreSQL tests: they start a throwaway server
# (initdb as the postgres user in a temporary directory, Unix socket only) and stop it at the
# end. Where it cannot be installed, the command says so and runs everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh
if Scripts/postgres-server.sh install; then
    swift build --build-tests --traits Postgres --scratch-path .build-pg
    swift test --skip-build --traits Postgres --scratch-path .build-pg "$@"
else
    echo "test.sh: PostgreSQL 15 is neither installed nor installable here; the PostgreSQL tests do not run" >&2
    swift build --build-tests
    swift test --skip-build "$@"
fi

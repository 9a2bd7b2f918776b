#!/usr/bin/env bash
# The test command: installs the system libraries when missing, checks the Markdown
# (Scripts/check-markdown.py), then builds and runs every test target, the conformance suite on
# every backend included. Every Swift block of the README and the DocC articles is compiled as a
# program of its own, with only the imports it shows, after the tests' build and into its scratch
# path (Scripts/check-code-blocks.sh), and run beside the tests, in a process of their own, with
# the DocC catalog's build, which must have no warning (Scripts/docs.sh).
#
#     Scripts/test.sh [--quick | --build-only] [swift test arguments]
#
# The tests that measure the async API's scheduling delays under load run last, in a step of
# their own, so that no other test shares the cores with them.
#
# --quick leaves out the slow tests (the damaged-store corpus, the SIGKILL loops, the
# cross-process and PostgreSQL tests), the timing step and the documentation build.
# --build-only installs what is missing and builds the tests, then stops: .ci/run builds them
# beside its release build, and the test command that follows finds them built.
#
# The tests that draw at random draw a short run here, new each time: 500 random edge requests per
# backend, and a few of the SIGKILL tests' combinations of backend and moment. Scripts/release-check.sh
# draws the long run (20,000 requests, every combination: DATASTORE_THOROUGH=1).
#
# The example server (Examples/NotesServer) is built with the package trait ExampleServer, and
# its tests start it and talk to it with curl.
#
# PostgreSQL: when PostgreSQL 15 is installed or installable (Debian's postgresql-15), the
# build enables the package trait `Postgres` (into .build-pg, so that it never invalidates the
# plain build in .build), and the run adds the PostgreSQL tests: they start a throwaway server
# (initdb as the postgres user in a temporary directory, Unix socket only) and stop it at the
# end. The conformance suite also runs through pgbouncer in transaction pooling mode
# (Scripts/pgbouncer.sh, Debian's pgbouncer, installed when missing), the failover test
# starts a primary and a streaming standby of its own, the standby-read tests an asynchronous
# pair, and the pg_auto_failover test a monitor and two nodes (Scripts/postgres-auto-failover.sh,
# with Debian's postgresql-15-auto-failover). Where PostgreSQL cannot be installed,
# the command says so and runs everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 build_only=0
if [ "${1:-}" = "--quick" ]; then
    quick=1
    shift
    export DATASTORE_QUICK=1
elif [ "${1:-}" = "--build-only" ]; then
    build_only=1
    shift
fi
# Random edge requests per backend: 500 a run (each run draws new ones);
# Scripts/release-check.sh draws 20,000.
export DATASTORE_EDGE_REQUESTS=${DATASTORE_EDGE_REQUESTS:-500}
started=$(date +%s)
Scripts/install-deps.sh
Scripts/check-markdown.py
if Scripts/postgres-server.sh install && Scripts/pgbouncer.sh install; then
    scratch=.build-pg traits=Postgres,ExampleServer
else
    echo "test.sh: PostgreSQL 15 or pgbouncer is neither installed nor installable here; the PostgreSQL tests do not run" >&2
    scratch=.build traits=ExampleServer
fi
build=(--scratch-path "$scratch")
# The libraries and the tools the tests start are compiled with optimization, the tests, the
# conformance suite and the tests' support code without (Package.swift reads DATASTORE_OPTIMIZE):
# unoptimized, the same run takes nearly twice as long.
# The documentation's programs and the test run below see the same variable, so that they find
# the same build.
export DATASTORE_OPTIMIZE=1
# DATASTORE_WARNINGS_AS_ERRORS=1 (CI sets it) treats this package's warnings as errors.
[ "${DATASTORE_WARNINGS_AS_ERRORS:-}" = 1 ] && build+=(-Xswiftc -warnings-as-errors)
# SwiftPM writes a package's trait flags into the compiler's command lines in a Set's order, which
# changes from one run to the next (and a changed command line compiles its module again): the
# builds run with a fixed hash seed. The tests do not: they run in processes of random seeds.
# With a fixed seed the order still depends on how the set was made: the tests' build (the traits
# on the command line, and Models, which ExampleServer enables) and the documentation's programs
# (the traits of a dependency) write the same flags in the same order only when the programs'
# dependency names Models among its traits (measured: -DPostgres -DExampleServer -DModels on both
# sides; without it the programs got -DModels -DPostgres -DExampleServer, and each build compiled
# the package's 15 modules again, 150 s). trait_order() reads the order back from the build plan
# after each build (empty when it cannot), and the command says so when they differ.
trait_order() {
    python3 - "$scratch/debug.yaml" <<'PY'
import os, re, sys
plan = open(sys.argv[1], encoding="utf-8").read() if os.path.exists(sys.argv[1]) else ""
command = re.search(r'\n  "C\.DataStoreAPI-[^"]*-debug\.module":\n(.*?)(?=\n  ")', plan, re.S)
print(" ".join(a for a in re.findall(r'"(-D[^"]*)"', command.group(1) if command else "")
               if a not in ("-DSWIFT_PACKAGE", "-DDEBUG", "-DSWIFT_MODULE_RESOURCE_BUNDLE_UNAVAILABLE")))
PY
}
#
# What the build compiled from: the commit, every change to it and every file git does not ignore
# (contents included), Package.resolved, and the build's arguments. --build-only writes it down
# once its builds pass; the test command that follows skips both builds when nothing changed
# (.ci/run: each no-op build still plans the whole package graph, 35 s here), and builds as
# always on any difference.
fingerprint() {
    git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git work tree: $RANDOM$RANDOM"; return; }
    {
        git rev-parse HEAD
        git diff HEAD --binary
        git ls-files --others --exclude-standard -z | xargs -0r sha256sum
        sha256sum Package.resolved 2>/dev/null || true
        echo "$traits ${build[*]} ${DATASTORE_OPTIMIZE:-}"
    } | sha256sum | cut -d' ' -f1
}
stamp="$scratch/tests-built.fingerprint"
if [ "$build_only" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(fingerprint)" ]; then
    echo "test.sh: the tests and the documentation's programs are built from these sources (--build-only)"
else
    rm -f "$stamp"
    SWIFT_DETERMINISTIC_HASHING=1 swift build --build-tests --traits "$traits" "${build[@]}"
    tests_order=$(trait_order || true)
    # The documentation's programs, into the same scratch path with the same traits (and Models,
    # which ExampleServer enables, named): only the programs are compiled
    # (Scripts/check-code-blocks.sh).
    Scripts/check-code-blocks.sh --build-only --traits "Models,$traits" "${build[@]}"
    blocks_order=$(trait_order || true)
    [ "$tests_order" = "$blocks_order" ] || echo "test.sh: the documentation's programs compiled the package again: SwiftPM wrote its trait flags as '$blocks_order' for them and as '$tests_order' for the tests" >&2
    [ "$build_only" -eq 0 ] || fingerprint >"$stamp"
fi
if [ "$build_only" -eq 1 ]; then
    echo "test.sh: the tests are built ($(( $(date +%s) - started )) s)"
    exit 0
fi
# The documentation's programs run (Scripts/check-code-blocks.sh) and the DocC catalog builds
# (Scripts/docs.sh, into .build-docs, from the DataStoreAPI module just built) beside the tests,
# which spend much of their time waiting for the processes and servers they start; their output
# follows the tests'.
# An interrupted or cancelled run stops what it started: the side job and the tests, with every
# process under them (a build, a server), rather than leaving them on the cores. Both run in the
# background of this one process group (a kill of the group takes them too), and the script
# waits for them with `wait`, which a signal interrupts at once.
side="" tests_pid="" side_log="" test_log=""
kill_tree() {
    local child
    for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
    kill -TERM "$1" 2>/dev/null || true
}
trap 'for pid in $side $tests_pid; do kill_tree "$pid"; done; rm -f "$side_log" "$test_log"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
side_log=$(mktemp)
test_log=$(mktemp)
(
    Scripts/check-code-blocks.sh --run-only "${build[@]}"
    if [ "$quick" -eq 0 ]; then
        Scripts/docs.sh --modules "$scratch/debug"
        echo "test.sh: the documentation built without warnings"
    fi
) >"$side_log" 2>&1 &
side=$!
tests=0
# A copy of the tests' output, whose failures are printed again at the end: among thousands of
# lines of a parallel run, the line that says what failed is easy to lose (and a CI log shows
# its end). The subshell ends when both the tests and tee have, with the tests' status, so the
# copy is whole when it is read. (Through a pipe, swift-testing prints without colours.)
(
    set +e
    swift test --skip-build --traits "$traits" "${build[@]}" "$@" 2>&1 | tee "$test_log"
    exit "${PIPESTATUS[0]}"
) &
tests_pid=$!
wait "$tests_pid" || tests=$?
tests_pid=""
documentation=0
wait "$side" || documentation=$?
side=""
cat "$side_log"
if [ "$tests" -ne 0 ]; then
    echo "test.sh: tests failed; what they recorded:" >&2
    recorded=$(grep -A 4 -E "recorded an issue|Fatal error|: error: " "$test_log" || true)
    if [ -z "$recorded" ]; then
        echo "(no line says; the output's last lines:)" >&2
        tail -n 40 "$test_log" >&2
    else
        echo "$recorded" | head -n 200 >&2 || true
        [ "$(echo "$recorded" | wc -l)" -le 200 ] || echo "(the first 200 lines of $(echo "$recorded" | wc -l))" >&2
    fi
    echo "test.sh: tests failed (above)" >&2
    exit "$tests"
fi
[ "$documentation" -eq 0 ] || { echo "test.sh: a documentation block or the DocC build failed (above)" >&2; exit 1; }
# The timing tests last, alone on the cores: once nothing holds .build/timing.lock (.ci/run holds
# it while its release build, which runs beside the tests, is at work).
if [ "$quick" -eq 0 ]; then
    mkdir -p .build
    flock .build/timing.lock true
    # The test bundle itself, which swift test would start after planning the package again and
    # running the XCTest pass (15 s here, with nothing to run).
    DATASTORE_TIMING_TESTS=1 "$scratch/debug/DataStorePackageTests.xctest" --testing-library swift-testing \
        --no-parallel --filter KeepTheCooperativePoolResponsive
fi
echo "test.sh: every test passed in $(( ($(date +%s) - started) / 60 )) min $(( ($(date +%s) - started) % 60 )) s"

#!/usr/bin/env bash
# Builds every product the way its users build it, with warnings treated as errors.
#
#     Scripts/check-builds.sh          what users build first: every product without any trait,
#                                      debug
#     Scripts/check-builds.sh all      without any trait and with each trait on its own
#                                      (Postgres, ExampleServer), in debug and in release (before
#                                      a release: Scripts/release-check.sh)
#
# One scratch path (.build-ci, or DATASTORE_CHECK_BUILDS_SCRATCH) for all of them, so that a trait
# change rebuilds only this package's modules, not its dependencies: warnings as errors applies to
# this package's modules only, and the dependencies' commands are the same with and without a
# trait. (CI builds fewer: the release builds of its first steps without a trait, and the test
# command's with both traits, every one with warnings as errors; see .ci/run.)
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${DATASTORE_CHECK_BUILDS_SCRATCH:-.build-ci}
configurations=(debug)
trait_sets=("")
if [ "${1:-}" = all ]; then
    configurations=(debug release)
    trait_sets=("" Postgres ExampleServer)
fi
for configuration in "${configurations[@]}"; do
    for traits in "${trait_sets[@]}"; do
        label="${traits:-no trait}, $configuration"
        started=$(date +%s)
        log="$scratch-$configuration-${traits:-none}.log"
        if ! swift build -c "$configuration" --scratch-path "$scratch" ${traits:+--traits "$traits"} \
            -Xswiftc -warnings-as-errors >"$log" 2>&1; then
            grep -E "error:|warning:" "$log" | grep -v "^\s*|" | sort -u | head -40 >&2
            echo "check-builds: the build with $label fails (the whole log: $log)" >&2
            exit 1
        fi
        rm -f "$log"
        echo "check-builds: $label: built, no warning ($(( $(date +%s) - started )) s)"
    done
done

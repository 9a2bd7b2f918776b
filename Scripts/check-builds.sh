#!/usr/bin/env bash
# Builds every product the way its users build it: without any trait, and with each trait on its
# own (Postgres, ExampleServer), in debug and in release, with warnings treated as errors. One
# scratch path (.build-ci) for all six, so that a trait change rebuilds only this package's
# modules, not its dependencies.
#
#     Scripts/check-builds.sh [debug|release]     (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
configurations=("${1:-debug}")
[ -n "${1:-}" ] || configurations=(debug release)
for configuration in "${configurations[@]}"; do
    for traits in "" Postgres ExampleServer; do
        label="${traits:-no trait}, $configuration"
        started=$(date +%s)
        log=".build-ci-$configuration-${traits:-none}.log"
        if ! swift build -c "$configuration" --scratch-path .build-ci ${traits:+--traits "$traits"} \
            -Xswiftc -warnings-as-errors >"$log" 2>&1; then
            grep -E "error:|warning:" "$log" | grep -v "^\s*|" | sort -u | head -40 >&2
            echo "check-builds: the build with $label fails (the whole log: $log)" >&2
            exit 1
        fi
        rm -f "$log"
        echo "check-builds: $label: built, no warning ($(( $(date +%s) - started )) s)"
    done
done

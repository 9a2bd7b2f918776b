#!/usr/bin/env bash
# The checks run before a release is tagged, which CI leaves out to answer within 25 minutes:
#
#   1. every product without any trait and with each trait on its own, debug and release, with
#      warnings as errors (Scripts/check-builds.sh, about 15 minutes on a fresh clone);
#   2. the public API of every library product against the commit in api-baseline.txt
#      (Scripts/check-api.sh, 10 to 16 minutes): a change that breaks it fails;
#   3. then everything CI runs (.ci/run), with the tests' long draws: 20,000 random edge requests
#      per backend instead of the test command's 500, and every combination of backend and moment
#      of the SIGKILL tests, a larger Realm file among them (DATASTORE_THOROUGH=1).
#
#     Scripts/release-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
step() { echo "=== release-check: $* ($(( $(date +%s) - started )) s)"; }
step "1. builds without and with each trait, debug and release, warnings as errors"
Scripts/check-builds.sh all
step "2. the public API against its baseline"
Scripts/check-api.sh
step "3. CI's checks, with the tests' long draws"
DATASTORE_EDGE_REQUESTS=20000 DATASTORE_THOROUGH=1 .ci/run
step "done"

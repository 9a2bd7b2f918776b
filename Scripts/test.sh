#!/usr/bin/env bash
# The test command: installs the system libraries when missing, then builds and runs every
# test target, the conformance suite on every backend included.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh
swift build --build-tests
swift test --skip-build "$@"

#!/usr/bin/env bash
# The test command: installs the system libraries the package links (when missing), then
# builds and runs every test target, the conformance suite on every backend included.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
dpkg -s libsqlite3-dev >/dev/null 2>&1 || missing+=(libsqlite3-dev)
dpkg -s liblmdb-dev >/dev/null 2>&1 || missing+=(liblmdb-dev)
dpkg -s lmdb-utils >/dev/null 2>&1 || missing+=(lmdb-utils)
command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
if [ ${#missing[@]} -gt 0 ]; then
    echo "Installing ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

swift build --build-tests
swift test --skip-build --parallel "$@"

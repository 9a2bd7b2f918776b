#!/usr/bin/env bash
# Compiles and runs every Swift code block of the README and of the DocC articles as a program
# of its own, with only the imports the block shows, in a package that depends on this one by
# path: what a user who pastes a block into main.swift gets. Each program runs in an empty
# directory of its own and must exit 0 within two minutes.
#
#     Scripts/check-code-blocks.sh
#
# The package is generated into .build-blocks/ (Scripts/code-blocks.py), which is kept between
# runs so that a second run builds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
work="$root/.build-blocks"
rm -rf "$work/Sources" "$work/runs"
mkdir -p "$work"
python3 Scripts/code-blocks.py "$work"
swift build --package-path "$work" --scratch-path "$work/.build" >"$work/build.log" 2>&1 || true
grep -E "error:|warning:" "$work/build.log" | sort -u || true
if ! grep -q "Build complete" "$work/build.log"; then
    echo "check-code-blocks: a code block does not compile as a program of its own (errors above)" >&2
    exit 1
fi
bin="$(swift build --package-path "$work" --scratch-path "$work/.build" --show-bin-path)"
failed=0
total=0
while read -r name where; do
    total=$((total + 1))
    dir="$work/runs/$name"
    mkdir -p "$dir"
    status=0
    (cd "$dir" && timeout 120 "$bin/$name" >"$dir/output.txt" 2>&1) || status=$?
    if [ "$status" -eq 0 ]; then
        echo "ok $where"
    else
        failed=$((failed + 1))
        echo "FAILED $where (exit $status):"
        sed 's/^/    /' "$dir/output.txt" | tail -20
    fi
done <"$work/blocks.txt"
if [ "$failed" -ne 0 ]; then
    echo "check-code-blocks: $failed of $total blocks failed" >&2
    exit 1
fi
echo "check-code-blocks: $total blocks compiled and ran, each as a program of its own"

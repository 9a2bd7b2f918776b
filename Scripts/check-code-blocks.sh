#!/usr/bin/env bash
# Compiles and runs every Swift code block of the README and of the DocC articles as a program
# of its own, with only the imports the block shows, in a package that depends on this one by
# path: what a user who pastes a block into main.swift gets. Each program runs in an empty
# directory of its own and must exit 0 within two minutes. Then the Relationships article's example,
# with one relationship misspelt, must fail to compile, naming the misspelt member.
#
#     Scripts/check-code-blocks.sh [--build-only | --run-only] [--traits T1,T2] [--scratch-path DIR] [swift build arguments]
#
# The package is generated into .build-blocks/ (Scripts/code-blocks.py) and built into
# .build-blocks/.build, kept between runs so that a second run builds only what changed. The test
# command builds it into its own scratch path instead, with its traits and arguments, where every
# module of this package and of swift-syntax is already built: only the programs are compiled.
# --build-only generates and builds the programs; --run-only runs what such a build made, without
# SwiftPM (which would wait for a test run holding the same scratch path).
#
# Every build runs with SWIFT_DETERMINISTIC_HASHING=1: SwiftPM writes a package's trait flags
# (-DPostgres, -DExampleServer) into the compiler's command line in a Set's order, which differs
# from one run to the next, and a command line that differs compiles the module again.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
work="$root/.build-blocks"
scratch="$work/.build"
mode=all traits="" build_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build-only) mode=build; shift ;;
        --run-only) mode=run; shift ;;
        --traits) traits="$2"; shift 2 ;;
        --scratch-path) scratch="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
        *) build_args+=("$1"); shift ;;
    esac
done
bin="$scratch/debug"
if [ "$mode" != run ]; then
    rm -rf "$work/Sources" "$work/runs"
    mkdir -p "$work"
    python3 Scripts/code-blocks.py ${traits:+--traits "$traits"} "$work"
    SWIFT_DETERMINISTIC_HASHING=1 swift build --package-path "$work" --scratch-path "$scratch" \
        ${build_args[@]+"${build_args[@]}"} >"$work/build.log" 2>&1 || true
    # (Not SwiftPM's warnings about other packages' manifests: "warning: 'package': ...".)
    grep -E "error:|warning:" "$work/build.log" | grep -v "^warning: '" | sort -u || true
    if ! grep -q "Build complete" "$work/build.log"; then
        echo "check-code-blocks: a code block does not compile as a program of its own (errors above)" >&2
        exit 1
    fi
    echo "check-code-blocks: the programs are built ($(grep -c "Compiling" "$work/build.log" || true) compile steps)"
    [ "$mode" = build ] && exit 0
fi
[ -f "$work/blocks.txt" ] || { echo "check-code-blocks: nothing is built: run it with --build-only first" >&2; exit 1; }
rm -rf "$work/runs"
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
# Typed relationships are checked by the compiler: the Relationships article's example with one
# relationship misspelt must not compile, and the compiler must name the misspelt member.
typo="$work/typo/main.swift"
mkdir -p "$work/typo"
python3 - "$root/Sources/DataStoreAPI/DataStoreAPI.docc/Relationships.md" "$typo" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
block = next(b for b in re.findall(r"```swift\n(.*?)```", text, re.S) if "including: Author.posts" in b)
open(sys.argv[2], "w").write(block.replace("including: Author.posts", "including: Author.postz", 1))
PY
# The package's C modules (CChecksum, which DataStoreAPI imports) by the module maps SwiftPM made
# (only this package's: a scratch path shared with the tests' build has other packages' too, some
# twice, for the host's tools), and the system library DataStoreAPI imports (COpenSSL) by its own.
cmodules=(-Xcc "-fmodule-map-file=$root/Sources/COpenSSL/module.modulemap")
for target in "$root"/Sources/*/; do
    map="$bin/$(basename "$target").build/module.modulemap"
    [ -e "$map" ] && cmodules+=(-Xcc "-fmodule-map-file=$map")
done
if swiftc -typecheck -I "$bin/Modules" "${cmodules[@]}" -I "$root/Sources/CChecksum/include" "$typo" \
    >"$work/typo/log.txt" 2>&1; then
    echo "check-code-blocks: the Relationships example compiles with 'Author.postz' (a misspelt relationship)" >&2
    exit 1
fi
if ! grep -q "has no member 'postz'" "$work/typo/log.txt"; then
    echo "check-code-blocks: the misspelt relationship failed to compile for another reason:" >&2
    sed 's/^/    /' "$work/typo/log.txt" | head -20 >&2
    exit 1
fi
echo "check-code-blocks: a misspelt relationship ('Author.postz') does not compile: $(grep -m1 -o "type 'Author' has no member 'postz'" "$work/typo/log.txt")"

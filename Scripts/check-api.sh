#!/usr/bin/env bash
# Compares the public API of every library product with the baseline commit recorded in
# api-baseline.txt (swift package diagnose-api-breaking-changes): a change that breaks code
# written against the baseline fails, naming it. A deliberate break is made by recording a new
# baseline in the same commit, with the reason in CHANGELOG.md.
#
#     Scripts/check-api.sh
#
# One product per run: the tool crashed (Swift 6.3) when given several at once.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=$(grep -v '^#' api-baseline.txt | head -1 | tr -d '[:space:]')
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
    git fetch --quiet --unshallow 2>/dev/null || git fetch --quiet origin "$baseline" 2>/dev/null || true
fi
git cat-file -e "$baseline^{commit}" || { echo "check-api: the baseline commit $baseline is not in this clone" >&2; exit 1; }
failed=0
# Every library product; PostgresStore with its trait (without it, the module is empty).
for product in DataStoreAPI InMemoryStore SQLiteStore LMDBStore JSONLStore StoreMigration ForeignStores \
    DataStoreConformance PostgresStore; do
    log=".build-api-$product.log"
    traits=()
    [ "$product" = PostgresStore ] && traits=(--traits Postgres)
    if swift package "${traits[@]}" diagnose-api-breaking-changes "$baseline" --products "$product" >"$log" 2>&1 \
        && grep -q "No breaking changes detected in $product" "$log"; then
        echo "check-api: $product: no breaking change since ${baseline:0:7}"
        rm -f "$log"
    else
        grep -E "API breakage|ABI breakage|error:" "$log" | sort -u | head -40 >&2 || tail -20 "$log" >&2
        echo "check-api: $product's public API changed in a way that breaks code written against ${baseline:0:7} (the log: $log)" >&2
        failed=1
    fi
done
exit $failed

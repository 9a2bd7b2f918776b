#!/usr/bin/env bash
# Builds the DocC catalog of DataStoreAPI into .build-docs/DataStoreAPI.doccarchive, failing on
# any warning (a broken symbol link, an unknown article). The DocC plugin is a dependency only
# when DATASTORE_DOCS is set, so that users of the libraries never fetch it.
#     Scripts/docs.sh [--preview]
set -euo pipefail
cd "$(dirname "$0")/.."
export DATASTORE_DOCS=1
# The catalog needs the symbol graphs only: built unoptimized, even when the test command (which
# runs this beside its tests, with DATASTORE_OPTIMIZE=1 for its own build) calls it.
unset DATASTORE_OPTIMIZE
if [ "${1:-}" = "--preview" ]; then
    exec swift package --scratch-path .build-docs --disable-sandbox preview-documentation --target DataStoreAPI
fi
swift package --scratch-path .build-docs --allow-writing-to-directory .build-docs \
    generate-documentation --target DataStoreAPI --warnings-as-errors \
    --output-path .build-docs/DataStoreAPI.doccarchive

#!/usr/bin/env bash
# A foreign database of 1,000,000 rows (and 1,000 parents they refer to) copied into LMDB,
# killed with SIGKILL in the middle, then finished with --resume: for a plain SQLite database
# (GRDB's shape, made with the sqlite3 shell), a Core Data store (its tables as Core Data
# writes them, read with the app's model) and an encrypted Realm file (Scripts/realm-make.py:
# items, and owners that list them in order). It checks that the copy is exact (verify: no
# difference), that every reference is valid (check), and that the source's bytes are unchanged
# (SHA-256 before and after, no -wal or -shm created).
#
#     Scripts/measure-foreign-resume.sh              # 1,000,000 rows, killed 0.4 s into the writing
#     Scripts/measure-foreign-resume.sh 200000 1     # rows, kill delay in seconds
set -euo pipefail
cd "$(dirname "$0")/.."
rows="${1:-1000000}"
delay="${2:-0.4}"
Scripts/install-deps.sh >/dev/null
swift build -c release --product migrate-store >/dev/null
bin="$(swift build -c release --show-bin-path)/migrate-store"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sqlite3 "$work/app.db" >/dev/null <<SQL
PRAGMA journal_mode=DELETE;
CREATE TABLE folder (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);
CREATE TABLE note (id INTEGER PRIMARY KEY AUTOINCREMENT, folderId INTEGER NOT NULL REFERENCES folder(id) ON DELETE CASCADE,
  title TEXT NOT NULL, body TEXT, createdAt DATETIME NOT NULL, rating INTEGER NOT NULL);
WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 1000)
  INSERT INTO folder SELECT n, 'folder ' || n FROM i;
WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < $rows)
  INSERT INTO note SELECT n, n % 1000 + 1, 'note ' || n, CASE WHEN n % 10 THEN 'body of ' || n END,
    strftime('%Y-%m-%d %H:%M:%f', 1600000000 + n, 'unixepoch'), n % 5 FROM i;
SQL
sqlite3 "$work/Notes.sqlite" <<SQL
CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
CREATE TABLE ZFOLDER ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR );
CREATE TABLE ZNOTE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZFOLDER INTEGER, ZTITLE VARCHAR,
  ZBODY VARCHAR, ZCREATEDAT TIMESTAMP, ZRATING INTEGER, ZSCORE FLOAT );
INSERT INTO Z_PRIMARYKEY VALUES (1, 'Folder', 0, 1000), (2, 'Note', 0, $rows);
INSERT INTO Z_METADATA VALUES (1, 'C0FFEE00-0000-4000-8000-000000000003', NULL);
WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 1000)
  INSERT INTO ZFOLDER SELECT n, 1, 1, 'folder ' || n FROM i;
WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < $rows)
  INSERT INTO ZNOTE SELECT n, 2, 1, n % 1000 + 1, 'note ' || n, CASE WHEN n % 10 THEN 'body of ' || n END,
    600000000.5 + n, n % 5, n / 7.0 FROM i;
SQL
mkdir -p "$work/Notes.xcdatamodel"
cat > "$work/Notes.xcdatamodel/contents" <<'XML'
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
    <entity name="Folder" representedClassName="Folder" syncable="YES">
        <attribute name="name" optional="YES" attributeType="String"/>
        <relationship name="notes" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Note" inverseName="folder" inverseEntity="Note"/>
    </entity>
    <entity name="Note" representedClassName="Note" syncable="YES">
        <attribute name="body" optional="YES" attributeType="String"/>
        <attribute name="createdAt" attributeType="Date"/>
        <attribute name="rating" attributeType="Integer 64"/>
        <attribute name="score" attributeType="Double"/>
        <attribute name="title" attributeType="String"/>
        <relationship name="folder" maxCount="1" deletionRule="Nullify" destinationEntity="Folder" inverseName="notes" inverseEntity="Folder"/>
    </entity>
</model>
XML
head -c 64 /dev/urandom > "$work/items.key"
python3 Scripts/realm-make.py "$work/items.realm" --items "$rows" --key-file "$work/items.key"
status=0
for source in "plain-sqlite:$work/app.db" "coredata:$work/Notes.sqlite" "realm:$work/items.realm"; do
    file="${source#*:}"
    extra=()
    [[ "$source" == coredata:* ]] && extra=(--model "$work/Notes.xcdatamodel")
    [[ "$source" == realm:* ]] && extra=(--key-file "$work/items.key")
    destination="lmdb:$work/$(basename "$file").lmdb"
    before=$(sha256sum "$file" | cut -d' ' -f1)
    "$bin" copy --from "$source" "${extra[@]}" --to "$destination" --batch-size 10000 --progress none >/dev/null 2>&1 &
    pid=$!
    # The copy checks its source first; it writes once the destination is staged.
    for _ in $(seq 1 600); do
        compgen -G "$work/$(basename "$file").lmdb*" >/dev/null && break
        sleep 0.1
    done
    sleep "$delay"
    if kill -KILL "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null || true
        echo "$source: copy killed with SIGKILL after ${delay} s"
        "$bin" inspect "$destination" | grep -E "^state|^checkpoint" || true
    else
        echo "$source: the copy finished within ${delay} s; give a shorter delay" >&2
        status=1
    fi
    "$bin" copy --from "$source" "${extra[@]}" --to "$destination" --resume --progress none | tail -2
    "$bin" verify --from "$source" "${extra[@]}" --to "$destination" --progress none | tail -2
    "$bin" check "$destination" | tail -1
    after=$(sha256sum "$file" | cut -d' ' -f1)
    if [ "$before" = "$after" ] && [ ! -e "$file-wal" ] && [ ! -e "$file-shm" ]; then
        echo "$source: source unchanged (sha256 $before), no -wal or -shm"
    else
        echo "$source: THE SOURCE CHANGED ($before -> $after)" >&2
        status=1
    fi
done
exit $status

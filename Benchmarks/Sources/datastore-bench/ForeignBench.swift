import BenchSupport
import DataStoreAPI
import ForeignStores
import Foundation
import RawSQLite
import StoreMigration

/// A Core Data store and a plain SQLite database of `n` notes (in 1,000 folders) read and copied
/// into LMDB and PostgreSQL, next to a raw C loop reading the same table with sqlite3 (every
/// column of every row, in key order); plain SQLite into PostgreSQL also next to pgloader, when
/// it is installed. The copies run without verification (as the migration rows do); the Core
/// Data store's model comes from a model file (the model cache is read once, before timing).
/// With `key`, only the copies, into encrypted stores (the sources are the same files).
@MainActor func benchmarkForeignSources(n: Int, key: StoreKey? = nil) throws {
    let suffix = key == nil ? "" : ", encrypted"
    let directory = scratch("foreign")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let coreData = directory + "/Notes.sqlite"
    let plain = directory + "/notes.db"
    writeForeignDatabases(coreData: coreData, plain: plain, n: n)
    let model = directory + "/Notes.xcdatamodel"
    try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
    try foreignModelXML.write(toFile: model + "/contents", atomically: true, encoding: .utf8)
    let sources: [(name: String, location: StoreLocation, table: String, columns: String, entity: String)] = [
        ("Core Data", StoreLocation(kind: .coreData, path: coreData + "?model=" + model), "ZNOTE",
         "Z_PK, ZFOLDER, ZTITLE, ZBODY, ZCREATEDAT, ZRATING, ZSCORE", "Note"),
        ("plain SQLite", StoreLocation(kind: .plainSQLite, path: plain), "note",
         "id, folderId, title, body, createdAt, rating, score", "note"),
    ]
    for source in sources {
        var rows = 0
        let raw = bestOf(3) { rows = rawRead(source.location.path.components(separatedBy: "?")[0], source.table, source.columns) }
        check(rows, n, "rows the raw loop read")
        if key == nil {
            let store = try source.location.openSource()
            var read = 0
            record(source.name, "read every item (forEach) vs raw C loop reading the table", n, operations: n,
                   api: try bestOf(3) {
                       read = 0
                       try store.read { try $0.forEach(FetchRequest(source.entity)) { _ in read += 1 } }
                   }, raw: raw, memory: false)
            check(read, n, "items read")
            try store.close()
        }
        let lmdb = StoreLocation(kind: .lmdb, path: directory + "/\(source.table).lmdb", key: key)
        record(source.name + suffix, "-> LMDB (Migrator.copy, no verify) vs raw C loop reading the table", n, operations: n,
               api: try time {
                   _ = try Migrator.copy(from: source.location, to: lmdb,
                                         options: MigrationOptions(batchSize: 10_000, verify: false, checkSource: false))
               }, raw: raw, memory: false)
        try lmdb.destroy()
        if !options.noPostgres {
            let url = postgresURL("bench_foreign")
            let postgres = try StoreLocation(parsing: url).with(key: key)
            try? postgres.destroy()
            record(source.name + suffix, "-> PostgreSQL (Migrator.copy, no verify) vs raw C loop reading the table", n, operations: n,
                   api: try time {
                       _ = try Migrator.copy(from: source.location, to: postgres,
                                             options: MigrationOptions(batchSize: 10_000, verify: false, checkSource: false))
                   }, raw: raw, memory: false)
            try postgres.destroy()
        }
    }
    guard key == nil, !options.noPostgres, FileManager.default.isExecutableFile(atPath: "/usr/bin/pgloader") else { return }
    // pgloader copies the tables into the database's public schema; the store copies into a schema of its own.
    let target = "postgresql://postgres@unix:\(postgresHost):5432/datastore"
    let drop = "psql -q -h '\(postgresHost)' -U postgres -d datastore -c 'DROP TABLE IF EXISTS public.note, public.folder CASCADE'"
    let pgloader = { () in
        precondition(system(drop + " >/dev/null") == 0, "\(drop) failed")
        let command = "pgloader --quiet sqlite://\(plain) '\(target)' >\(directory)/pgloader.log 2>&1"
        precondition(system(command) == 0, "\(command) failed: see \(directory)/pgloader.log")
    }
    let url = postgresURL("bench_foreign")
    let postgres = try StoreLocation(parsing: url)
    try? postgres.destroy()
    record("plain SQLite", "-> PostgreSQL (Migrator.copy, no verify) vs pgloader", n, operations: n,
           api: try time {
               _ = try Migrator.copy(from: StoreLocation(kind: .plainSQLite, path: plain), to: postgres,
                                     options: MigrationOptions(batchSize: 10_000, verify: false, checkSource: false))
           }, raw: time(pgloader), memory: false)
    try postgres.destroy()
    _ = system(drop + " >/dev/null")
}

/// Reads every column of every row of `table` in key order, as a C loop would.
func rawRead(_ path: String, _ table: String, _ columns: String) -> Int {
    var db: OpaquePointer?
    precondition(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK)
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    precondition(sqlite3_prepare_v2(db, "SELECT \(columns) FROM \(table) ORDER BY 1", -1, &statement, nil) == SQLITE_OK)
    defer { sqlite3_finalize(statement) }
    var rows = 0
    var sum: Int64 = 0
    var bytes = 0
    var real = 0.0
    while sqlite3_step(statement) == SQLITE_ROW {
        sum &+= sqlite3_column_int64(statement, 0) &+ sqlite3_column_int64(statement, 1) &+ sqlite3_column_int64(statement, 5)
        for column: Int32 in [2, 3] where sqlite3_column_text(statement, column) != nil {
            bytes += Int(sqlite3_column_bytes(statement, column))
        }
        if sqlite3_column_type(statement, 4) == SQLITE_TEXT { bytes += Int(sqlite3_column_bytes(statement, 4)) }
        else { real += sqlite3_column_double(statement, 4) }
        real += sqlite3_column_double(statement, 6)
        rows += 1
    }
    precondition(sum != 42 || bytes != 42 || real != 42)
    return rows
}

/// Writes both databases with the sqlite3 C API: a Core Data store (its tables as Core Data
/// writes them) and a GRDB-shaped database, each with 1,000 folders and `n` notes.
func writeForeignDatabases(coreData: String, plain: String, n: Int) {
    func build(_ path: String, _ schema: String, folder: String, note: String, coreDataDates: Bool) {
        var db: OpaquePointer?
        precondition(sqlite3_open(path, &db) == SQLITE_OK)
        defer { sqlite3_close(db) }
        precondition(sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF; BEGIN; " + schema, nil, nil, nil)
            == SQLITE_OK, String(cString: sqlite3_errmsg(db)))
        var statement: OpaquePointer?
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        precondition(sqlite3_prepare_v2(db, folder, -1, &statement, nil) == SQLITE_OK)
        for i in 1...1_000 {
            sqlite3_reset(statement)
            sqlite3_bind_int64(statement, 1, Int64(i))
            sqlite3_bind_text(statement, 2, "folder \(i)", -1, transient)
            precondition(sqlite3_step(statement) == SQLITE_DONE)
        }
        sqlite3_finalize(statement)
        precondition(sqlite3_prepare_v2(db, note, -1, &statement, nil) == SQLITE_OK)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
        for i in 1...n {
            sqlite3_reset(statement)
            sqlite3_bind_int64(statement, 1, Int64(i))
            sqlite3_bind_int64(statement, 2, Int64(i % 1_000 + 1))
            sqlite3_bind_text(statement, 3, "note \(i)", -1, transient)
            if i % 10 == 0 { sqlite3_bind_null(statement, 4) } else {
                sqlite3_bind_text(statement, 4, "the body of note \(i), with some words in it", -1, transient)
            }
            let seconds = 600_000_000.0 + Double(i) * 0.5
            if coreDataDates {
                sqlite3_bind_double(statement, 5, seconds)
            } else {
                sqlite3_bind_text(statement, 5, formatter.string(from: Date(timeIntervalSinceReferenceDate: seconds)), -1,
                                  transient)
            }
            sqlite3_bind_int64(statement, 6, Int64(i % 5))
            sqlite3_bind_double(statement, 7, Double(i) / 7)
            precondition(sqlite3_step(statement) == SQLITE_DONE, String(cString: sqlite3_errmsg(db)))
        }
        sqlite3_finalize(statement)
        precondition(sqlite3_exec(db, "COMMIT", nil, nil, nil) == SQLITE_OK)
    }
    build(coreData, """
        CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
        CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
        CREATE TABLE ZFOLDER ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR );
        CREATE TABLE ZNOTE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZFOLDER INTEGER, ZTITLE VARCHAR,
          ZBODY VARCHAR, ZCREATEDAT TIMESTAMP, ZRATING INTEGER, ZSCORE FLOAT );
        CREATE INDEX ZNOTE_ZFOLDER_INDEX ON ZNOTE (ZFOLDER);
        INSERT INTO Z_PRIMARYKEY VALUES (1, 'Folder', 0, 1000), (2, 'Note', 0, \(n));
        INSERT INTO Z_METADATA VALUES (1, 'C0FFEE00-0000-4000-8000-000000000002', NULL);
        """, folder: "INSERT INTO ZFOLDER VALUES (?, 1, 1, ?)",
        note: "INSERT INTO ZNOTE VALUES (?, 2, 1, ?, ?, ?, ?, ?, ?)", coreDataDates: true)
    build(plain, """
        CREATE TABLE folder (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);
        CREATE TABLE note (id INTEGER PRIMARY KEY AUTOINCREMENT,
          folderId INTEGER NOT NULL REFERENCES folder(id) ON DELETE CASCADE, title TEXT NOT NULL, body TEXT,
          createdAt DATETIME NOT NULL, rating INTEGER NOT NULL, score DOUBLE NOT NULL);
        CREATE INDEX note_on_folderId ON note(folderId);
        """, folder: "INSERT INTO folder VALUES (?, ?)", note: "INSERT INTO note VALUES (?, ?, ?, ?, ?, ?, ?)",
        coreDataDates: false)
}

let foreignModelXML = """
    <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
    <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
        <entity name="Folder" representedClassName="Folder" syncable="YES">
            <attribute name="name" optional="YES" attributeType="String"/>
            <relationship name="notes" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Note" inverseName="folder" inverseEntity="Note"/>
        </entity>
        <entity name="Note" representedClassName="Note" syncable="YES">
            <attribute name="body" optional="YES" attributeType="String"/>
            <attribute name="createdAt" attributeType="Date" usesScalarValueType="NO"/>
            <attribute name="rating" attributeType="Integer 64" usesScalarValueType="YES"/>
            <attribute name="score" attributeType="Double" usesScalarValueType="YES"/>
            <attribute name="title" attributeType="String"/>
            <relationship name="folder" maxCount="1" deletionRule="Nullify" destinationEntity="Folder" inverseName="notes" inverseEntity="Folder"/>
        </entity>
    </model>
    """

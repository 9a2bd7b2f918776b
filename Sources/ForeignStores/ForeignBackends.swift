internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// The names of a SQLite file's tables, read without writing anything (`immutable=1`), or nil
/// when it is not a SQLite database.
func peekTables(_ path: String) -> Set<String>? {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
          let handle = FileHandle(forReadingAtPath: path) else { return nil }
    let magic = (try? handle.read(upToCount: 16)) ?? Data()
    try? handle.close()
    guard magic == Data("SQLite format 3\0".utf8) else { return nil }
    var db: OpaquePointer?
    let uri = "file:" + ForeignDatabase.uriEscaped(path) + "?immutable=1"
    defer { sqlite3_close_v2(db) }
    guard sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK else { return nil }
    var statement: OpaquePointer?
    guard sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &statement, nil)
        == SQLITE_OK else { return nil }
    defer { sqlite3_finalize(statement) }
    var names: Set<String> = []
    while sqlite3_step(statement) == SQLITE_ROW {
        if let text = sqlite3_column_text(statement, 0) { names.insert(String(cString: text)) }
    }
    return names
}

/// What the two foreign kinds share: read-only, never moved, destroyed or staged into.
protocol ForeignBackend: StoreBackend {}

extension ForeignBackend {
    public var fileExtension: String? { nil }

    public func exists(at path: String) -> Bool {
        FileManager.default.fileExists(atPath: (try? ForeignSource(parsing: path))?.path ?? path)
    }

    /// The database file the location names (without its options).
    public func fileSystemPath(of path: String) -> String? { (try? ForeignSource(parsing: path))?.path ?? path }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore
    {
        let store = try openSource(at: path, alreadyChecked: false)
        if let schema, schema != store.schema {
            try? store.close()
            throw StoreError(.readOnly, "\(kind):\(path) is read as a source and never written: copy it into a store "
                + "of this toolkit (migrate-store copy --from \(kind):\(path) --to …)")
        }
        return store
    }

    public func check(at path: String) throws -> EngineCheck {
        let store = try openSource(at: path, alreadyChecked: false)
        defer { try? store.close() }
        // The integrity check reads the database the store opened (one snapshot, not two).
        guard let engine = (store as? Store)?.engine as? ForeignEngine else {
            throw StoreError(.invalidArgument, "\(kind):\(path) did not open as a foreign store")
        }
        let database = engine.database
        let result = try database.withConnection {
            try database.rows("PRAGMA integrity_check").compactMap { $0.first?.stringValue }
        }
        guard result == ["ok"] else {
            throw StoreError(.corrupt, "\(database.path) is damaged: " + result.prefix(3).joined(separator: "; "))
        }
        return EngineCheck("PRAGMA integrity_check: ok; every table and value read against the mapping")
    }

    public func destroy(at path: String) throws {
        throw StoreError(.readOnly, "\(kind):\(path) is a source this toolkit reads and never changes or deletes")
    }

    public func move(from path: String, to other: String) throws {
        throw StoreError(.readOnly, "\(kind):\(path) is a source this toolkit reads and never moves")
    }

    public func sizeOnDisk(at path: String) -> Int64 {
        let file = (try? ForeignSource(parsing: path))?.path ?? path
        return [file, file + "-wal"].reduce(0) { total, name in
            total + (((try? FileManager.default.attributesOfItem(atPath: name))?[.size] as? Int64) ?? 0)
        }
    }
}

/// The `coredata` kind: `coredata:App.sqlite[?model=…&key=…]`, a Core Data or SwiftData store
/// read as a source.
@_spi(Backend) public struct CoreDataBackend: ForeignBackend {
    public init() {}
    public var kind: StoreKind { "coredata" }

    public func recognizes(_ path: String) -> Bool {
        guard let tables = peekTables(path) else { return false }
        return tables.contains("Z_PRIMARYKEY") && tables.contains("Z_METADATA")
    }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try CoreDataStore(ForeignSource(parsing: path))
    }
}

/// The `plain-sqlite` kind: `plain-sqlite:app.db[?key=…]`, a SQLite database of tables read as a
/// source.
@_spi(Backend) public struct PlainSQLiteBackend: ForeignBackend {
    public init() {}
    public var kind: StoreKind { "plain-sqlite" }

    /// Never: any SQLite file could be a damaged store of the `sqlite` kind, whose own check says
    /// so (and names `plain-sqlite:` when it has no store header), so a plain database is read
    /// only when the user says `plain-sqlite:`.
    public func recognizes(_ path: String) -> Bool { false }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try PlainSQLiteStore(ForeignSource(parsing: path))
    }
}

/// The `realm` kind: `realm:default.realm`, a Realm file read as a source (``RealmStore``).
@_spi(Backend) public struct RealmBackend: ForeignBackend {
    public init() {}
    public var kind: StoreKind { "realm" }

    /// A file whose header says `T-DB` (the Realm mnemonic, at bytes 16 to 19), or a `.realm`
    /// file of whole 4,096-byte pages without that header (the encrypted form, which has nothing
    /// in the clear).
    public func recognizes(_ path: String) -> Bool {
        let file = (try? ForeignSource(parsing: path).path) ?? path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), !isDirectory.boolValue,
              let handle = FileHandle(forReadingAtPath: file) else { return false }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 24)) ?? Data()
        if RealmFile.hasHeader(header) { return true }
        guard file.hasSuffix(".realm"), let size = try? handle.seekToEnd() else { return false }
        return size >= UInt64(2 * RealmCipher.pageSize) && size % UInt64(RealmCipher.pageSize) == 0
    }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try RealmStore(ForeignSource(parsing: path))
    }

    /// Opening reads every node the classes reach and decodes every object against the file's
    /// bounds: the check is the open.
    public func check(at path: String) throws -> EngineCheck {
        let store = try openSource(at: path, alreadyChecked: false)
        try store.close()
        return EngineCheck("every table, column and object read against the file's bounds")
    }
}

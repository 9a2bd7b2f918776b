internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// Where a foreign store is and how to read it: `PATH`, then optionally `?model=MODEL` (a Core
/// Data `.xcdatamodeld`, `.xcdatamodel` or `contents` file) and `&key=ENTITY.ATTRIBUTE` (the
/// attribute that keys an entity's items; for a plain SQLite table, a unique non-null column or
/// `rowid`), any number of times.
///
/// `coredata:App.sqlite?model=App.xcdatamodeld&key=Note.id` reads a Core Data store with the
/// app's model, keying notes by their `id`. The options are part of the location, so that a
/// copy interrupted and resumed reads the source the same way.
public struct ForeignSource: Sendable, Hashable {
    public var path: String
    public var model: String?
    /// Entity (or table) name → the attribute (or column) that keys it.
    public var keys: [String: String]

    public init(path: String, model: String? = nil, keys: [String: String] = [:]) {
        self.path = path
        self.model = model
        self.keys = keys
    }

    /// Parses `PATH[?model=M][&key=E.a…]`.
    /// - Throws: `invalidArgument` naming an option it does not know or a key without an entity.
    public init(parsing text: String) throws(StoreError) {
        guard let mark = text.lastIndex(of: "?"), text[text.index(after: mark)...].contains("=") else {
            self.init(path: text)
            return
        }
        var source = ForeignSource(path: String(text[..<mark]))
        for item in text[text.index(after: mark)...].split(separator: "&") {
            guard let equals = item.firstIndex(of: "=") else {
                throw StoreError(.invalidArgument, "'\(item)' in '\(text)' is not OPTION=VALUE (model=… or key=…)")
            }
            let name = item[..<equals], value = String(item[item.index(after: equals)...])
            switch name {
            case "model": source.model = value
            case "key":
                let parts = value.split(separator: ".", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                    throw StoreError(.invalidArgument, "key=\(value) in '\(text)' must be key=ENTITY.ATTRIBUTE")
                }
                source.keys[parts[0]] = parts[1]
            default:
                throw StoreError(.invalidArgument, "'\(name)' in '\(text)' is not an option of a foreign store; they "
                    + "are model=PATH and key=ENTITY.ATTRIBUTE")
            }
        }
        self = source
    }

    /// The text `init(parsing:)` reads.
    public var description: String {
        var options: [String] = []
        if let model { options.append("model=\(model)") }
        options += keys.sorted { $0.key < $1.key }.map { "key=\($0.key).\($0.value)" }
        return options.isEmpty ? path : path + "?" + options.joined(separator: "&")
    }
}

/// A Core Data (or SwiftData) store opened read-only as a ``DataStore``: see ``CoreDataMapping``
/// for what maps to what. Its model comes from the store (`Z_MODELCACHE`) unless a model file is
/// given.
///
/// ```swift
/// let notes = try CoreDataStore(ForeignSource(path: "Notes.sqlite"))
/// let all = try notes.read { try $0.fetch(FetchRequest("Note")) }
/// ```
public final class CoreDataStore: Store, @unchecked Sendable {
    /// What the mapping did, in one line.
    public let summary: String

    /// Opens the store, reads its model and checks every value against it.
    /// - Throws: `notFound`, `notAStore`, `schemaMismatch` (the model is not the store's), or
    ///   `invalidArgument`/`invalidValue` naming what cannot be carried.
    public init(_ source: ForeignSource) throws {
        let database = try ForeignDatabase(path: source.path)
        do {
            let model: CoreDataModel
            if let file = source.model {
                model = try CoreDataModel(modelFile: file)
            } else {
                model = try Self.modelCache(database)
            }
            let mapping = try CoreDataMapping.map(database, model: model, keys: source.keys)
            summary = mapping.summary + (source.model == nil ? ", model from Z_MODELCACHE" : ", model from \(source.model ?? "")")
            try super.init(engine: ForeignEngine(database: database, mapping: mapping, kindName: "coredata"))
        } catch {
            database.close()
            throw error
        }
    }

    static func modelCache(_ database: ForeignDatabase) throws -> CoreDataModel {
        let tables = try database.tableNames()
        guard tables.contains("Z_PRIMARYKEY") else {
            throw StoreError(.notAStore, "\(database.path) is not a Core Data store: it has no Z_PRIMARYKEY table")
        }
        guard tables.contains("Z_MODELCACHE"),
              let row = try database.rows("SELECT Z_CONTENT FROM Z_MODELCACHE LIMIT 1").first,
              case .bytes(let compressed) = row[0] else {
            throw StoreError(.notFound, "\(database.path) keeps no model (no Z_MODELCACHE, as stores written before "
                + "iOS 11 and macOS 10.13): pass the app's model, coredata:\(database.path)?model=App.xcdatamodeld")
        }
        return try CoreDataModel(modelCache: compressed, what: "the model cache of \(database.path)")
    }
}

/// A plain SQLite database (GRDB's, SQLite.swift's or hand-written) opened read-only as a
/// ``DataStore``: see ``PlainSQLiteMapping`` for what maps to what.
public final class PlainSQLiteStore: Store, @unchecked Sendable {
    public let summary: String

    /// Opens the database and checks every table and value against what stores here can hold.
    /// - Throws: `notFound`, `notAStore`, or `invalidArgument`/`invalidValue`/
    ///   `referenceViolation` naming the table, column or row that cannot be carried.
    public init(_ source: ForeignSource) throws {
        if source.model != nil {
            throw StoreError(.invalidArgument, "model= is for coredata: stores; a plain SQLite database is read "
                + "from its tables")
        }
        let database = try ForeignDatabase(path: source.path)
        do {
            let mapping = try PlainSQLiteMapping.map(database, keys: source.keys)
            summary = mapping.summary
            try super.init(engine: ForeignEngine(database: database, mapping: mapping, kindName: "plain-sqlite"))
        } catch {
            database.close()
            throw error
        }
    }
}

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
    let uri = "file:" + path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
        .replacingOccurrences(of: "#", with: "%23") + "?immutable=1"
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
        let source = try ForeignSource(parsing: path)
        let integrity = try ForeignDatabase(path: source.path)
        defer { integrity.close() }
        let result = try integrity.rows("PRAGMA integrity_check").compactMap { $0.first?.stringValue }
        guard result == ["ok"] else {
            throw StoreError(.corrupt, "\(source.path) is damaged: " + result.prefix(3).joined(separator: "; "))
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

    public func recognizes(_ path: String) -> Bool {
        guard let tables = peekTables(path) else { return false }
        return !tables.contains("_ds_meta") && !(tables.contains("Z_PRIMARYKEY") && tables.contains("Z_METADATA"))
    }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try PlainSQLiteStore(ForeignSource(parsing: path))
    }
}

internal import CLMDB
import DataStoreAPI
import Foundation

/// A store in one LMDB environment directory.
public typealias LMDBStore = Store<LMDBEngine>

/// Options of an LMDB store.
public struct LMDBOptions: Sendable, Hashable {
    /// How durable a commit is when `writeSync` returns.
    public var durability: Durability
    /// The map size to start with; the map doubles by itself whenever a write needs more.
    public var initialMapSize: Int
    /// Reader slots: how many read transactions may be open at once across processes.
    public var maxReaders: Int

    public init(durability: Durability = .full, initialMapSize: Int = 64 << 20, maxReaders: Int = 1024) {
        self.durability = durability
        self.initialMapSize = max(initialMapSize, 64 << 10)
        self.maxReaders = max(1, maxReaders)
    }
}

/// The LMDB backend: a named database per entity (order-preserving key → compact, versioned
/// record), one per index, and `_ds_meta` for the format version and schema.
public final class LMDBEngine: StorageEngine {
    /// The format this code writes. Format 1 wrote index keys without the separator that
    /// ``LMDBIndexKeys`` puts between tuple and primary key; its indexes are rebuilt on open.
    static let formatVersion = 2

    public let schema: Schema
    /// The environment directory.
    public let path: String
    let environment: LMDBEnvironment
    let databases: LMDBDatabases

    /// Opens the store in the directory `path`, creating it (with `schema`) when it does not
    /// exist or is empty.
    ///
    /// - Parameter schema: the schema the store must hold; `nil` opens an existing store.
    /// - Throws: `notFound` (no store there and no schema), `notAStore` (a file, a directory
    ///   holding other things, an LMDB environment that is not a store), `incompatibleFormat`,
    ///   `schemaMismatch`, `readOnly`, `corrupt`.
    public init(path: String, schema requested: Schema?, options: LMDBOptions = LMDBOptions()) throws {
        self.path = path
        try Self.checkDirectory(path, create: requested != nil)
        environment = try LMDBEnvironment(path: path, mapSize: options.initialMapSize,
                                          maxReaders: UInt32(options.maxReaders), durability: options.durability)
        let txn = try LMDBTransaction(environment: environment, write: true)
        defer { txn.finish() }
        let existingMeta = try environment.openDatabase("_ds_meta", in: txn.txn, create: false)
        var stored: Schema?
        var storedFormat = Self.formatVersion
        if let meta = existingMeta {
            (storedFormat, stored) = try Self.readSchema(txn, meta: meta, path: path)
        } else if try txn.count(environment.mainDatabase(in: txn.txn)) > 0 {
            throw StoreError(.notAStore, "\(path) is an LMDB environment but not a DataStore store (no _ds_meta)")
        }
        let (schema, isNew) = try Schema.resolve(stored: stored, requested: requested, location: path)
        self.schema = schema
        let meta = try existingMeta ?? environment.openDatabase("_ds_meta", in: txn.txn, create: true)
        guard let meta else { throw StoreError(.io, "\(path): cannot create _ds_meta") }
        databases = try LMDBDatabases.open(schema, environment, txn, meta: meta, create: isNew)
        if isNew {
            try txn.put(meta, Array("datastore.format".utf8), Array(String(Self.formatVersion).utf8))
            try txn.put(meta, Array("datastore.schema".utf8), schema.encodedForStorage())
        }
        try txn.commit()
        if storedFormat < Self.formatVersion {
            try rebuildIndexes()
        }
    }

    /// Rewrites every index in the current format, in one write transaction, reading each
    /// entity in pages (a cursor would not survive the restart that growing the map needs).
    private func rebuildIndexes() throws {
        let txn = try LMDBTransaction(environment: environment, write: true)
        defer { txn.finish() }
        let storage = LMDBStorage(txn: txn, databases: databases)
        for entity in schema.entities {
            guard let indexes = databases.indexes[entity.name], !indexes.isEmpty else { continue }
            for (_, dbi) in indexes { try txn.drop(dbi) }
            var after: [UInt8]?
            while true {
                let page = try storage.scan(entity, after: after, limit: 1_000)
                for record in page {
                    let key = try entity.encodeKey(record[entity.primaryKey])
                    for index in entity.indexes {
                        guard let dbi = indexes[index.name] else { continue }
                        try txn.put(dbi, LMDBIndexKeys.key(index, record, primaryKey: key), key)
                    }
                    after = key
                }
                if page.count < 1_000 { break }
            }
        }
        try txn.put(databases.meta, Array("datastore.format".utf8), Array(String(Self.formatVersion).utf8))
        try txn.commit()
    }

    private static func checkDirectory(_ path: String, create: Bool) throws {
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        if files.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw StoreError(.notAStore, "\(path) is a file, not an LMDB environment directory")
            }
            if files.fileExists(atPath: path + "/data.mdb") { return }
            let entries = (try? files.contentsOfDirectory(atPath: path)) ?? []
            if entries.contains(where: { $0 != "lock.mdb" }) {
                throw StoreError(.notAStore, "\(path) is a directory that holds no LMDB environment and is not empty")
            }
            guard create else { throw StoreError(.notFound, "\(path) holds no store") }
            return
        }
        guard create else { throw StoreError(.notFound, "\(path) does not exist") }
        let parent = (path as NSString).deletingLastPathComponent
        guard parent.isEmpty || files.fileExists(atPath: parent) else {
            throw StoreError(.notFound, "\(path): directory \(parent) does not exist")
        }
        do {
            try files.createDirectory(atPath: path, withIntermediateDirectories: false)
        } catch {
            throw StoreError(.readOnly, "\(path): cannot create the environment directory: \(error.localizedDescription)")
        }
    }

    private static func readSchema(_ txn: LMDBTransaction, meta: MDB_dbi, path: String) throws -> (Int, Schema) {
        let format = try txn.withValue(meta, Array("datastore.format".utf8)) {
            Int(String(decoding: $0, as: UTF8.self))
        }
        guard let format, let version = format else {
            throw StoreError(.corrupt, "\(path): the store's format version is missing")
        }
        guard version <= formatVersion else {
            throw StoreError(.incompatibleFormat, "\(path) was written by format version \(version); this version "
                + "reads up to \(formatVersion)")
        }
        guard let bytes = try txn.withValue(meta, Array("datastore.schema".utf8), { Array($0) }) else {
            throw StoreError(.corrupt, "\(path): the store's schema is missing")
        }
        return (version, try Schema.decodeFromStorage(bytes, location: path))
    }

    public func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        let txn = try LMDBTransaction(environment: environment, write: false)
        defer { txn.finish() }
        return try body(LMDBStorage(txn: txn, databases: databases))
    }

    public func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        let txn = try LMDBTransaction(environment: environment, write: true)
        defer { txn.finish() }
        let result = try body(LMDBStorage(txn: txn, databases: databases))
        try txn.commit()
        return result
    }

    public func close() throws {
        environment.close()
    }

    /// The current map size in bytes.
    public var mapSize: Int { environment.mapSize }

    /// The index and ranges a filter would use (for tests).
    func plannedIndex(_ request: FetchRequest) -> String? {
        schema.entity(named: request.entity).flatMap { LMDBIndexKeys.plan(request.filter, $0)?.0.name }
    }
}

extension Store where Engine == LMDBEngine {
    /// Opens (or creates) the LMDB store in the directory `path`.
    /// - Parameter schema: the schema the store must hold; `nil` opens an existing store.
    public convenience init(path: String, schema: Schema?, options: LMDBOptions = LMDBOptions()) throws {
        try self.init(engine: LMDBEngine(path: path, schema: schema, options: options))
    }

    /// Deletes the environment's files and its directory. Close every store opened on it first.
    public static func destroy(at path: String) throws {
        for file in ["data.mdb", "lock.mdb"] where FileManager.default.fileExists(atPath: path + "/" + file) {
            do {
                try FileManager.default.removeItem(atPath: path + "/" + file)
            } catch {
                throw StoreError(.io, "cannot delete \(path)/\(file): \(error.localizedDescription)")
            }
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}

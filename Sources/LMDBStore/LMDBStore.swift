internal import CLMDB
@_spi(Backend) import DataStoreAPI
import Foundation
import Logging

/// A store in one LMDB environment directory: a named database per entity and per index.
public final class LMDBStore: Store, @unchecked Sendable {
    let lmdb: LMDBEngine

    /// Opens (or creates) the LMDB store in the directory `path`.
    /// - Parameter schema: the schema the store must hold; `nil` opens an existing store.
    /// - Throws: `notFound` (no store there and no schema), `notAStore`, `incompatibleFormat`,
    ///   `schemaMismatch`, `readOnly`, `corrupt`, `incompleteMigration`.
    /// - Parameter upgrades: the steps that bring a store holding an older schema version to
    ///   `schema` (see ``SchemaUpgrades``); they run, in one transaction, when the store opens.
    ///   Throws `newerSchemaVersion` for a store of a newer version, `schemaMismatch` listing
    ///   each difference no step accounts for.
    /// - Parameter instrumentation: where the store logs and counts what it does (nothing by
    ///   default).
    public init(path: String, schema: Schema?, upgrades: SchemaUpgrades = SchemaUpgrades(),
                options: LMDBOptions = LMDBOptions(), instrumentation: Instrumentation = .none) throws {
        let (engine, lmdb) = try SealedEngine.open(key: options.key, requested: schema, upgrades: upgrades,
                                                   location: path) {
            try LMDBEngine(path: path, schema: $0, options: options)
        }
        self.lmdb = lmdb
        try super.init(engine: engine, instrumentation: instrumentation)
        logOpened(path)
    }

    /// The environment directory.
    public var path: String { lmdb.path }

    /// The current map size in bytes (it grows by itself).
    public var mapSize: Int { lmdb.mapSize }

    /// Checks the environment at `path` for damage without writing to it (see
    /// ``LMDBOptions/checkPages``): every page walked with bounds checks, then every record.
    public static func check(path: String) throws -> LMDBCheckReport {
        try LMDBEngine.check(path: path)
    }

    /// Deletes the environment: `data.mdb`, `lock.mdb` and its directory. A directory that also
    /// holds other files is refused before anything is deleted (`invalidArgument`, naming them):
    /// a file that is not the store's is never deleted. A symbolic link is removed itself, and
    /// what it points to is left as it is, as every kind of store does (SQLite's and JSON
    /// Lines' `destroy` remove the link too). Close every store opened on it first.
    /// - Throws: `invalidArgument` when the directory holds other files, `io` when a file
    ///   cannot be deleted.
    public static func destroy(at path: String) throws {
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) != nil {
            guard unlink(path) == 0 || errno == ENOENT else {
                throw StoreError(.io, "cannot delete the symbolic link \(path): \(String(cString: strerror(errno)))")
            }
            return
        }
        // An empty file where the directory goes (what --overwrite may replace) goes too;
        // anything else that is not a directory is not the store's.
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? nil
            guard size == 0 else {
                throw StoreError(.invalidArgument, "\(path) is not deleted: it is a file, not an LMDB store's directory")
            }
            guard unlink(path) == 0 || errno == ENOENT else {
                throw StoreError(.io, "cannot delete the empty file \(path): \(String(cString: strerror(errno)))")
            }
            return
        }
        let others = LMDBBackend().otherFiles(at: path)
        guard others.isEmpty else {
            throw StoreError(.invalidArgument, "\(path) is not deleted: its directory also holds "
                + others.prefix(3).joined(separator: ", ") + (others.count > 3 ? " and \(others.count - 3) more" : "")
                + (others.count == 1 ? ", which is not" : ", which are not") + " the store's; move them out first")
        }
        for file in ["data.mdb", "lock.mdb"] where FileManager.default.fileExists(atPath: path + "/" + file) {
            do {
                try FileManager.default.removeItem(atPath: path + "/" + file)
            } catch {
                throw StoreError(.io, "cannot delete \(path)/\(file): \(error.localizedDescription)")
            }
        }
        // rmdir(2) removes only an empty directory (a file put there meanwhile stays).
        guard rmdir(path) == 0 || errno == ENOENT else {
            throw StoreError(.io, "cannot delete the directory \(path): \(String(cString: strerror(errno)))")
        }
    }
}

/// What ``LMDBStore/check(path:)`` found in an environment without damage.
public struct LMDBCheckReport: Sendable, Hashable {
    /// The environment's page size in bytes.
    public var pageSize: Int
    /// Pages walked (tree and overflow pages of every database).
    public var pages: Int
    /// Entries in every database, indexes and metadata included.
    public var entries: Int
    /// Databases walked: the free list, the main database and each named one.
    public var databases: Int
    /// Items of the store decoded and checked against its schema.
    public var items = 0
}

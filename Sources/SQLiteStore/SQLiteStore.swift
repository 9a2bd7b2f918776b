internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation
import Synchronization

/// A store in one SQLite file: an ordinary database with one table per entity, a column per
/// attribute and real SQL indexes, which the `sqlite3` shell reads.
public final class SQLiteStore: Store, @unchecked Sendable {
    let sqlite: SQLiteEngine

    /// Opens (or creates) the SQLite store at `path`.
    /// - Parameter schema: the schema the store must hold; `nil` opens an existing store.
    /// - Throws: `notFound` (missing directory, or missing file with no schema), `notAStore`,
    ///   `incompatibleFormat`, `schemaMismatch`, `readOnly`, `corrupt`, `incompleteMigration`.
    /// - Parameter upgrades: the steps that bring a store holding an older schema version to
    ///   `schema` (see ``SchemaUpgrades``); they run, in one transaction, when the store opens.
    ///   Throws `newerSchemaVersion` for a store of a newer version, `schemaMismatch` listing
    ///   each difference no step accounts for.
    /// - Parameter instrumentation: where the store logs and counts what it does (nothing by
    ///   default).
    public init(path: String, schema: Schema?, upgrades: SchemaUpgrades = SchemaUpgrades(),
                options: SQLiteOptions = SQLiteOptions(), instrumentation: Instrumentation = .none) throws {
        let (engine, sqlite) = try SealedEngine.open(key: options.key, requested: schema, upgrades: upgrades,
                                                     location: path) {
            try SQLiteEngine(path: path, schema: $0, options: options)
        }
        self.sqlite = sqlite
        try super.init(engine: engine, instrumentation: instrumentation)
        logOpened(path)
    }

    /// The database file.
    public var path: String { sqlite.path }

    /// Runs `PRAGMA integrity_check` on the store at `path`, opened read-only, then reads every
    /// row, each checked against the schema and its checksum.
    /// - Returns: `ok`.
    /// - Throws: `corrupt` with SQLite's first findings, or naming every damaged row (in one
    ///   line); or the error of opening the file.
    public static func integrityCheck(path: String) throws -> String {
        try SQLiteEngine.integrityCheck(path: path).0
    }

    /// Deletes the store's files (the database, its WAL and shared-memory files, and the rollback
    /// journal a store's creation leaves when it is killed before its first commit).
    /// Close every store opened on it first.
    public static func destroy(at path: String) throws {
        for file in [path, path + "-wal", path + "-shm", path + "-journal"] where FileManager.default.fileExists(atPath: file) {
            do {
                try FileManager.default.removeItem(atPath: file)
            } catch {
                throw StoreError(.io, "cannot delete \(file): \(error.localizedDescription)")
            }
        }
    }
}

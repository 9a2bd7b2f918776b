@_spi(Backend) import DataStoreAPI
import Foundation

/// A plain SQLite database (GRDB's, SQLite.swift's or hand-written) opened read-only as a
/// ``DataStore``: see ``PlainSQLiteMapping`` for what maps to what.
public final class PlainSQLiteStore: Store, ForeignStore, @unchecked Sendable {
    /// What the mapping did, in one line.
    public let summary: String
    /// What the file is: its `user_version`, its journal and what lives only in its `-wal`.
    public let facts: [String]

    /// Opens the database and checks every table and value against what stores here can hold.
    /// - Throws: `notFound`, `notAStore`, or `invalidArgument`/`invalidValue`/
    ///   `referenceViolation` naming the table, column or row that cannot be carried.
    public init(_ source: ForeignSource) throws {
        if source.model != nil {
            throw StoreError(.invalidArgument, "model= is for coredata: stores; a plain SQLite database is read "
                + "from its tables")
        }
        try source.refuseKeyFile(kind: "plain-sqlite")
        let database = try ForeignDatabase(path: source.path)
        do {
            let mapping = try PlainSQLiteMapping.map(database, keys: source.keys, tables: source.tables)
            summary = mapping.summary
            let userVersion = (try? database.rows("PRAGMA user_version").first?.first?.intValue) ?? nil
            facts = ["plain SQLite database, user_version \(userVersion.map(String.init) ?? "unknown")"]
                + database.journalFacts()
            try super.init(engine: ForeignEngine(database: database, mapping: mapping, kindName: "plain-sqlite"))
        } catch {
            database.close()
            throw error
        }
    }
}

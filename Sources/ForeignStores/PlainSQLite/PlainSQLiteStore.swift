@_spi(Backend) import DataStoreAPI
import Foundation

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

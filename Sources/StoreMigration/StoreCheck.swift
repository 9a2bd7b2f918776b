import DataStoreAPI
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore

/// What a check of a store found: the engine's own integrity check, then every item of every
/// entity read back and checked against the schema.
public struct StoreCheckReport: Sendable, Codable, Hashable {
    /// The store checked.
    public var store: String
    /// What the engine's own check did (`PRAGMA integrity_check`, the LMDB page walk).
    public var engineCheck: String
    /// Items read and checked against the schema.
    public var items: Int
    public var seconds: Double
}

extension StoreLocation {
    /// Opens the store as a source: read-only, so that nothing in it changes (not its journal
    /// mode, not an empty LMDB file), and, for LMDB, with every page checked before liblmdb
    /// reads one, so that a damaged environment fails with `corrupt` instead of crashing.
    public func openSource(checkPages: Bool = true, acceptingIncompleteMigration: Bool = false) throws
        -> any DataStore {
        switch kind {
        case .sqlite:
            return try Store(engine: SQLiteEngine(path: path, schema: nil, options: SQLiteOptions(readOnly: true)),
                             acceptingIncompleteMigration: acceptingIncompleteMigration)
        case .lmdb:
            let options = LMDBOptions(readOnly: true, checkPages: checkPages)
            return try Store(engine: LMDBEngine(path: path, schema: nil, options: options),
                             acceptingIncompleteMigration: acceptingIncompleteMigration)
        case .memory:
            return try open(schema: nil, acceptingIncompleteMigration: acceptingIncompleteMigration)
        }
    }

    /// Checks the store without writing to it: SQLite's `PRAGMA integrity_check`, or a bounds-
    /// checked walk of every LMDB page; then every item, decoded and checked against the schema
    /// (a value the schema cannot hold exactly is damage). Values damaged into other valid values
    /// of the right type cannot be told from real data by any check.
    /// - Throws: `corrupt` naming the file and what is damaged, or the error opening it.
    public func check() throws -> StoreCheckReport {
        let started = Date()
        let engineCheck: String
        switch kind {
        case .sqlite:
            engineCheck = "PRAGMA integrity_check: " + (try SQLiteEngine.integrityCheck(path: path))
        case .lmdb:
            let pages = try LMDBEngine.check(path: path)
            engineCheck = "page walk: \(pages.pages) pages of \(pages.pageSize) bytes, \(pages.databases) "
                + "databases, \(pages.entries) entries"
        case .memory:
            engineCheck = "none (in memory)"
        }
        let store = try openSource(checkPages: false, acceptingIncompleteMigration: true)
        defer { try? store.close() }
        let items = try store.read { reader in
            var items = 0
            for entity in store.schema.entities {
                var after: Value?
                while true {
                    let page = try reader.scan(entity.name, after: after, limit: 1_000)
                    items += page.count
                    guard page.count == 1_000, let last = page.last else { break }
                    after = last[entity.primaryKey]
                }
            }
            return items
        }
        return StoreCheckReport(store: description, engineCheck: engineCheck, items: items,
                                seconds: Date().timeIntervalSince(started))
    }
}

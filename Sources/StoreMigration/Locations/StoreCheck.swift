@_spi(Backend) import DataStoreAPI
import Foundation

/// What a check of a store found: the engine's own integrity check, then every item of every
/// entity read back and checked against the schema.
public struct StoreCheckReport: Sendable, Codable, Hashable {
    /// The store checked.
    public var store: String
    /// What the engine's own check did (`PRAGMA integrity_check`, the LMDB page walk).
    public var engineCheck: String
    /// Items read and checked against the schema.
    public var items: Int
    /// To-one references checked (each points at an existing item); `nil` for a store without
    /// relationships.
    public var references: Int?
    /// Entries of the change feed read, their checksums checked (the feed's state too); `nil`
    /// from a version before this field.
    public var changeFeedEntries: Int?
    /// How long the check took.
    public var seconds: Double
}

extension StoreLocation {
    /// Opens the store as a source: read-only, so that nothing in it changes (not its journal
    /// mode, not an empty LMDB file), and so that no damage can crash the process (an LMDB
    /// source has every page checked before liblmdb reads one).
    public func openSource(alreadyChecked: Bool = false) throws -> any DataStore {
        try MigrationGate.$opensSwitchedAway.withValue(true) {
            try backend.openSource(at: path, alreadyChecked: alreadyChecked, key: key)
        }
    }

    /// Checks the store without writing to it: the engine's own check (SQLite's
    /// `PRAGMA integrity_check`, a bounds-checked walk of every LMDB page), then every item,
    /// decoded and checked against the schema (a value the schema cannot hold exactly is
    /// damage). Values damaged into other valid values of the right type cannot be told from
    /// real data by any check.
    /// Then every to-one reference, which must point at an existing item, and the change feed's
    /// state and entries, whose checksums must match.
    /// - Throws: `corrupt` naming the file and what is damaged, `referenceViolation` naming the
    ///   dangling references (a `DELETE` in the `sqlite3` shell with foreign keys off leaves
    ///   them), or the error opening it.
    public func check() throws -> StoreCheckReport {
        let started = Date()
        // An encrypted store's engine holds its items sealed: its own check reads them as they are.
        let engineCheck = try Migrator.withResumeCommand(self) {
            try SealedEngine.$physicalSchemas.withValue(key != nil) { try backend.check(at: path) }
        }
        // An encrypted store's items are also read through the store, which opens (and so
        // authenticates) each one: the engine's check read them sealed.
        let items = try (key == nil ? engineCheck.itemsChecked : nil) ?? countCheckedItems()
        try refuseUnfinishedCopy()
        let store = try Migrator.acceptingUnfinished { try openSource(alreadyChecked: true) }
        defer { try? store.close() }
        let references = try checkReferences(in: store)
        let entries = try checkChangeFeed(in: store)
        return StoreCheckReport(
            store: description, engineCheck: engineCheck.description, items: items, references: references,
            changeFeedEntries: entries, seconds: Date().timeIntervalSince(started))
    }

    /// Refuses the destination of an unfinished copy (its references may lead to items the copy
    /// has not written yet, which is no damage), with the command that finishes it.
    /// - Throws: `incompleteMigration`.
    /// The store is opened read-only, as every check opens it: a check never writes what it
    /// checks (not even a journal mode).
    private func refuseUnfinishedCopy() throws {
        let store = try Migrator.acceptingUnfinished { try openSource(alreadyChecked: true) }
        let marker: String?
        do {
            marker = try Migrator.unfinishedMarker(in: store, of: self)
            try store.close()
        } catch {
            try? store.close()
            throw error
        }
        // Closed before the refusal, which opens the store again to name the copy's source.
        if marker != nil {
            throw Migrator.unfinished(self, detail: " (its engine check passed; references to items not copied yet "
                + "are expected)")
        }
    }

    /// Checks every to-one reference; returns how many were checked (`nil` without relationships).
    private func checkReferences(in store: any DataStore) throws -> Int? {
        guard store.schema.entities.contains(where: { !$0.relationships.isEmpty }) else { return nil }
        let report = try store.read { try $0.checkReferences() }
        guard report.danglingCount == 0 else {
            throw StoreError(.referenceViolation, "\(description) holds \(report.danglingCount) dangling reference"
                + "\(report.danglingCount == 1 ? "" : "s") (written outside the package, or damage): \(report.summary)")
        }
        return report.checked
    }

    /// Reads the change feed's state and every entry it holds; returns how many entries.
    private func checkChangeFeed(in store: any DataStore) throws -> Int {
        do {
            return try store.read { try $0.checkChangeFeed() }
        } catch let error as StoreError where error.code == .corrupt {
            throw StoreError(.corrupt, "\(description): \(error.message)")
        }
    }

    /// Reads every item back through the store (its decoding checks each value against the
    /// schema), for a backend whose own check did not.
    private func countCheckedItems() throws -> Int {
        let store = try Migrator.acceptingUnfinished { try openSource(alreadyChecked: true) }
        defer { try? store.close() }
        return try store.read { reader in
            var items = 0
            for entity in store.schema.entities {
                try reader.forEachPage(entity, pageSize: 1_000) { page in
                    items += page.count
                    return true
                }
            }
            return items
        }
    }
}

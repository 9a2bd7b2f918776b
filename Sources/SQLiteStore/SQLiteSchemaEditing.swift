@_spi(Backend) import DataStoreAPI
import Foundation

/// Schema upgrades on SQLite, inside the writer's transaction (SQLite's DDL is transactional).
///
/// What SQLite changes in place, it does: a new attribute is `ALTER TABLE ADD COLUMN` (its
/// default, when it has one, becomes the column's default, which SQLite returns for the rows
/// written before), a renamed one is `RENAME COLUMN`, a removed one is `DROP COLUMN`, indexes
/// are created and dropped. The rows' checksums are then written again when their fields
/// changed: a default or a removed column does, an optional column added last does not. Anything that changes values (a type change,
/// a custom step) is SQLite's own recipe for other changes: a new table filled from the old one,
/// the old table dropped, the new one renamed, its indexes built last.
extension SQLiteTransaction: SchemaEditingWriter {
    func createEntity(_ entity: EntitySchema) throws {
        try SQLiteEngine.createTable(entity, in: connection)
        for index in entity.indexes { try SQLiteEngine.createIndex(index, of: entity, in: connection) }
    }

    func dropEntity(_ entity: EntitySchema) throws {
        try connection.execute("DROP TABLE \(SQLiteQuery.quote(entity.name))")
    }

    func renameEntity(_ entity: EntitySchema, to renamed: EntitySchema) throws {
        for index in entity.indexes {
            try connection.execute("DROP INDEX \(SQLiteEngine.indexName(index, of: entity))")
        }
        try SQLiteRowSum.dropTrigger(of: entity.name, in: connection)
        try connection.execute("ALTER TABLE \(SQLiteQuery.quote(entity.name)) RENAME TO "
            + SQLiteQuery.quote(renamed.name))
        try SQLiteRowSum.createTrigger(renamed, in: connection)
        for index in renamed.indexes { try SQLiteEngine.createIndex(index, of: renamed, in: connection) }
    }

    func changeEntity(_ change: EntityChange) throws {
        if try !changeInPlace(change) {
            try rebuild(change)
        }
    }

    /// Applies a change that needs no item rewritten with `ALTER TABLE`; false when it cannot.
    private func changeInPlace(_ change: EntityChange) throws -> Bool {
        guard change.isStructural else { return false }
        let (old, new) = (change.old, change.new)
        // A foreign key is part of the table's definition: adding or removing one rebuilds it.
        func references(_ entity: EntitySchema) -> [String] {
            entity.relationships.filter { $0.cardinality == .toOne }.map { "\($0.name)>\($0.destination)" }
        }
        guard references(old) == references(new) else { return false }
        let table = SQLiteQuery.quote(old.name)
        let kept = old.attributes.compactMap { attribute -> (Attribute, Attribute)? in
            guard let now = new.attribute(named: change.renamedAttributes[attribute.name] ?? attribute.name) else {
                return nil
            }
            return (attribute, now)
        }
        guard kept.allSatisfy({ $0.type == $1.type && $0.isOptional == $1.isOptional }) else { return false }
        let keptNames = Set(kept.map(\.1.name))
        let added = new.attributes.filter { !keptNames.contains($0.name) }
        let addedColumns = added.map(Self.addedColumn)
        guard !addedColumns.contains(nil) else { return false }
        for index in change.removedIndexes {
            try connection.execute("DROP INDEX \(SQLiteEngine.indexName(index, of: old))")
        }
        // The trigger names every column: dropped before the columns change, made again after.
        try SQLiteRowSum.dropTrigger(of: old.name, in: connection)
        for (from, to) in change.renamedAttributes {
            try connection.execute("ALTER TABLE \(table) RENAME COLUMN \(SQLiteQuery.quote(from)) TO "
                + SQLiteQuery.quote(to))
        }
        for attribute in old.attributes where !kept.contains(where: { $0.0.name == attribute.name }) {
            try connection.execute("ALTER TABLE \(table) DROP COLUMN \(SQLiteQuery.quote(attribute.name))")
        }
        for column in addedColumns.compactMap({ $0 }) {
            try connection.execute("ALTER TABLE \(table) ADD COLUMN \(column)")
        }
        // A row's checksum covers its fields up to the last that is not null (SQLiteRowSum): only
        // optional attributes added after the kept ones, in their order, leave every sum as it was.
        let keptInOrder = new.attributes.prefix(kept.count).map(\.name) == kept.map(\.1.name)
        let removed = kept.count < old.attributes.count
        if removed || !keptInOrder || added.contains(where: { !($0.defaultValue ?? .null).isNull }) {
            try SQLiteRowSum.reseal(new, table: old.name, in: connection)
        }
        try SQLiteRowSum.createTrigger(new, in: connection)
        for index in change.addedIndexes { try SQLiteEngine.createIndex(index, of: new, in: connection) }
        return true
    }

    /// The column definition of an added attribute; `nil` when its default has no exact SQL
    /// literal (a double, a string holding NUL), which then takes a rebuild.
    private static func addedColumn(_ attribute: Attribute) -> String? {
        var column = SQLiteQuery.quote(attribute.name) + SQLiteEngine.columnType(attribute.type)
        if !attribute.isOptional { column += " NOT NULL" }
        guard let value = attribute.defaultValue, !value.isNull else { return column }
        let literal: String
        switch value {
        case .null: return column
        case .bool(let b): literal = b ? "1" : "0"
        case .int(let i): literal = String(i)
        case .date(let t): literal = String(t.microsecondsSinceEpoch)
        case .string(let s):
            guard !s.utf8.contains(0) else { return nil }
            literal = "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case .bytes(let b): literal = "X'" + b.map { String(format: "%02x", $0) }.joined() + "'"
        case .uuid(let u): literal = "X'" + u.bytes.map { String(format: "%02x", $0) }.joined() + "'"
        case .double: return nil
        }
        return column + " DEFAULT " + literal
    }

    /// Rewrites every item into a new table, which then takes the entity's name: copied by
    /// SQLite when the change carries and converts values (``SQLiteTableCopy``), else (a custom
    /// step, or a row the copy cannot read or convert, whose error this path names) each item
    /// read into a record, rewritten and inserted.
    private func rebuild(_ change: EntityChange) throws {
        var staging = change.new
        staging.name = "_ds_migrating"
        staging.indexes = []
        try SQLiteEngine.createTable(staging, in: connection)
        let copied = try SQLiteTableCopy.applies(to: change)
            && SQLiteTableCopy(change: change, staging: staging, connection: connection).run()
        if copied {
            // SQLite copied the values, not their rows' checksums.
            try SQLiteRowSum.reseal(change.new, table: staging.name, in: connection)
        } else {
            try forEachRewrittenPage(change) { page in
                for case let (key, new?) in page { try insert(new, key: key, in: staging) }
            }
        }
        try dropEntity(change.old)
        try SQLiteRowSum.dropTrigger(of: staging.name, in: connection)
        try connection.execute("ALTER TABLE \(SQLiteQuery.quote(staging.name)) RENAME TO "
            + SQLiteQuery.quote(change.new.name))
        try SQLiteRowSum.createTrigger(change.new, in: connection)
        for index in change.new.indexes { try SQLiteEngine.createIndex(index, of: change.new, in: connection) }
    }

    func writeSchema(_ schema: Schema) throws {
        try StoreHeader.write(schema, format: SQLiteEngine.formatVersion) { try setMetadata($1, forKey: $0) }
    }
}

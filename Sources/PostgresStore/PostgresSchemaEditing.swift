#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation

/// Schema upgrades on PostgreSQL, inside the writer's transaction (PostgreSQL's DDL is
/// transactional): entities are created, dropped and renamed as tables, and a changed entity is
/// rebuilt: a new table filled with each item's new record, the old table dropped, the new one
/// renamed, its indexes built last.
extension PostgresTransaction: SchemaEditingWriter {
    func createEntity(_ entity: EntitySchema) throws {
        try run(PostgresSQL.createTable(entity, schema: s))
        try run(PostgresRowSum.createTrigger(entity, schema: s))
        for index in entity.indexes { try run(PostgresSQL.createIndex(index, of: entity, schema: s)) }
    }

    func dropEntity(_ entity: EntitySchema) throws {
        try forgetStatements()
        try run("DROP TABLE \(PostgresSQL.table(entity, schema: s))")
    }

    func renameEntity(_ entity: EntitySchema, to renamed: EntitySchema) throws {
        try forgetStatements()
        for index in entity.indexes {
            try run("DROP INDEX \(s).\(PostgresSQL.quote("\(entity.name).\(index.name)"))")
        }
        try run("ALTER TABLE \(PostgresSQL.table(entity, schema: s)) RENAME TO "
            + PostgresSQL.quote(renamed.name))
        for index in renamed.indexes { try run(PostgresSQL.createIndex(index, of: renamed, schema: s)) }
        // The foreign keys of its to-ones are named after the entity: they take the new name,
        // so that nothing of the store's is left under a name it does not know.
        var table = LibpqParameters()
        table.append(PostgresSQL.identifier(renamed.name))
        table.append(s)
        let existing = Set(try run("SELECT c.conname::text FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
            + "WHERE t.relname = $1 AND t.relnamespace = $2::regnamespace AND c.contype = 'f'", table)
            .rows.compactMap { try? $0[0].string() })
        for relationship in entity.relationships where relationship.cardinality == .toOne {
            let old = PostgresSQL.identifier("\(entity.name).\(relationship.name)")
            guard existing.contains(old) else { continue }
            try run("ALTER TABLE \(PostgresSQL.table(renamed, schema: s)) RENAME CONSTRAINT \(PostgresSQL.quote(old)) TO "
                + PostgresSQL.quote("\(renamed.name).\(relationship.name)"))
        }
    }

    func changeEntity(_ change: EntityChange) throws {
        var staging = change.new
        staging.name = "_ds_migrating"
        staging.indexes = []
        try run(PostgresSQL.createTable(staging, schema: s))
        // (Its trigger goes with it through the rename.)
        try run(PostgresRowSum.createTrigger(staging, schema: s))
        // Pages into the empty staging table by COPY (a clean batch: keys are unique and it has no
        // index yet), one by one only if it were not.
        try forEachRewrittenPage(change) { page in
            let records = page.compactMap { item in item.record.map { (record: $0, key: item.key) } }
            if try !insertAllOrNone(records, in: staging) {
                for (record, key) in records { try insert(record, key: key, in: staging) }
            }
        }
        try dropEntity(change.old)
        try forgetStatements()
        try run("ALTER TABLE \(PostgresSQL.table(staging, schema: s)) RENAME TO "
            + PostgresSQL.quote(change.new.name))
        for index in change.new.indexes {
            try run(PostgresSQL.createIndex(index, of: change.new, schema: s))
        }
    }

    /// The tables changed: statements prepared before would be planned against the old ones
    /// (and fail when a column's type changed).
    private func forgetStatements() throws {
        forgetKeyBounds()
        do {
            try session.connection.forgetStatements()
        } catch {
            throw PostgresSession.storeError(error, sql: "DEALLOCATE ALL", location: session.location)
        }
    }

    func writeSchema(_ schema: Schema) throws {
        try forgetStatements()
        try StoreHeader.write(schema, format: PostgresEngine.formatVersion) { try setMetadata($1, forKey: $0) }
    }
}
#endif

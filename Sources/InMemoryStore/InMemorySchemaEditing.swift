@_spi(Backend) import DataStoreAPI

/// Schema upgrades on the in-memory backend: tables are keyed by entity name and hold
/// complete records, so a change rewrites the entity's records into a new table (its unique
/// maps rebuilt as they go), and a rename moves the table.
extension InMemoryTransaction: SchemaEditingWriter {
    func createEntity(_ entity: EntitySchema) throws {
        state.tables[entity.name] = MemoryTable()
    }

    func dropEntity(_ entity: EntitySchema) throws {
        state.tables[entity.name] = nil
    }

    func renameEntity(_ entity: EntitySchema, to renamed: EntitySchema) throws {
        state.tables[renamed.name] = state.tables.removeValue(forKey: entity.name)
    }

    func changeEntity(_ change: EntityChange) throws {
        let old = state.tables.removeValue(forKey: change.old.name) ?? MemoryTable()
        state.tables[change.new.name] = MemoryTable()
        let keyType = change.old.primaryKeyAttribute.type
        for key in old.sortedKeys() {
            guard let record = old.rows[key], let new = try change.newRecord(from: record) else { continue }
            try put(new, key: PrimaryKey(bytes: key, type: keyType), in: change.new)
        }
    }

    func writeSchema(_ schema: Schema) throws {
        try StoreHeader.write(schema, format: InMemoryEngine.formatVersion) { state.metadata[Array($0.utf8)] = $1 }
    }
}

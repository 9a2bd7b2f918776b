internal import CLMDB
@_spi(Backend) import DataStoreAPI

/// The named databases of a store: `_ds_meta`, `e.<Entity>` per entity and
/// `i.<Entity>.<index>` per index. Handles stay valid for the environment's life.
struct LMDBDatabases: Sendable {
    let meta: MDB_dbi
    /// By entity name, and by entity and index name (``NameIndex``: a write finds its entity's
    /// and indexes' databases without hashing their names).
    var entities: NameIndex<MDB_dbi>
    var indexes: NameIndex<NameIndex<MDB_dbi>>

    /// The same databases with no index: queries scan the entities instead.
    var withoutIndexes: LMDBDatabases { LMDBDatabases(meta: meta, entities: entities, indexes: [:]) }

    static func entityName(_ entity: String) -> String { "e.\(entity)" }
    static func indexName(_ entity: String, _ index: String) -> String { "i.\(entity).\(index)" }

    /// Opens (or with `create`, creates) every database of `schema` inside `txn`.
    static func open(_ schema: Schema, _ environment: LMDBEnvironment, _ txn: LMDBRawTransaction, meta: MDB_dbi,
                     create: Bool) throws -> LMDBDatabases {
        var entities: NameIndex<MDB_dbi> = [:]
        var indexes: NameIndex<NameIndex<MDB_dbi>> = [:]
        func open(_ name: String) throws -> MDB_dbi {
            guard let dbi = try txn.openDatabase(name, create: create) else {
                throw StoreError(.corrupt, "\(environment.path): database \(name) of the schema is missing")
            }
            return dbi
        }
        for entity in schema.entities {
            entities[entity.name] = try open(entityName(entity.name))
            for index in entity.indexes {
                indexes[entity.name, default: [:]][index.name] = try open(indexName(entity.name, index.name))
            }
        }
        return LMDBDatabases(meta: meta, entities: entities, indexes: indexes)
    }
}

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
    /// The checking walk of each entity's records, built once for the schema the databases were
    /// opened for and shared by every transaction (``LMDBTransaction/fieldCheck(_:)``; one whose
    /// entity's attributes changed since, in a schema upgrade, builds its own). Built in each
    /// transaction, and kept in an index this module does not specialize (the runtime looked up
    /// its array's and optional's metadata at each insertion), it made a read transaction of one
    /// get 11,399 instructions against 8,427 (callgrind of `profile-store lmdb get-each 20000`).
    var fieldChecks: NameIndex<LMDBFieldCheck> = [:]

    /// The same databases with no index: queries scan the entities instead.
    var withoutIndexes: LMDBDatabases {
        LMDBDatabases(meta: meta, entities: entities, indexes: [:], fieldChecks: fieldChecks)
    }

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
        var fieldChecks: NameIndex<LMDBFieldCheck> = [:]
        for entity in schema.entities {
            fieldChecks[entity.name] = LMDBFieldCheck(entity.attributes)
            entities[entity.name] = try open(entityName(entity.name))
            for index in entity.indexes {
                indexes[entity.name, default: [:]][index.name] = try open(indexName(entity.name, index.name))
            }
        }
        return LMDBDatabases(meta: meta, entities: entities, indexes: indexes, fieldChecks: fieldChecks)
    }
}

@_spi(Backend) import DataStoreAPI

/// An in-memory store: the reference backend. Copy-on-write snapshots give every read its own
/// consistent view.
public final class InMemoryStore: Store, @unchecked Sendable {
    /// Opens a new, empty in-memory store.
    public convenience init(schema: Schema, key: StoreKey? = nil, instrumentation: Instrumentation = .none) throws {
        try self.init(database: InMemoryDatabase(), schema: schema, key: key, instrumentation: instrumentation)
    }

    /// Opens a store on an existing in-memory database (with `schema: nil`, the one it holds).
    /// - Parameter upgrades: the steps that bring a database holding an older schema version
    ///   to `schema` (see ``SchemaUpgrades``).
    /// - Parameter instrumentation: where the store logs and counts what it does (nothing by
    ///   default).
    /// - Parameter key: the key of an encrypted database (see ``StoreKey``): its items are kept
    ///   sealed, as an encrypted store's files keep them.
    public init(database: InMemoryDatabase, schema: Schema?, upgrades: SchemaUpgrades = SchemaUpgrades(),
                key: StoreKey? = nil, instrumentation: Instrumentation = .none) throws {
        let (engine, _) = try SealedEngine.open(key: key, requested: schema, upgrades: upgrades,
                                                location: "in-memory database") {
            try InMemoryEngine(database: database, schema: $0)
        }
        try super.init(engine: engine, instrumentation: instrumentation)
        logOpened("in-memory database")
    }
}

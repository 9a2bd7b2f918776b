@_spi(Backend) import DataStoreAPI

/// The in-memory backend. Reads take a copy-on-write snapshot of the committed state; a write
/// works on its own copy and publishes it on commit.
@_spi(Backend) public final class InMemoryEngine: StorageEngine, CommitCounting {
    let database: InMemoryDatabase
    public let schema: Schema

    /// Opens the database, creating its schema when it has none.
    /// - Throws: `schemaMismatch` when it holds another schema; `notAStore` when it holds none and
    ///   `schema` is `nil`.
    public init(database: InMemoryDatabase, schema requested: Schema?) throws {
        self.database = database
        let metadata = database.state.withLock { $0.metadata }
        let location = "in-memory database"
        let stored = try StoreHeader.read(location: location, supportedFormat: Self.formatVersion) {
            metadata[Array($0.utf8)]
        }
        let (schema, isNew) = try Schema.resolve(stored: stored?.schema, requested: requested, location: location)
        self.schema = schema
        if isNew {
            var header: [([UInt8], [UInt8])] = []
            try StoreHeader.write(schema, format: Self.formatVersion) { header.append((Array($0.utf8), $1)) }
            database.state.withLock { state in
                for (key, value) in header { state.metadata[key] = value }
            }
        }
    }

    /// The format of the in-memory header (the tables themselves are never stored).
    static let formatVersion = 1

    public func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        let snapshot = database.state.withLock { $0 }
        return try body(InMemoryTransaction(state: snapshot))
    }

    public func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        let transaction = InMemoryTransaction(state: database.state.withLock { $0 })
        let result = try body(transaction)
        var committed = transaction.state.settled()
        committed.commits &+= 1
        database.state.withLock { [committed] in $0 = committed }
        return result
    }

    public func commitCounter() throws -> UInt64 {
        database.state.withLock { $0.commits }
    }

    public func close() throws {}
}

/// An in-memory store: the reference backend. Copy-on-write snapshots give every read its own
/// consistent view.
public final class InMemoryStore: Store, @unchecked Sendable {
    /// Opens a new, empty in-memory store.
    public convenience init(schema: Schema, instrumentation: Instrumentation = .none) throws {
        try self.init(database: InMemoryDatabase(), schema: schema, instrumentation: instrumentation)
    }

    /// Opens a store on an existing in-memory database (with `schema: nil`, the one it holds).
    /// - Parameter migrations: the steps that bring a database holding an older schema version
    ///   to `schema` (see ``SchemaMigrations``).
    /// - Parameter instrumentation: where the store logs and counts what it does (nothing by
    ///   default).
    public init(database: InMemoryDatabase, schema: Schema?, migrations: SchemaMigrations = SchemaMigrations(),
                instrumentation: Instrumentation = .none) throws {
        let engine = try SchemaMigrator.open(requested: schema, migrations: migrations,
                                             location: "in-memory database") {
            try InMemoryEngine(database: database, schema: $0)
        }
        try super.init(engine: engine, instrumentation: instrumentation)
        logOpened("in-memory database")
    }
}

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
        let stored = try StoreHeader.read(location: location, supportedFormat: Self.formatVersion,
                                          sealedSince: Self.formatVersion) {
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

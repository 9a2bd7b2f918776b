import DataStoreAPI

/// A `DataStore` of the app's own that is not one of the package's stores: it forwards to
/// another store, as a wrapper that adds logging or caching would.
public final class ForwardingStore: DataStore {
    public let inner: any DataStore
    public init(_ inner: any DataStore) { self.inner = inner }
    public var schema: Schema { inner.schema }
    public var isClosed: Bool { inner.isClosed }
    public func read<T>(_ body: (ReadAccessor) throws -> T) throws -> T { try inner.read(body) }
    public func writeSync<T>(_ body: (WriteAccessor) throws -> T) throws -> T { try inner.writeSync(body) }
    public func writeAsync<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T,
                                        completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        inner.writeAsync(body, completion: completion)
    }
    public func waitForPendingWrites() throws { try inner.waitForPendingWrites() }
    public func close() throws { try inner.close() }
}

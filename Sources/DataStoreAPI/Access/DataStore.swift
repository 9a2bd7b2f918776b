/// A transactional store of typed items: the one protocol every backend implements.
///
/// Stores are `Sendable` and safe to use from any thread or task. Accessors are not, and
/// never escape their block.
public protocol DataStore: AnyObject, Sendable {
    /// The schema the store holds.
    var schema: Schema { get }

    /// Whether ``close()`` has finished.
    var isClosed: Bool { get }

    /// Runs `body` against one consistent snapshot for its whole duration. Reads run
    /// concurrently with other reads and with a write.
    /// - Throws: `closed`, or what `body` throws.
    func read<T>(_ body: (ReadAccessor) throws -> T) throws -> T

    /// Runs `body` in a write transaction, serialized with every other write. Commits when
    /// `body` returns, once the commit is durable at the store's durability setting; rolls
    /// back entirely when it throws. The accessor sees its own uncommitted writes.
    ///
    /// On PostgreSQL blocks of different threads run at once, each on a connection of the
    /// store's writer pool, and the server serializes them (`SERIALIZABLE`); `body` may run more than once: a transaction the server rolls back for a
    /// conflict with another connection's (serialization failure or deadlock) runs again, up to
    /// the location's `write_retries` (see Concurrency); keep effects outside the store out of it.
    /// - Throws: `reentrantCall` when called inside a block of the same store, `closed`,
    ///   `conflict` when its transaction conflicted more times than the retries allow, or
    ///   what `body` throws.
    @discardableResult
    func writeSync<T>(_ body: (WriteAccessor) throws -> T) throws -> T

    /// Enqueues `body` on the store's background writer. Blocks run in FIFO order, each in its
    /// own transaction; `completion` gets the result once it committed or rolled back. As with
    /// ``writeSync(_:)``, a PostgreSQL block may run more than once: there, a block may also
    /// begin before the `COMMIT` of the one before it is answered, and runs again after it when
    /// that `COMMIT` failed (not with `write_retries=0`).
    func writeAsync<T: Sendable>(
        _ body: @escaping @Sendable (WriteAccessor) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    )

    /// Runs `body` against one consistent snapshot, as ``read(_:)`` does, on a thread the
    /// store owns, and suspends until it returns: an async caller (a server's request handler)
    /// never blocks a thread of Swift's cooperative pool while SQLite, LMDB or PostgreSQL work.
    /// The `async` form of `writeAsync` is its counterpart for writes.
    /// - Throws: `closed`, or what `body` throws.
    func readAsync<T: Sendable>(_ body: @escaping @Sendable (ReadAccessor) throws -> T) async throws -> T

    /// The schema upgrades the store went through, oldest first (each with its steps and
    /// date); empty for a store created at its current version.
    /// - Throws: `closed`, or `corrupt` when the stored history cannot be read.
    func schemaHistory() throws -> [SchemaHistoryEntry]

    /// Waits until every write enqueued so far has finished.
    /// - Throws: `reentrantCall` when called inside a block of the same store.
    func waitForPendingWrites() throws

    /// Finishes every pending write, waits for running blocks, and closes the store. Later
    /// operations throw `closed`. Closing twice does nothing.
    func close() throws
}

extension DataStore {
    /// The history as the store's metadata holds it, read in one snapshot.
    public func schemaHistory() throws -> [SchemaHistoryEntry] {
        guard let bytes = try read({ try $0.metadata(forKey: SchemaUpgrader.historyKey) }) else { return [] }
        return try SchemaUpgrader.decodeHistory(bytes)
    }

    /// Enqueues `body` on the background writer and awaits its result. On a `PostgresStore`,
    /// awaited blocks of different tasks run at once, each on a writer connection of the store's
    /// pool, after the blocks enqueued before them without awaiting (through a `SwitchingStore`
    /// they run one after another, as its other writes do).
    public func writeAsync<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T) async throws -> T {
        if let store = self as? Store { return try await store.awaitedWrite(body) }
        return try await withCheckedThrowingContinuation { continuation in
            writeAsync(body) { continuation.resume(with: $0) }
        }
    }

    /// Enqueues `body` on the background writer and returns at once, without its result: a
    /// block that throws is rolled back and its error goes nowhere. Use the `async` form of
    /// `writeAsync` (`try await store.writeAsync { … }`) to learn of errors, or
    /// ``writeAsync(_:completion:)`` to be called back.
    ///
    /// It has a name of its own so that `try await store.writeAsync { … }` means the awaited
    /// form wherever it is written: at the top level of `main.swift` an overload that took the
    /// same closure resolved to the fire-and-forget form and swallowed the error.
    public func enqueueWrite(_ body: @escaping @Sendable (WriteAccessor) throws -> Void) {
        writeAsync(body) { (_: Result<Void, any Error>) in }
    }
}

extension DataStore {
    /// How often observers and feed readers look for commits of other processes while they
    /// wait, when they poll (see ``Store/changePollInterval``). A store of the app's own that
    /// is not a ``Store`` is looked at every 50 ms, whatever this says.
    public var changePollInterval: Duration {
        get { Store.serving(self)?.changePollInterval ?? CommitWaiter.pollingInterval }
        set { Store.serving(self)?.changePollInterval = newValue }
    }

    /// Whether observers learn of other processes' commits from notifications rather than by
    /// polling (see ``Store/usesCommitNotifications``); always false for a store of the app's
    /// own that is not a ``Store``.
    public var usesCommitNotifications: Bool {
        get { Store.serving(self)?.usesCommitNotifications ?? false }
        set { Store.serving(self)?.usesCommitNotifications = newValue }
    }
}

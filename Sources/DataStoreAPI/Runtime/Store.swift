import Foundation
import Synchronization

/// A ``DataStore`` over a `StorageEngine` (the backend SPI): the one implementation of the protocol's
/// semantics (lifecycle, serialized writes, the FIFO background writer, reentrancy checks,
/// validation, accessor expiry, the unfinished-migration gate) that every backend shares.
///
/// Each backend's public store type (`SQLiteStore`, `LMDBStore`, `InMemoryStore`) subclasses it
/// and adds only its initializers, passing its engine to `init(engine:)`, so that an app
/// names stores, never engines. Subclasses cannot change the semantics: every member is final.
///
/// `@unchecked Sendable` because a non-final class cannot be checked, but every stored property
/// is `Sendable` or thread-safe: the engine is `Sendable`, the lock and queue are thread-safe,
/// `StoreLifecycle` guards its state with a condition variable, the feed's cached state is
/// read and written only by writes holding `writeLock`, and subclasses add no state
/// that is not `Sendable` (the built-in ones keep only a typed reference to their engine).
open class Store: DataStore, @unchecked Sendable {
    /// The backend's engine.
    @_spi(Backend) public let engine: any StorageEngine
    let catalog: Catalog
    let lifecycle = StoreLifecycle()
    let writeLock = NSLock()
    /// Whether the engine runs write transactions at once (``StorageEngine/concurrentWriters``):
    /// then `writeSync` blocks of different threads, and awaited `writeAsync` blocks, run
    /// concurrently, without `writeLock`.
    let writesConcurrently: Bool
    /// The FIFO writer: `writeAsync` blocks given without awaiting run on it one after another;
    /// with concurrent writers, awaited ones pass through it to ``concurrentWriterThreads``.
    let writerThread: StoreThreads
    /// Threads for awaited `writeAsync` blocks of an engine with concurrent writers, made at
    /// first use, and the blocks handed to them that have not finished.
    private let concurrentWriterThreads = Mutex<StoreThreads?>(nil)
    private let awaitedWrites = PendingWrites()
    /// The threads ``readAsync(_:)`` runs reads on.
    private let readerThreads = Mutex<StoreThreads?>(nil)
    /// Whether write transactions go to the change feed (not in child stores, whose changes
    /// reach the parent's feed when merged).
    let recordsChanges: Bool
    /// Whether write transactions keep the relationship invariant (delete rules, and references
    /// checked at commit): not in a store the migration engine fills, which copies items as
    /// they are and checks the references once the destination is complete.
    var keepsReferences: Bool { referencesKept.load(ordering: .relaxed) }
    private let referencesKept: Atomic<Bool>
    private let hubStorage = Mutex<ChangeHub?>(nil)
    /// Where the store reports what it does; `nil` when nothing is configured.
    let instruments: StoreInstruments?

    /// Makes a store over an open engine; what a backend's store type calls.
    ///
    /// - Throws: `incompleteMigration` when the store is the destination of a migration that has
    ///   not finished (the migration engine itself opens such stores); the engine is closed
    ///   again in that case.
    @_spi(Backend) public init(engine: any StorageEngine, instrumentation: Instrumentation = .none) throws {
        self.engine = engine
        catalog = Catalog(engine.schema)
        writerThread = StoreThreads(label: "DataStore.writer")
        writesConcurrently = engine.concurrentWriters > 1
        recordsChanges = true
        referencesKept = Atomic(!MigrationGate.defersReferenceChecks)
        instruments = StoreInstruments(instrumentation, backend: Self.backendName(engine))
        try Self.gate(engine)
        if let instruments, instruments.logs { engine.attach(instruments.logger) }
    }

    /// `sqlite` for `SQLiteEngine`, and so on: the `backend` dimension of the metrics.
    private static func backendName(_ engine: any StorageEngine) -> String {
        if let sealed = engine as? SealedEngine { return backendName(sealed.inner) }
        let name = String(describing: type(of: engine))
        return (name.hasSuffix("Engine") ? String(name.dropLast(6)) : name).lowercased()
    }

    /// Logs that the store at `location` opened (what a backend's store type calls at the end
    /// of its initializer).
    @_spi(Backend) public final func logOpened(_ location: String) {
        guard let instruments, instruments.logs else { return }
        instruments.logger.info("store opened", metadata: [
            "location": "\(location)", "schemaVersion": "\(schema.version)", "entities": "\(schema.entities.count)",
        ])
    }

    /// A store over `engine`, gated (as ``init(engine:)``) or not (child stores).
    init(engine: any StorageEngine, gated: Bool) throws {
        instruments = nil
        self.engine = engine
        catalog = Catalog(engine.schema)
        writerThread = StoreThreads(label: "DataStore.writer")
        writesConcurrently = engine.concurrentWriters > 1
        recordsChanges = gated
        referencesKept = Atomic(!MigrationGate.defersReferenceChecks)
        if gated { try Self.gate(engine) }
    }

    /// Turns the relationship invariant on or off for the writes that start from now on: off
    /// while the migration engine fills the store (as for a store opened to be filled), on once
    /// it serves an app again.
    package func keepReferences(_ keep: Bool) { referencesKept.store(keep, ordering: .relaxed) }

    /// Checks references at every commit from now on, and gives the engine the constraints of
    /// its own that it went without while the migration engine filled it (PostgreSQL's foreign
    /// keys), in a write transaction: what a store a switch moved an app to needs once it serves.
    package func enforceReferences() throws {
        keepReferences(true)
        guard let engine = engine as? any ReferenceConstraining else { return }
        try writeSync { _ in try engine.addMissingReferenceConstraints() }
    }

    /// Wakes this store's feed readers and observers so that they look again (a store that
    /// serves through another, as a switching store does, moved to another backend).
    package func wakeObservers() { changeHub.signal() }

    /// Whether the calling thread runs inside a block of `store` (a nested write would throw
    /// `reentrantCall`).
    package static func hasOpenBlock(of store: any DataStore) -> Bool {
        ActiveBlocks.transaction(of: ObjectIdentifier(store)) != nil
    }

    /// Refuses an unfinished migration destination, or a store a switching store moved away
    /// from, unless the migration engine opens it.
    private static func gate(_ engine: any StorageEngine) throws {
        if !MigrationGate.opensUnfinished {
            if !MigrationGate.opensSwitchedAway,
                let moved = try engine.withReader({ try $0.metadata(forKey: MetadataKeys.switchedAway) })
            {
                try? engine.close()
                let destination = String(decoding: moved, as: UTF8.self)
                throw StoreError(.incompleteMigration, "store was switched to \(destination) by a SwitchingStore and "
                    + "is kept only for a rollback; open the SwitchingStore, or \(destination)")
            }
            let marker = try engine.withReader { try $0.metadata(forKey: MetadataKeys.incompleteMigration) }
            if let marker {
                try? engine.close()
                let source = String(decoding: marker, as: UTF8.self)
                throw StoreError(.incompleteMigration, "store is the destination of an unfinished migration "
                    + "from \(source); finish it with: "
                    + ShellCommand.resume(from: source, to: "DESTINATION"))
            }
        }
    }

    public final var schema: Schema { catalog.schema }

    public final var isClosed: Bool { lifecycle.isClosed }

    /// The schema upgrades the store went through, oldest first.
    public final func schemaHistory() throws -> [SchemaHistoryEntry] {
        try read { _ in }
        return try engine.withReader { try SchemaUpgrader.readHistory($0) }
    }

    private var identity: ObjectIdentifier { ObjectIdentifier(self) }

    private func checkNotReentrant(_ operation: String) throws(StoreError) {
        if ActiveBlocks.transaction(of: identity) != nil {
            throw StoreError(.reentrantCall, "\(operation) called inside a block of the same store; it would "
                + "deadlock")
        }
    }

    /// Runs `body` with `reader` recorded as this store's open transaction on this thread.
    private func inside<T>(_ reader: any StorageReader, _ body: () throws -> T) rethrows -> T {
        let open = OpenTransaction(reader, of: identity, enclosing: ActiveBlocks.innermost)
        defer { open.close() }
        return try ActiveBlocks.with(open, body)
    }

    /// A read inside a block of the same store, on the same thread, joins that block's
    /// transaction: it sees the same snapshot (and, inside a write, the write's own changes),
    /// and needs no second connection or reader slot, so reads nest to any depth and never wait
    /// for themselves.
    public final func read<T>(_ body: (ReadAccessor) throws -> T) throws -> T {
        try lifecycle.begin()
        defer { lifecycle.end() }
        if let open = ActiveBlocks.transaction(of: identity), let reader = open.readerOnThisThread {
            let accessor = ReadAccessor(reader: reader, catalog: catalog)
            defer { accessor.expire() }
            return try body(accessor)
        }
        let started = instruments == nil ? 0 : StoreInstruments.now()
        defer { if let instruments { instruments.read(since: started) } }
        return try engine.withReader { reader in
            try inside(reader) {
                let accessor = ReadAccessor(reader: reader, catalog: catalog)
                defer { accessor.expire() }
                return try body(accessor)
            }
        }
    }

    @discardableResult
    public final func writeSync<T>(_ body: (WriteAccessor) throws -> T) throws -> T {
        try checkNotReentrant("writeSync")
        return try performWrite(allowWhileClosing: false, body)
    }

    private func performWrite<T>(allowWhileClosing: Bool, _ body: (WriteAccessor) throws -> T) throws -> T {
        try performWrite(allowWhileClosing: allowWhileClosing, after: nil, leavingCommitInFlight: false, body).0
    }

    /// Runs a write block in its transaction, again after a conflict; after `previous` and with
    /// `leavingCommitInFlight` as ``StorageEngine/withWriter(after:leavingCommitInFlight:_:)``
    /// (only the first run follows `previous`: the engine reads its outcome in that run).
    /// `runsBefore`: how many times the block ran already (its last run's commit conflicted).
    /// `afterFirstRun` is called when the first run returned or threw, before any other.
    private func performWrite<T>(allowWhileClosing: Bool, after previous: (any CommitInFlight)?,
                                 leavingCommitInFlight: Bool, runsBefore: Int = 0, afterFirstRun: () -> Void = {},
                                 _ body: (WriteAccessor) throws -> T)
        throws -> (T, (any CommitInFlight)?)
    {
        try lifecycle.begin(allowWhileClosing: allowWhileClosing)
        defer { lifecycle.end() }
        // An engine with concurrent writers orders its transactions itself (the server does);
        // `close` waits for the writes in flight through the lifecycle.
        if !writesConcurrently { writeLock.lock() }
        defer { if !writesConcurrently { writeLock.unlock() } }
        // A transaction the server rolled back for a conflict with concurrent ones (another
        // connection's, on PostgreSQL) runs again, a bounded number of times, after a random
        // wait that doubles each time ("full jitter"): nothing of it was stored.
        var attempt = runsBefore
        while true {
            do {
                defer { if attempt == runsBefore { afterFirstRun() } }
                // The commit in flight comes out beside the block's value, not in a tuple with it:
                // a tuple of a generic value handed to a generic function has its type's metadata
                // looked up at run time, twice a write.
                var inFlight: (any CommitInFlight)?
                let value = try WriteRun.with(firstOfRetried: attempt == 0 && engine.conflictRetries > 0) {
                    try performWriteOnce(body, after: attempt == runsBefore ? previous : nil,
                                         leavingCommitInFlight: leavingCommitInFlight, inFlight: &inFlight)
                }
                return (value, inFlight)
            } catch let error as StoreError where engine.isRetryableConflict(error) {
                guard attempt < engine.conflictRetries else {
                    guard attempt > 0 else { throw error }
                    throw StoreError(.conflict, error.message + "; the block ran \(attempt + 1) times and its transaction "
                        + "conflicted with concurrent ones each time, so nothing of it was stored", cause: error.cause)
                }
                // Up to 1 ms before the second run, 2 ms before the third, … at most 100 ms.
                let ceiling = min(0.1, 0.001 * Double(1 << min(attempt, 7)))
                attempt += 1
                Thread.sleep(forTimeInterval: Double.random(in: 0...ceiling))
            }
        }
    }

    private func performWriteOnce<T>(_ body: (WriteAccessor) throws -> T, after previous: (any CommitInFlight)?,
                                     leavingCommitInFlight: Bool, inFlight left: inout (any CommitInFlight)?) throws -> T {
        let started = instruments == nil ? 0 : StoreInstruments.now()
        var committed = false
        defer { if let instruments { instruments.wrote(since: started, committed: committed) } }
        // (Concurrent writers each read the feed's state in their own transaction.)
        let feedBefore = writesConcurrently ? nil : feedState
        if !writesConcurrently { feedState = nil }
        var feedAfter: FeedStateCache?
        let (result, inFlight) = try engine.withWriter(after: previous, leavingCommitInFlight: leavingCommitInFlight) {
            engineWriter in
            let recorder = try recordsChanges
                ? ChangeRecorder(engineWriter, knownState: feedBefore.flatMap { try Self.state($0, for: engineWriter) })
                : nil
            let recorded: any StorageWriter = recorder ?? engineWriter
            let references = keepsReferences && !catalog.graph.isEmpty
                ? RelationshipWriter(recorded, graph: catalog.graph, catalog: catalog) : nil
            let writer: any StorageWriter = references ?? recorded
            let result = try inside(writer) {
                let accessor = WriteAccessor(writer: writer, catalog: catalog)
                defer { accessor.expire() }
                return try body(accessor)
            }
            try references?.finish()
            if let recorder {
                let changes = recorder.finish()
                if !changes.isEmpty,
                   let state = try ChangeLog.append(engineWriter, changes, state: recorder.knownState),
                   !writesConcurrently, let version = try engineWriter.commitVersion(afterWrites: true) {
                    feedAfter = FeedStateCache(version: version, state: state)
                } else if let state = recorder.knownState, !state.settings.isEnabled, !writesConcurrently,
                          let version = try engineWriter.commitVersion(afterWrites: true) {
                    // A feed that is off records nothing and its state does not change: the next
                    // write finds it here too, rather than reading the state and the feed's
                    // bounds again (on SQLite two statements, a quarter of a small write).
                    feedAfter = FeedStateCache(version: version, state: state)
                }
            }
            return result
        }
        // Under the write lock: the next write transaction finds the state this one left, or
        // none (it reads the state itself).
        if !writesConcurrently { feedState = feedAfter }
        committed = true
        // (A commit in flight signals when its answer came: ``runEnqueued(_:_:)``.)
        if inFlight == nil { hubStorage.withLock { $0 }?.signal() }
        left = inFlight
        return result
    }

    /// The change feed's state as the last write transaction left it, and the engine's version
    /// after that transaction; read and written only under `writeLock`.
    private struct FeedStateCache {
        var version: CommitVersion
        var state: ChangeLog.State
    }

    private var feedState: FeedStateCache?

    /// The feed's state from the last write, when nothing was committed since (the engine's
    /// version is the one that write left): one transaction's read of the feed's state and
    /// bounds (two or three lookups) saved per write.
    private static func state(_ cached: FeedStateCache, for writer: any StorageWriter) throws -> ChangeLog.State? {
        try writer.commitVersion(afterWrites: false) == cached.version ? cached.state : nil
    }

    /// The hub that wakes this store's feed readers and observers, made at first use.
    var changeHub: ChangeHub {
        hubStorage.withLock { hub in
            if let hub { return hub }
            let engine = self.engine
            let lifecycle = self.lifecycle
            var subscribe: (@Sendable (@escaping @Sendable () -> Void) -> (any CommitSubscription)?)?
            if let notifying = engine as? any CommitNotifying {
                subscribe = { wake in notifying.subscribeToCommits(wake) }
            }
            let made = ChangeHub(counter: {
                // Close waits for a poll in flight, and no poll starts once it began.
                guard (try? lifecycle.begin()) != nil else { return nil }
                defer { lifecycle.end() }
                if let counting = engine as? any CommitCounting { return try? counting.commitCounter() }
                return try? ChangeLog.head(of: engine).sequence
            }, unreleased: { (engine as? any CommitCounting)?.hasUnreleasedCommits ?? false }, subscribe: subscribe)
            hub = made
            return made
        }
    }

    /// The engine's commit counter now (``CommitCounting``), or the feed's head where the
    /// engine has none; `nil` once the store closes.
    package func commitCounterNow() -> UInt64? { changeHub.currentCounter() }

    /// Where the store's wake-ups stand: pass it to ``waitForCommit(after:timeout:)``, read
    /// before looking at the store, so that no commit between the look and the wait is missed.
    package var commitGeneration: UInt64 { changeHub.generation }

    /// Blocks the calling thread until a commit may have happened since `generation` (this
    /// process's, or another's, by the store's notifications or polling), the store closes, or
    /// `timeout` passes. For callers on threads of their own (a migration's follower).
    @discardableResult
    package func waitForCommit(after generation: UInt64, timeout: Duration) -> Bool {
        changeHub.wait(after: generation, timeout: timeout)
    }

    /// How often observers and feed readers look for commits of other processes while they
    /// wait (5 ms by default); this process's own commits wake them at once.
    public final var changePollInterval: Duration {
        get { changeHub.pollInterval }
        set { changeHub.pollInterval = newValue }
    }

    /// Whether observers learn of other processes' commits from notifications (PostgreSQL's
    /// `NOTIFY`, the kernel's report of a write to a SQLite or LMDB file) rather than by
    /// polling every ``changePollInterval``; on by default. Turn it off for a store on a
    /// network file system that other machines write: the kernel reports only this machine's
    /// writes.
    public final var usesCommitNotifications: Bool {
        get { changeHub.notificationsAllowed }
        set { changeHub.notificationsAllowed = newValue }
    }

    /// Whether other processes' commits reach this store's observers as notifications now.
    package var receivesCommitNotifications: Bool { changeHub.isNotified }

    public final func writeAsync<T: Sendable>(
        _ body: @escaping @Sendable (WriteAccessor) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        do {
            try lifecycle.begin()
        } catch {
            completion(.failure(error))
            return
        }
        guard pipelinesCommits else {
            writerThread.submit {
                let result = Result { try self.performWrite(allowWhileClosing: true, body) }
                self.lifecycle.end()
                completion(result)
            }
            return
        }
        enqueuedWrites.add(1, ordering: .sequentiallyConsistent)
        writerThread.submit {
            self.enqueuedWrites.subtract(1, ordering: .sequentiallyConsistent)
            self.runEnqueued(body, completion)
        }
    }

    /// Whether blocks enqueued without awaiting go one after another on one connection, each
    /// transaction's `COMMIT` sent with the next block's first statements and its answer read
    /// with theirs (``StorageEngine/pipelinesCommits``): one round trip to the server per block
    /// rather than two. Not when the store fails a conflicted block instead of running it again:
    /// a block that follows a commit that failed is rolled back and runs again.
    private var pipelinesCommits: Bool {
        writesConcurrently && engine.pipelinesCommits && engine.conflictRetries > 0
    }

    /// The blocks enqueued on ``writerThread`` that have not begun.
    private let enqueuedWrites = Atomic<Int>(0)

    /// The enqueued block whose `COMMIT` is on its way, with what tells its caller (only
    /// ``writerThread`` reads and writes it).
    private struct EnqueuedCommit {
        let commit: any CommitInFlight
        /// Tells the caller the block committed.
        let committed: () -> Void
        /// Tells the caller it failed with `error`.
        let failed: (any Error) -> Void
        /// Runs the block again, as a write of its own, and tells the caller.
        let runAgain: () -> Void
    }

    private var commitInFlight: EnqueuedCommit?

    /// Runs an enqueued block after the one whose commit is in flight, leaving its own `COMMIT`
    /// unanswered when another enqueued block is waiting. The caller of the one before is told
    /// once this block's first run ended (its `COMMIT`'s answer came with this block's); when that
    /// commit failed, this block was rolled back: the one before runs again (after a conflict)
    /// or fails, and then this one runs again. Callers are told in the order their blocks were
    /// enqueued.
    private func runEnqueued<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T,
                                          _ completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        let previous = commitInFlight
        commitInFlight = nil
        var told = previous == nil
        let leaving = enqueuedWrites.load(ordering: .sequentiallyConsistent) > 0
        let attempt = Result {
            try performWrite(allowWhileClosing: true, after: previous?.commit, leavingCommitInFlight: leaving,
                             afterFirstRun: {
                                 // Told now, unless its block must run again first (this one then
                                 // threw PrecedingCommitFailed, which is not retried).
                                 guard let previous else { return }
                                 if case .failed(_, retryable: true) = previous.commit.outcome() { return }
                                 Self.tell(previous)
                                 told = true
                             }, body)
        }
        if let previous, !told { Self.tell(previous) }
        if case .failure(let failure) = attempt, failure is PrecedingCommitFailed {
            runEnqueued(body, completion)
            return
        }
        switch attempt {
        case .success(let (value, inFlight?)):
            commitInFlight = EnqueuedCommit(
                commit: inFlight,
                committed: {
                    self.hubStorage.withLock { $0 }?.signal()
                    self.lifecycle.end()
                    completion(.success(value))
                },
                failed: { error in
                    self.lifecycle.end()
                    completion(.failure(error))
                },
                runAgain: {
                    // (Its first run's commit conflicted: that run counts.)
                    let result = Result {
                        try self.performWrite(allowWhileClosing: true, after: nil, leavingCommitInFlight: false,
                                              runsBefore: 1, body).0
                    }
                    self.lifecycle.end()
                    completion(result)
                })
        case .success(let (value, nil)):
            lifecycle.end()
            completion(.success(value))
        case .failure(let error):
            lifecycle.end()
            completion(.failure(error))
        }
    }

    /// Tells the caller of a block whose commit was in flight what it came to (its outcome
    /// waited for), running the block again after a conflict.
    private static func tell(_ commit: EnqueuedCommit) {
        switch commit.commit.outcome() {
        case .committed: commit.committed()
        case let .failed(error, retryable): if retryable { commit.runAgain() } else { commit.failed(error) }
        }
    }

    /// On ``writerThread``, before a job that is not an enqueued block (an awaited block handed
    /// on, a wait for the queue): the commit in flight is settled and its caller told, so that
    /// such a job comes after it as it came after its block in the queue.
    private func settleCommitInFlight() {
        guard let previous = commitInFlight else { return }
        commitInFlight = nil
        Self.tell(previous)
    }

    /// Waits until every job given to ``writerThread`` before ran, and every commit they left
    /// in flight is settled.
    private func waitForWriterThread() {
        writerThread.waitForSubmittedJobs { self.settleCommitInFlight() }
    }

    /// Runs `body` as ``writeAsync(_:completion:)`` does and awaits its result; on an engine with
    /// concurrent writers, after the blocks given before it without awaiting have finished, and
    /// beside the other awaited ones (each caller awaits its own, so nothing a caller gave
    /// before it is still pending).
    package final func awaitedWrite<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T) async throws
        -> T
    {
        guard writesConcurrently else {
            return try await withCheckedThrowingContinuation { continuation in
                writeAsync(body) { continuation.resume(with: $0) }
            }
        }
        try lifecycle.begin()
        let threads = concurrentWriterThreads.withLock { threads in
            if let threads { return threads }
            // (One per writer connection; more than 64 would be threads waiting for the server.)
            let made = StoreThreads(label: "DataStore.writers",
                                    count: (try? PositiveInt(min(64, engine.concurrentWriters))) ?? StoreThreads.perCore)
            threads = made
            return made
        }
        let pending = awaitedWrites
        return try await withCheckedThrowingContinuation { continuation in
            let ticket = pending.given()
            writerThread.submit {
                self.settleCommitInFlight()
                threads.submit {
                    let result = Result { try self.performWrite(allowWhileClosing: true, body) }
                    self.lifecycle.end()
                    pending.finished(ticket)
                    continuation.resume(with: result)
                }
            }
        }
    }

    /// On the store's own reader threads, made at first use: one per core, or on PostgreSQL one
    /// per read connection.
    public final func readAsync<T: Sendable>(
        _ body: @escaping @Sendable (ReadAccessor) throws -> T
    ) async throws -> T {
        try await blockingReads.run { try self.read(body) }
    }

    /// The store's reader threads, made at first use.
    var blockingReads: StoreThreads {
        readerThreads.withLock { readers in
            if let readers { return readers }
            let made = StoreThreads(label: "DataStore.reader",
                                    count: engine.concurrentReads, niceness: 5)
            readers = made
            return made
        }
    }

    public final func waitForPendingWrites() throws {
        try checkNotReentrant("waitForPendingWrites")
        let last = awaitedWrites.lastGiven
        waitForWriterThread()
        awaitedWrites.wait(upTo: last)
    }

    public final func close() throws {
        try checkNotReentrant("close")
        guard lifecycle.beginClosing() else { return }
        waitForWriterThread()
        awaitedWrites.wait(upTo: awaitedWrites.lastGiven)
        lifecycle.waitUntilIdle()
        hubStorage.withLock { $0 }?.close()
        writeLock.lock()
        defer { writeLock.unlock() }
        defer { lifecycle.finishClosing() }
        try engine.close()
    }

    /// Runs `body` holding the store's write lock, with no transaction open (used by merge).
    func exclusively<T>(_ body: () throws -> T) throws -> T {
        try checkNotReentrant("merge")
        try lifecycle.begin()
        defer { lifecycle.end() }
        writeLock.lock()
        defer { writeLock.unlock() }
        return try body()
    }
}

/// The stores whose blocks the current thread is inside, with their transactions: to fail
/// reentrant writes fast and to let nested reads join the enclosing transaction.
///
/// A chain from the innermost block out, not a dictionary: a block of one store inside another's
/// is rare and a store's own blocks do not nest on one thread (a nested read joins, a nested
/// write is refused), so a lookup walks one or two links, and a block adds a link; the innermost
/// link of a store is the one a lookup finds. A dictionary copied, added to
/// and hashed at every block cost about 1,500 instructions a transaction (callgrind,
/// `profile-store sqlite small`).
///
/// The innermost link is the thread's (a ``ThreadSlot``), not the task's: a block is
/// synchronous, so everything it runs inside it (a nested read, a nested write refused) runs on
/// its thread. A task-local value cost about 780 instructions more a one-insert transaction (two
/// allocations to push it on a thread without a task; callgrind, `profile-store sqlite small`),
/// and a task the block started inherited it: such a task's write, even one made long after the
/// block ended, was refused as reentrant.
enum ActiveBlocks {
    private static let slot = ThreadSlot()

    /// The innermost block's transaction on this thread.
    static var innermost: OpenTransaction? {
        slot.value.map { Unmanaged<OpenTransaction>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Runs `body` with `open` as the thread's innermost block (`open` links to the one before).
    static func with<T>(_ open: OpenTransaction, _ body: () throws -> T) rethrows -> T {
        try withExtendedLifetime(open) { try slot.with(Unmanaged.passUnretained(open).toOpaque(), body) }
    }

    /// The open transaction of the store whose identity is `store`, if the current thread is
    /// inside one of its blocks.
    static func transaction(of store: ObjectIdentifier) -> OpenTransaction? {
        var link = innermost
        while let open = link {
            if open.store == store { return open }
            link = open.enclosing
        }
        return nil
    }
}

/// The transaction of a running block, which a nested read on the same thread may join.
///
/// Only the thread that opened it reaches it (``ActiveBlocks``); ``readerOnThisThread`` checks that
/// again, and hands `reader` out only while its block runs.
final class OpenTransaction {
    private let reader: any StorageReader
    private let thread = pthread_self()
    private var isOpen = true
    /// The store whose block this is.
    let store: ObjectIdentifier
    /// The block this one runs inside: another store's.
    let enclosing: OpenTransaction?

    init(_ reader: any StorageReader, of store: ObjectIdentifier, enclosing: OpenTransaction?) {
        self.reader = reader
        self.store = store
        self.enclosing = enclosing
    }

    var readerOnThisThread: (any StorageReader)? {
        pthread_equal(thread, pthread_self()) != 0 && isOpen ? reader : nil
    }

    func close() { isOpen = false }
}

/// Whether stores opened in the current task may be unfinished migration destinations: set
/// only by the migration engine, around its own opens.
package enum MigrationGate {
    @TaskLocal package static var opensUnfinished = false
    /// Set while a store is opened to be read (a source, `inspect`, `verify`): a store that a
    /// switching store moved away from opens too.
    @TaskLocal package static var opensSwitchedAway = false
    /// Set while the migration engine opens a store it fills: the store's writes skip the
    /// relationship rules and checks (items are copied as they are, entity by entity, and the
    /// references are checked when the copy is complete), and SQLite leaves its foreign keys off.
    @TaskLocal package static var defersReferenceChecks = false
}

/// Metadata keys the package itself uses; apps cannot write keys with the reserved prefix.
package enum MetadataKeys {
    /// The prefix of every key the package reserves.
    package static let reservedPrefix = "datastore."
    /// Present while a migration into the store has not finished; its value names the source.
    package static let incompleteMigration = "datastore.migration.incomplete"
    /// Present in a store a switching store moved away from; its value names where to.
    package static let switchedAway = "datastore.switch.away"
}

/// The awaited writes handed to a store's concurrent writer threads that have not finished, by
/// the order they were given in: a wait for those given before it never waits for later ones.
///
/// `@unchecked Sendable`: every field is read and written with `condition` locked.
final class PendingWrites: @unchecked Sendable {
    private let condition = NSCondition()
    private var next: UInt64 = 0
    private var unfinished: Set<UInt64> = []

    func given() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        next += 1
        unfinished.insert(next)
        return next
    }

    var lastGiven: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return next
    }

    func finished(_ ticket: UInt64) {
        condition.lock()
        unfinished.remove(ticket)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every write given up to `ticket` has finished.
    func wait(upTo ticket: UInt64) {
        condition.lock()
        while unfinished.contains(where: { $0 <= ticket }) { condition.wait() }
        condition.unlock()
    }
}

/// Open / closing / closed, and the number of operations running.
///
/// `@unchecked Sendable`: every field is read and written only with `condition` locked.
final class StoreLifecycle: @unchecked Sendable {
    private enum Phase { case open, closing, closed }

    private let condition = NSCondition()
    private var phase = Phase.open
    private var active = 0

    var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return phase == .closed
    }

    func begin(allowWhileClosing: Bool = false) throws(StoreError) {
        condition.lock()
        defer { condition.unlock() }
        guard phase == .open || (phase == .closing && allowWhileClosing) else {
            throw StoreError(.closed, "the store is closed")
        }
        active += 1
    }

    func end() {
        condition.lock()
        active -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Returns false when the store is already closing or closed.
    func beginClosing() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard phase == .open else { return false }
        phase = .closing
        return true
    }

    func waitUntilIdle() {
        condition.lock()
        while active > 0 { condition.wait() }
        condition.unlock()
    }

    func finishClosing() {
        condition.lock()
        phase = .closed
        condition.broadcast()
        condition.unlock()
    }
}

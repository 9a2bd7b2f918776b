@_spi(Backend) import DataStoreAPI
import Foundation
import Logging
import Synchronization

/// A store that moves its data to another backend while the app keeps using it.
///
/// The app opens a switching store instead of its current one, naming the store it has (the
/// old one) and the one it moves to (the new one):
///
/// ```swift
/// let store = try SwitchingStore(from: StoreLocation(parsing: "sqlite:app.sqlite"),
///                                to: StoreLocation(parsing: "lmdb:app.lmdb"), schema: schema)
/// ```
///
/// From then on it reads and writes through the switching store as through any ``DataStore``;
/// typed models, child stores, change feeds and live queries work unchanged. In the background
/// the migration engine copies one snapshot of the old store into the new one, batch by batch
/// with a checkpoint in each, then follows the old store's change feed. Once the new store has
/// caught up, the cutover holds writes for a moment, applies the last changes, records the
/// switch in the new store in one transaction and sends every later read and write to the new
/// store. Observations started before the cutover go on delivering from the new store, and
/// the new store's change feed continues the old one's, so change tokens stay valid.
///
/// Every step is recorded in the two stores, so the next launch picks up where a crash left
/// off: before the cutover the old store serves and the copy goes on; after it the new one
/// serves. The old store is kept (and cannot be opened by itself) until ``dropOldStore()``, so
/// that ``rollBack()`` can bring it up to date and make it serve again.
public final class SwitchingStore: StoreForwarding, @unchecked Sendable {
    // @unchecked: every mutable field is read and written with `condition` locked, except the
    // stores, which are set before the background thread starts and replaced only under it.

    /// The store the data moves from.
    public let oldLocation: StoreLocation
    /// The store the data moves to.
    public let newLocation: StoreLocation
    /// How the switch runs.
    public let policy: Policy
    public let schema: Schema

    let condition = NSCondition()
    /// The serving store and the app's writes to it.
    let gate: WriteGate
    var old: (any DataStore)?
    var new: (any DataStore)?
    var record: SwitchRecord
    var state: Progress
    var stopping = false
    var cutoverRequested = false
    var workerDone = true
    var closed = false
    let logger: Logger?

    /// Called at each step of a cutover (`held`, `applied`, `recorded`, `released`, `retired`),
    /// of a cancel (`cancel-recorded`) and of a rollback (`rollback-intent`, `rollback-recorded`),
    /// on the thread doing it: a crash test kills its process there.
    package static let stepHook = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Opens the switch from `old` to `new`, or goes on with the one a previous launch left:
    /// copying or following in the background while the old store serves, or serving from the
    /// new store once the cutover happened.
    ///
    /// - Parameters:
    ///   - schema: the app's schema; a new old store is made with it.
    ///   - onProgress: called from the background work after each step (on its thread).
    /// - Throws: ``StoreError`` when a store cannot be opened, or `invalidArgument` when `new`
    ///   holds a store that is not this switch's destination.
    public init(from old: StoreLocation, to new: StoreLocation, schema: Schema, policy: Policy = Policy(),
                instrumentation: Instrumentation = .none,
                onProgress: (@Sendable (Progress) -> Void)? = nil) throws {
        try Migrator.checkFollow(from: old, to: new)
        try Migrator.requireTransactions(old, toDo: "be switched from")
        oldLocation = old
        newLocation = new
        self.policy = policy
        self.onProgress = onProgress
        logger = instrumentation.logs ? instrumentation.logger : nil
        // The lock first: a launch may start or resume the switch's work, which one process does.
        let lock = try SwitchLock.acquire(old: old, new: new)
        let opened: SwitchOpening
        do {
            opened = try SwitchOpening(old: old, new: new, schema: schema, policy: policy)
        } catch {
            lock.release()
            throw error
        }
        self.old = opened.old
        self.new = opened.new
        self.schema = opened.serving.schema
        gate = WriteGate(serving: opened.serving)
        record = opened.record
        state = Progress(phase: opened.phase)
        comparesFirst = opened.resumed
        logger?.info("switching store opened", metadata: ["from": "\(old)", "to": "\(new)",
                                                          "phase": "\(opened.phase.rawValue)"])
        if [.copying, .following, .rollingBack].contains(opened.phase) {
            switchLock = lock
            startBackground()
        } else {
            lock.release()
        }
    }

    /// Held while the background work runs (``SwitchLock``); guarded by `condition`.
    var switchLock: SwitchLock?

    /// Takes the switch's lock for background work about to start, unless it is held.
    func acquireLock() throws {
        guard condition.withLock({ switchLock == nil }) else { return }
        let lock = try SwitchLock.acquire(old: oldLocation, new: newLocation)
        condition.withLock { switchLock = lock }
    }

    let onProgress: (@Sendable (Progress) -> Void)?
    /// Whether the next follow starts by comparing the stores (after a launch found the switch
    /// under way, or a rollback, since writes made outside the package are not in a feed).
    var comparesFirst: Bool

    // MARK: DataStore

    /// The store serving reads and writes now.
    package var forwardedStore: any DataStore { gate.store }

    public var isClosed: Bool { condition.withLock { closed } }

    public func read<T>(_ body: (ReadAccessor) throws -> T) throws -> T {
        try forwardedStore.read(body)
    }

    public func readAsync<T: Sendable>(_ body: @escaping @Sendable (ReadAccessor) throws -> T) async throws -> T {
        try await forwardedStore.readAsync(body)
    }

    @discardableResult
    public func writeSync<T>(_ body: (WriteAccessor) throws -> T) throws -> T {
        try gate.writeSync(body)
    }

    public func writeAsync<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T,
                                        completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        gate.writeAsync(body, completion: completion)
    }

    public func schemaHistory() throws -> [SchemaHistoryEntry] { try forwardedStore.schemaHistory() }

    public func waitForPendingWrites() throws {
        try gate.storeWhenOpen().waitForPendingWrites()
    }

    /// Stops the background work (a later launch goes on with it), then closes both stores.
    public func close() throws {
        condition.lock()
        if closed {
            condition.unlock()
            return
        }
        closed = true
        condition.unlock()
        stopBackground()
        condition.withLock {
            switchLock?.release()
            switchLock = nil
        }
        let stores = condition.withLock { [gate, old, new] in [gate.store, old, new] }
        var seen = Set<ObjectIdentifier>()
        var failure: (any Error)?
        for case let store? in stores where seen.insert(ObjectIdentifier(store)).inserted {
            do { try store.close() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    // MARK: The switch

    /// What the background work has done.
    public var progress: Progress { condition.withLock { state } }

    /// Where the switch stands.
    public var phase: Phase { progress.phase }

    /// Waits until the switch ends (switched, cancelled or rolled back) or `timeout` passes;
    /// returns whether it ended.
    /// - Throws: `io` naming the failure when the background work stopped on an error.
    @discardableResult
    public func waitUntilSwitched(timeout: Duration = .seconds(3_600)) throws -> Bool {
        let deadline = Date.deadline(after: timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if [.switched, .cancelled, .rolledBack].contains(state.phase) { return true }
            if let failure = state.failure, workerDone { throw StoreError(.io, "the switch stopped: \(failure)") }
            if closed { throw StoreError(.closed, "the switching store was closed before its switch ended") }
            if !condition.wait(until: deadline) { return false }
        }
    }

    /// Makes the cutover happen as soon as the new store has caught up (with
    /// ``Policy/Cutover/manual``), and waits for it, at most `timeout`.
    /// - Throws: what ``waitUntilSwitched(timeout:)`` throws; `invalidArgument` when the switch
    ///   was cancelled or rolled back.
    public func switchNow(timeout: Duration = .seconds(3_600)) throws {
        condition.withLock {
            cutoverRequested = true
            condition.broadcast()
        }
        guard try waitUntilSwitched(timeout: timeout) else {
            throw StoreError(.busy, "the new store did not catch up within \(timeout)")
        }
        let phase = self.phase
        guard phase == .switched else {
            throw StoreError(.invalidArgument, "the switch was \(phase.rawValue.replacingOccurrences(of: "B", with: " b"))")
        }
    }

    /// Cancels the switch before its cutover: the background work stops and the new store is
    /// deleted; the old store goes on serving. A later launch finds the switch cancelled and
    /// does not start it again until ``restart()``.
    /// - Throws: `invalidArgument` once the cutover happened (roll back instead).
    public func cancel() throws {
        stopBackground()
        let (phase, old) = condition.withLock { (state.phase, self.old) }
        guard phase == .copying || phase == .following || phase == .cancelled else {
            throw StoreError(.invalidArgument, "the switch is \(phase.rawValue): only a switch before its cutover "
                + "can be cancelled; roll it back instead")
        }
        guard let old else { throw StoreError(.closed, "the switching store is closed") }
        var ended = condition.withLock { record }
        ended.phase = .cancelled
        ended.serving = true
        // The decision first, durably: a crash from here on ends as cancelled.
        try old.writeSync { try ended.write(into: $0) }
        Self.step("cancel-recorded")
        condition.withLock { record = ended }
        try discardNew()
        update { $0.phase = .cancelled }
        logger?.info("switch cancelled", metadata: ["from": "\(oldLocation)", "to": "\(newLocation)"])
    }

    /// Starts a cancelled or rolled-back switch again, from an empty new store.
    public func restart() throws {
        stopBackground()
        let phase = self.phase
        guard phase == .cancelled || phase == .rolledBack else {
            throw StoreError(.invalidArgument, "the switch is \(phase.rawValue); only a cancelled or rolled-back switch "
                + "starts again")
        }
        try acquireLock()
        try discardNew()
        guard let old = condition.withLock({ self.old }) else { throw StoreError(.closed, "the switching store is closed") }
        let (fresh, store) = try SwitchOpening.start(old: old, oldLocation: oldLocation, newLocation: newLocation,
                                                     policy: policy, epoch: record.epoch)
        condition.withLock {
            record = fresh
            new = store
            state = Progress(phase: .copying)
        }
        startBackground()
    }

    /// Makes the old store serve again after the cutover: it catches up with what was written
    /// to the new store (while the new one serves), then a cutover like the first one switches
    /// back, and the new store is deleted. Waits until it is done.
    /// - Throws: `invalidArgument` before the cutover (cancel instead) or once the old store was
    ///   dropped.
    public func rollBack(timeout: Duration = .seconds(3_600)) throws {
        let (phase, new, old) = condition.withLock { (state.phase, self.new, self.old) }
        guard phase == .switched || phase == .rollingBack else {
            throw StoreError(.invalidArgument, "the switch is \(phase.rawValue): only a switch after its cutover rolls "
                + "back; cancel it instead")
        }
        guard let new, old != nil else {
            throw StoreError(.invalidArgument, "the old store \(oldLocation) was dropped; there is nothing to roll back to")
        }
        if phase == .switched {
            var intent = condition.withLock { record }
            intent.rollingBack = true
            // The decision first, durably: a crash from here on goes on rolling back.
            try new.writeSync { try intent.write(into: $0) }
            Self.step("rollback-intent")
            condition.withLock { record = intent }
            update { $0.phase = .rollingBack }
            try acquireLock()
            startBackground()
        }
        guard try waitUntilSwitched(timeout: timeout) else {
            throw StoreError(.busy, "the old store did not catch up within \(timeout)")
        }
    }

    /// Deletes the old store after the cutover, ending the window in which the switch can roll
    /// back.
    public func dropOldStore() throws {
        let (phase, old) = condition.withLock { (state.phase, self.old) }
        guard phase == .switched else {
            throw StoreError(.invalidArgument, "the switch is \(phase.rawValue): the old store is dropped only after "
                + "the cutover")
        }
        guard let old else { return }
        try old.close()
        condition.withLock { self.old = nil }
        try Migrator.acceptingUnfinished { try oldLocation.destroy() }
        SwitchLock.removeFile(of: oldLocation)
    }
}

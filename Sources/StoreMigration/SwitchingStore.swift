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

    /// Where a switch stands.
    public enum Phase: String, Sendable, Codable, Hashable {
        /// The old store serves; its snapshot is being copied.
        case copying
        /// The old store serves; the new one applies its change feed until the cutover.
        case following
        /// The new store serves.
        case switched
        /// The new store serves; the old one catches up to serve again.
        case rollingBack
        /// The old store serves again; the new one was discarded.
        case rolledBack
        /// The old store serves; the switch was cancelled before its cutover and the new store
        /// discarded.
        case cancelled
    }

    /// How a switch runs.
    public struct Policy: Sendable {
        /// How fast the background copy goes.
        public enum Pace: Sendable, Hashable {
            /// As fast as the two stores allow.
            case unlimited
            /// At most this many items per second.
            case itemsPerSecond(Int)
            /// Only once the app has written nothing for this long (each batch of the copy,
            /// and the cutover, wait for such a moment).
            case whenIdle(Duration)
        }

        /// When the cutover happens.
        public enum Cutover: Sendable, Hashable {
            /// As soon as the new store has caught up.
            case automatic
            /// When the app calls ``SwitchingStore/switchNow(timeout:)``.
            case manual
        }

        /// How fast the background copy goes.
        public var pace: Pace
        /// When the cutover happens.
        public var cutover: Cutover
        /// Items per write transaction of the copy.
        public var batchSize: Int
        /// Whether the old store is kept after the cutover (for ``SwitchingStore/rollBack()``)
        /// until ``SwitchingStore/dropOldStore()``; when false it is deleted at the cutover.
        public var keepsOldStore: Bool
        /// The new store's durability.
        public var durability: Durability
        /// How long the cutover may hold writes, as estimated from the pace at which the new
        /// store takes the old one's transactions: the cutover waits until the transactions
        /// left to apply fit in it. An app that writes faster than the new store can take its
        /// writes keeps the switch following (``Progress/lagTransactions`` shows it).
        public var maximumPause: Duration

        /// A policy; by default the copy runs at full speed, the cutover follows as soon as the
        /// new store has caught up, and the old store is kept.
        public init(pace: Pace = .unlimited, cutover: Cutover = .automatic, batchSize: Int = 1_000,
                    keepsOldStore: Bool = true, durability: Durability = .full,
                    maximumPause: Duration = .milliseconds(100)) {
            self.pace = pace
            self.maximumPause = maximumPause
            self.cutover = cutover
            self.batchSize = batchSize
            self.keepsOldStore = keepsOldStore
            self.durability = durability
        }
    }

    /// What the background work has done, for an app to show.
    public struct Progress: Sendable, Hashable {
        /// Where the switch stands.
        public var phase: Phase
        /// Items of the old store's snapshot copied so far.
        public var itemsCopied = 0
        /// Items in the old store's snapshot.
        public var itemsToCopy = 0
        /// Transactions of the serving store not yet applied to the other one.
        public var lagTransactions: UInt64 = 0
        /// How long writes were held at the last cutover.
        public var lastPause: Duration?
        /// Why the background work stopped, when it failed (the serving store is unaffected;
        /// the next launch tries again).
        public var failure: String?
    }

    /// The store the data moves from.
    public let oldLocation: StoreLocation
    /// The store the data moves to.
    public let newLocation: StoreLocation
    /// How the switch runs.
    public let policy: Policy
    public let schema: Schema

    private let condition = NSCondition()
    private var serving: any DataStore
    private var old: (any DataStore)?
    private var new: (any DataStore)?
    private var record: SwitchRecord
    private var state: Progress
    private var holding = false
    private var activeWrites = 0
    private var heldWrites: [(any DataStore) -> Void] = []
    private var stopping = false
    private var cutoverRequested = false
    private var worker: Thread?
    private var workerDone = true
    private var closed = false
    private var lastAppWrite = ContinuousClock.now
    private let logger: Logger?

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
        serving = opened.serving
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
    private var switchLock: SwitchLock?

    /// Takes the switch's lock for background work about to start, unless it is held.
    private func acquireLock() throws {
        guard condition.withLock({ switchLock == nil }) else { return }
        let lock = try SwitchLock.acquire(old: oldLocation, new: newLocation)
        condition.withLock { switchLock = lock }
    }

    private let onProgress: (@Sendable (Progress) -> Void)?
    /// Whether the next follow starts by comparing the stores (after a launch found the switch
    /// under way, or a rollback, since writes made outside the package are not in a feed).
    private var comparesFirst: Bool

    // MARK: DataStore

    /// The store serving reads and writes now.
    package var forwardedStore: any DataStore { condition.withLock { serving } }

    public var isClosed: Bool { condition.withLock { closed } }

    public func read<T>(_ body: (ReadAccessor) throws -> T) throws -> T {
        try forwardedStore.read(body)
    }

    public func readAsync<T: Sendable>(_ body: @escaping @Sendable (ReadAccessor) throws -> T) async throws -> T {
        try await forwardedStore.readAsync(body)
    }

    @discardableResult
    public func writeSync<T>(_ body: (WriteAccessor) throws -> T) throws -> T {
        let current = forwardedStore
        // A write inside a block of the serving store is refused by that store; waiting for a
        // cutover here would wait for this very block.
        if Store.hasOpenBlock(of: current) { return try current.writeSync(body) }
        let store = enterWrite()
        defer { leaveWrite() }
        return try store.writeSync(body)
    }

    public func writeAsync<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T,
                                        completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        condition.lock()
        lastAppWrite = .now
        if holding {
            // Held until the cutover ends, then sent, in order, to the store that serves.
            heldWrites.append { [self] store in self.submit(body, completion, to: store) }
            condition.unlock()
            return
        }
        activeWrites += 1
        let store = serving
        condition.unlock()
        submit(body, completion, to: store)
    }

    /// Sends an async write to `store`, counted in ``activeWrites`` until it completes.
    private func submit<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T,
                                     _ completion: @escaping @Sendable (Result<T, any Error>) -> Void,
                                     to store: any DataStore) {
        store.writeAsync(body) { [self] result in
            self.leaveWrite()
            completion(result)
        }
    }

    public func schemaHistory() throws -> [SchemaHistoryEntry] { try forwardedStore.schemaHistory() }

    public func waitForPendingWrites() throws {
        condition.lock()
        while holding { condition.wait() }
        let store = serving
        condition.unlock()
        try store.waitForPendingWrites()
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
        let stores = condition.withLock { [serving, old, new] in [serving, old, new] }
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
        let deadline = Date(timeIntervalSinceNow: timeout.seconds)
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

    /// Checks the switch while the old store is kept: brings the old store up to date by the
    /// new store's change feed since the cutover (as a rollback would), then compares the two
    /// item by item against one snapshot of the new store. The report's differences are 0 when
    /// the cutover carried everything over and the feed since then is whole. The old store
    /// keeps not serving; call it before ``dropOldStore()``.
    /// - Throws: `invalidArgument` before the cutover or once the old store was dropped;
    ///   `changesExpired` when the new store's feed no longer reaches back to the cutover.
    public func verifyOldStore() throws -> MigrationReport {
        let (phase, old, new) = condition.withLock { (state.phase, self.old, self.new) }
        guard phase == .switched, let old, let new else {
            throw StoreError(.invalidArgument, phase == .switched ? "the old store \(oldLocation) was dropped"
                : "the switch is \(phase.rawValue): the old store is compared with the new one after the cutover")
        }
        guard var token = try Migrator.followState(of: old).flatMap({
            $0.source == newLocation.description ? $0.token : nil
        }) else {
            throw StoreError(.corrupt, "\(oldLocation) does not record the cutover's position")
        }
        let store = old as? Store
        store?.keepReferences(false)
        defer { store?.keepReferences(true) }
        let follower = Follower(source: new, destination: old, sourceLocation: newLocation,
                                options: FollowOptions(batchSize: max(1, policy.batchSize)), shouldStop: { false })
        let run = MigrationRun(operation: "verify", newLocation, oldLocation, MigrationOptions(batchSize: policy.batchSize),
                               { false }, { _ in })
        try new.read { snapshot in
            while let batch = try follower.nextBatch(after: token, in: snapshot) {
                guard batch.overflowed.isEmpty else {
                    throw StoreError(.changesExpired, "transaction \(batch.overflowedAt) of \(newLocation) changed more "
                        + "items than its feed lists; compare the stores with migrate-store verify")
                }
                _ = try follower.apply(batch)
                token = batch.token
            }
            try run.verify(schema, snapshot, old)
        }
        return run.finish()
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

    /// The switch that `location` takes part in, as its record says (`nil`: none).
    public static func status(of location: StoreLocation) throws -> Status? {
        let store = try Migrator.acceptingUnfinished { try location.openSource() }
        defer { try? store.close() }
        return try status(in: store)
    }

    /// The switch that the open `store` takes part in, as its record says.
    package static func status(in store: any DataStore) throws -> Status? {
        guard let record = try SwitchRecord.read(from: store) else { return nil }
        return Status(old: record.old, new: record.new, phase: record.phase, serving: record.serving,
                      switchedAt: record.switchedAt, rollingBack: record.rollingBack ?? false)
    }

    /// A switch as one of its stores records it (``status(of:)``).
    public struct Status: Sendable, Hashable {
        /// The store the data moves from, and the one it moves to.
        public var old: String
        public var new: String
        /// The phase this store last recorded.
        public var phase: Phase
        /// Whether this store serves (as of its record).
        public var serving: Bool
        /// When the cutover happened.
        public var switchedAt: Date?
        /// Whether a rollback was asked for and has not finished.
        public var rollingBack: Bool
    }

    // MARK: Writes and the cutover gate

    private func enterWrite() -> any DataStore {
        condition.lock()
        defer { condition.unlock() }
        lastAppWrite = .now
        while holding { condition.wait() }
        activeWrites += 1
        return serving
    }

    private func leaveWrite() {
        condition.lock()
        activeWrites -= 1
        if activeWrites == 0 { condition.broadcast() }
        condition.unlock()
    }

    /// Holds new writes and waits until the running ones finished.
    private func hold() {
        condition.lock()
        holding = true
        while activeWrites > 0 { condition.wait() }
        condition.unlock()
    }

    /// Lets writes go on, to `store` from now on (to the same store when `nil`), the held async
    /// writes first, in order.
    private func release(to store: (any DataStore)?) {
        condition.lock()
        if let store { serving = store }
        let held = heldWrites
        heldWrites = []
        activeWrites += held.count
        let target = serving
        for write in held { write(target) }
        holding = false
        condition.broadcast()
        condition.unlock()
    }

    // MARK: Background work

    private func update(_ change: (inout Progress) -> Void) {
        let snapshot = condition.withLock { () -> Progress in
            change(&state)
            condition.broadcast()
            return state
        }
        onProgress?(snapshot)
    }

    private var shouldStop: Bool { condition.withLock { stopping } }

    private func startBackground() {
        condition.lock()
        stopping = false
        workerDone = false
        state.failure = nil
        let thread = Thread { [self] in
            self.runBackground()
            self.condition.withLock {
                self.workerDone = true
                self.worker = nil
                self.switchLock?.release()
                self.switchLock = nil
                self.condition.broadcast()
            }
        }
        thread.name = "DataStore.switch"
        worker = thread
        condition.unlock()
        thread.start()
    }

    private func stopBackground() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while !workerDone { condition.wait() }
        condition.unlock()
    }

    private func runBackground() {
        do {
            switch phase {
            case .copying:
                try copy()
                try followThenCutOver()
            case .following:
                try followThenCutOver()
            case .rollingBack:
                try followBackThenCutOver()
            default:
                break
            }
        } catch is StopRequested {
        } catch is MigrationInterrupted {
        } catch {
            logger?.error("switch stopped", metadata: ["error": "\(error)"])
            update { $0.failure = "\(error)" }
        }
    }

    /// The old store's feed position when the copy began, kept in the new store: the follow
    /// starts there.
    static let copyStartKey = "datastore.switch.copy-start"

    /// Copies the old store into the new one, entity by entity in key order, one page per short
    /// read of the old store and one write transaction of the new one with its checkpoint,
    /// resuming from the checkpoint.
    ///
    /// From an LMDB store each page is read in a read transaction of its own: a read held for
    /// the whole copy would keep the app's writes from reusing pages and from growing the map
    /// (which waits for every transaction of the process to end, so an app's write would wait
    /// for the copy's end). Pages read at different moments are made consistent by the
    /// follow, which starts from the old store's position before the first page and sets every
    /// item it lists to its value in the old store: whatever changed after that position is set
    /// again.
    private func copy() throws {
        guard let old, let new else { return }
        // Where the old store's feed stood before the first page, and each entity's last key
        // then: items added after it are the follow's to copy (an app that keeps adding items
        // faster than the paced copy goes would otherwise keep the copy from ending).
        let start: CopyStart
        if let bytes = try new.read({ try $0.metadata(forKey: Self.copyStartKey) }),
            let known = try? JSONDecoder().decode(CopyStart.self, from: Data(bytes))
        {
            start = known
        } else {
            start = try old.read { reader in
                CopyStart(token: try reader.changeToken(), lastKeys: try schema.entities.map { entity in
                    try reader.fetch(FetchRequest(entity.name, sort: [.descending(entity.primaryKey)], limit: 1))
                        .first?[entity.primaryKey]
                })
            }
            try new.writeSync {
                try $0.setReservedMetadata(Array(try JSONEncoder().encode(start)), forKey: Self.copyStartKey)
            }
        }
        let mark = try Migrator.checkpoint(of: new)
        let counts = try old.read { reader in
            try schema.entities.map { try reader.count(FetchRequest($0.name)) }
        }
        update { $0.itemsToCopy = counts.reduce(0, +) }
        let pacer = Pacer(pace: policy.pace)
        let limit = max(1, policy.batchSize)
        var finished = mark?.finishedEntities ?? []
        // A relaunch goes on from the checkpoint, and so does its progress: what the new store
        // holds is what the copy wrote (the follow has not started).
        var copied = try new.read { reader in
            try schema.entities.reduce(0) { $0 + (try reader.count(FetchRequest($1.name))) }
        }
        update { $0.itemsCopied = copied }
        /// Copies the pages, each read by `reading`.
        func copyPages(reading: ((ReadAccessor) throws -> Void) throws -> Void) throws {
            var page: [Record] = []
            for (position, entity) in schema.entities.enumerated() where !finished.contains(entity.name) {
                var after = mark?.entity == entity.name ? mark?.lastKey : nil
                let bound = start.lastKeys.indices.contains(position) ? start.lastKeys[position] : nil
                while let bound, try after.map({ try KeyEncoding.compareKeys($0, bound) < 0 }) ?? true {
                    pacer.pause(items: copied, lastAppWrite: { condition.withLock { lastAppWrite } }, stop: { shouldStop })
                    if shouldStop { throw StopRequested() }
                    try reading { try $0.scan(entity.name, after: after, limit: limit, into: &page) }
                    while let key = page.last?[entity.primaryKey], try KeyEncoding.compareKeys(key, bound) > 0 {
                        page.removeLast()
                    }
                    guard let last = page.last?[entity.primaryKey] else { break }
                    let checkpoint = Migrator.Checkpoint(entity: entity.name, lastKey: last, finishedEntities: finished,
                                                         copied: true)
                    try new.writeSync { writer in
                        try writer.insert(contentsOf: page, into: entity.name)
                        try writer.setReservedMetadata(Array(try JSONEncoder().encode(checkpoint)),
                                                       forKey: Migrator.checkpointKey)
                    }
                    copied += page.count
                    after = last
                    update { $0.itemsCopied = copied }
                    if page.count < limit { break }
                }
                finished.append(entity.name)
            }
        }
        if oldLocation.kind == .lmdb {
            try copyPages(reading: { try old.read($0) })
        } else {
            // Elsewhere one snapshot serves the whole copy: a long read costs the app's writes
            // nothing on SQLite and PostgreSQL, and an in-memory store sorts its keys once per
            // snapshot that follows a write.
            try old.read { snapshot in try copyPages(reading: { try $0(snapshot) }) }
        }
        var next = condition.withLock { record }
        next.phase = .following
        next.serving = false
        // The follow goes on from the position before the first page.
        try new.writeSync { writer in
            try writer.setReservedMetadata(nil, forKey: Migrator.checkpointKey)
            try writer.setReservedMetadata(nil, forKey: Self.copyStartKey)
            try Migrator.writeFollowState(writer, source: oldLocation, token: start.token)
            try next.write(into: writer)
        }
        update {
            $0.phase = .following
            $0.itemsCopied = $0.itemsToCopy
        }
    }

    /// Applies the old store's feed to the new one until it has caught up, then cuts over.
    private func followThenCutOver() throws {
        guard let old, let new else { return }
        try follow(from: old, oldLocation, to: new) { follower, token in
            try self.cutOver(follower: &follower, token: token, old: old, new: new)
        }
    }

    /// Applies the new store's feed to the old one until it has caught up, then switches back.
    private func followBackThenCutOver() throws {
        guard let old, let new else { return }
        (old as? Store)?.keepReferences(false)
        try follow(from: new, newLocation, to: old) { follower, token in
            try self.cutBack(follower: &follower, token: token, old: old, new: new)
        }
    }

    /// Follows `source` into `destination` until `cutOver` (called whenever the destination has
    /// caught up, and the policy allows) returns true.
    private func follow(from source: any DataStore, _ sourceLocation: StoreLocation, to destination: any DataStore,
                        cutOver: (inout Follower, ChangeToken) throws -> Bool) throws {
        var follower = Follower(source: source, destination: destination, sourceLocation: sourceLocation,
                                options: FollowOptions(batchSize: max(1, policy.batchSize)),
                                shouldStop: { [self] in self.shouldStop })
        var token = try Migrator.followState(of: destination).flatMap {
            $0.source == sourceLocation.description ? $0.token : nil
        }
        // A launch that finds the switch under way compares the stores once: writes made to the
        // source outside the package are not in its feed.
        var report = FollowReport(source: sourceLocation.description, destination: "")
        if condition.withLock({ comparesFirst }) {
            token = try follower.catchUp(&report)
            condition.withLock { comparesFirst = false }
        }
        // Seconds one source transaction takes to apply, as last measured.
        var secondsPerTransaction = 0.0
        while true {
            if shouldStop { throw StopRequested() }
            guard let current = token else { token = try follower.catchUp(&report); continue }
            var applied = false
            do {
                if let batch = try follower.nextBatch(after: current) {
                    guard batch.overflowed.isEmpty else {
                        token = nil
                        continue
                    }
                    let started = ContinuousClock.now
                    _ = try follower.apply(batch)
                    secondsPerTransaction = (ContinuousClock.now - started).seconds / Double(max(1, batch.commits.count))
                    token = batch.token
                    applied = true
                }
            } catch let error as StoreError where error.code == .changesExpired || error.code == .invalidArgument {
                token = nil
                continue
            }
            guard let reached = token else { continue }
            // The cutover applies the rest with writes held: it starts once the rest is expected
            // to take no longer than the policy's pause (with an app that writes without pause,
            // the feed is never found empty).
            let head = try source.currentChangeToken()
            let lag = head.store == reached.store && head.sequence > reached.sequence ? head.sequence - reached.sequence : 0
            update { $0.lagTransactions = lag }
            if Double(lag) * secondsPerTransaction <= policy.maximumPause.seconds, mayCutOver(),
                try cutOver(&follower, reached)
            {
                return
            }
            if !applied { follower.waitForSourceCommit() }
        }
    }

    /// Whether the policy lets the cutover happen now.
    private func mayCutOver() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if policy.cutover == .manual && !cutoverRequested && state.phase != .rollingBack { return false }
        if case .whenIdle(let quiet) = policy.pace, ContinuousClock.now - lastAppWrite < quiet { return false }
        return true
    }

    /// Applies what the follower has not applied yet, with writes held.
    private func applyRest(_ follower: inout Follower, from token: ChangeToken) throws -> ChangeToken {
        var token = token
        while let batch = try follower.nextBatch(after: token) {
            guard batch.overflowed.isEmpty else {
                var report = FollowReport(source: "", destination: "")
                token = try follower.catchUp(&report)
                continue
            }
            _ = try follower.apply(batch)
            token = batch.token
        }
        return token
    }

    private static func step(_ name: String) {
        if let hook = stepHook.withLock({ $0 }) { hook(name) }
    }

    /// The cutover: hold writes, apply the last changes, record the switch in the new store
    /// (the decisive transaction), send writes to the new store, then mark the old one.
    private func cutOver(follower: inout Follower, token: ChangeToken, old: any DataStore, new: any DataStore) throws
        -> Bool
    {
        let (switched, head, pause) = try hand(from: old, to: new, follower: &follower, token: token,
                                               clearing: [MetadataKeys.incompleteMigration, Migrator.followKey],
                                               steps: ("applied", "recorded")) { record in
            record.phase = .switched
            record.switchedAt = Date()
        }
        update {
            $0.lastPause = pause
            $0.lagTransactions = 0
        }
        logger?.info("switch cut over", metadata: ["to": "\(newLocation)", "pause": "\(pause)"])
        Self.step("released")
        // Switched once the old store is retired: what the app may do then (verify it, drop it,
        // roll back) needs the position the retirement records. The new store serves either way;
        // a retirement that failed is done again at the next launch.
        defer { update { $0.phase = .switched } }
        try SwitchOpening.retire(old, record: switched, newLocation: newLocation, token: head)
        Self.step("retired")
        if !policy.keepsOldStore { try dropOldStore() }
        return true
    }

    /// The rollback's cutover: as ``cutOver(follower:token:old:new:)`` the other way, then the
    /// new store is deleted.
    private func cutBack(follower: inout Follower, token: ChangeToken, old: any DataStore, new: any DataStore) throws
        -> Bool
    {
        let (_, _, pause) = try hand(from: new, to: old, follower: &follower, token: token,
                                     clearing: [MetadataKeys.switchedAway, Migrator.followKey],
                                     steps: (nil, "rollback-recorded")) { record in
            record.phase = .rolledBack
            record.rollingBack = nil
        }
        try discardNew()
        update {
            $0.phase = .rolledBack
            $0.lastPause = pause
            $0.lagTransactions = 0
        }
        logger?.info("switch rolled back", metadata: ["to": "\(oldLocation)", "pause": "\(pause)"])
        return true
    }

    /// What both cutovers do: hold writes, apply what `follower` has not applied yet, then in
    /// one transaction of `target` (the decisive one) clear the `clearing` keys, take over
    /// `source`'s change feed and record that `target` serves (with the next epoch, and what
    /// `change` sets); then send every read and write to `target`. Returns the record, the feed
    /// position at the cutover and how long writes were held.
    private func hand(from source: any DataStore, to target: any DataStore, follower: inout Follower,
                      token: ChangeToken, clearing: [String], steps: (applied: String?, recorded: String),
                      change: (inout SwitchRecord) -> Void) throws -> (SwitchRecord, ChangeToken, Duration) {
        let started = ContinuousClock.now
        hold()
        var released = false
        defer { if !released { release(to: nil) } }
        if steps.applied != nil { Self.step("held") }
        _ = try applyRest(&follower, from: token)
        let (head, settings) = try source.read { (try $0.changeToken(), try $0.changeFeedSettings()) }
        if let applied = steps.applied { Self.step(applied) }
        var serving = condition.withLock { record }
        serving.epoch += 1
        serving.serving = true
        serving.cutover = head
        change(&serving)
        try target.writeSync { writer in
            for key in clearing { try writer.setReservedMetadata(nil, forKey: key) }
            try writer.continueChangeFeed(after: head, settings: settings)
            try serving.write(into: writer)
        }
        Self.step(steps.recorded)
        (target as? Store)?.keepReferences(true)
        condition.withLock {
            record = serving
            // Cut over: other processes may open the switched store (the lock is the work's).
            switchLock?.release()
            switchLock = nil
        }
        release(to: target)
        released = true
        // The constraints the copy went without (PostgreSQL's foreign keys), once the app's
        // writes flow again: adding one checks every row, which the pause need not wait for.
        do {
            try (target as? Store)?.enforceReferences()
        } catch {
            logger?.warning("the reference constraints of the new store could not be added; the next launch tries again",
                            metadata: ["store": "\(newLocation)", "error": "\(error)"])
        }
        let pause = ContinuousClock.now - started
        (source as? Store)?.wakeObservers()
        return (serving, head, pause)
    }

    /// Closes and deletes the new store (after a cancel or a rollback).
    private func discardNew() throws {
        guard let store = condition.withLock({ self.new }) else {
            if newLocation.exists { try Migrator.acceptingUnfinished { try newLocation.destroy() } }
            return
        }
        try store.close()
        condition.withLock { self.new = nil }
        try Migrator.acceptingUnfinished { try newLocation.destroy() }
    }
}

/// Where a switch's copy started: the old store's feed position, and each entity's last key
/// (`nil`: the entity was empty).
struct CopyStart: Codable {
    var token: ChangeToken
    var lastKeys: [Value?]
}

/// Sleeps between the copy's batches as the pace asks.
private final class Pacer {
    let pace: SwitchingStore.Policy.Pace
    let started = ContinuousClock.now
    var itemsAtStart: Int?

    init(pace: SwitchingStore.Policy.Pace) { self.pace = pace }

    func pause(items: Int, lastAppWrite: () -> ContinuousClock.Instant, stop: () -> Bool) {
        switch pace {
        case .unlimited:
            return
        case .itemsPerSecond(let rate):
            let first = itemsAtStart ?? items
            itemsAtStart = first
            let due = started + .seconds(Double(items - first) / Double(max(1, rate)))
            while ContinuousClock.now < due && !stop() {
                Thread.sleep(forTimeInterval: min(0.05, (due - ContinuousClock.now).seconds))
            }
        case .whenIdle(let quiet):
            while ContinuousClock.now - lastAppWrite() < quiet && !stop() {
                Thread.sleep(forTimeInterval: min(0.05, quiet.seconds))
            }
        }
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension NSCondition {
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

import Foundation

extension DataStore {
    /// The token of the store's last committed transaction: start following the feed here.
    public func currentChangeToken() throws -> ChangeToken {
        try read { try $0.changeToken() }
    }

    /// Up to `limit` transactions after `token`, in commit order (the synchronous, page-by-page
    /// form of ``changes(since:)``): pass the last one's token to get the next page.
    /// - Throws: `changesExpired` when the feed no longer reaches back to `token`.
    public func changes(since token: ChangeToken, limit: Int) throws -> [ChangeSet] {
        try read { try $0.changes(since: token, limit: limit) }
    }

    /// The transactions after `token` in commit order: first those recorded, then each new one
    /// as it commits, in this process or another. It ends when the store closes or the task is
    /// cancelled, and throws `changesExpired` when the feed drops transactions the sequence has
    /// not delivered yet (a consumer slower than the retention).
    ///
    /// Writes made outside the package (the `sqlite3` shell, `mdb_load`) are not in the feed; a
    /// live query (``observe(_:)``) notices them.
    public func changes(since token: ChangeToken) -> ChangeSequence {
        ChangeSequence(store: self, token: token)
    }

    /// The request's results now, and again after each commit that changes them (in this
    /// process or another, or outside the package). Commits that do not touch the request's
    /// entity, or that leave its results as they were, deliver nothing; consecutive commits may
    /// be coalesced, but the last delivery always holds the store's final state. Ends when the
    /// store closes or the task is cancelled.
    ///
    /// A request that filters across relationships (`author.name`, ``Filter/any(_:_:)``) is
    /// refreshed by commits to the related entities too.
    public func observe(_ request: FetchRequest) -> QueryObservation {
        QueryObservation(store: self, request: request)
    }

    /// The request's results with the related items `including` names (as
    /// ``ReadAccessor/fetch(_:including:)`` loads them), now and again after each commit that
    /// changes them: a commit to a related entity refreshes them too.
    public func observe(_ request: FetchRequest, including: [Include]) -> GraphObservation {
        GraphObservation(store: self, request: request, including: including)
    }

    /// The results as ``observe(_:)`` gives them, each with its difference from the previous
    /// delivery (the first one inserts everything), for a table view.
    public func observeUpdates(_ request: FetchRequest) -> ResultsUpdates {
        ResultsUpdates(observation: observe(request), primaryKey: schema.entity(named: request.entity)?.primaryKey ?? "")
    }

    /// Typed live query: the objects matching `filter` in `sort` order (the type's default
    /// sort when `nil`), now and after each commit that changes them.
    public func observe<T: DataObject>(_ type: T.Type, where filter: Filter = .all, sortedBy sort: [SortKey]? = nil,
                                       offset: Int = 0, limit: Int? = nil) -> some AsyncSequence<[T], any Error> {
        observe(FetchRequest(T.entityName, filter: filter, sort: sort ?? T.defaultSort, offset: offset, limit: limit))
            .map { records in
                let rows = RecordRowDecoder<T>()
                return try records.map { try rows.decode($0) }
            }
    }

    /// Callback form of ``observe(_:)``: `onChange` gets the results now and after each commit
    /// that changes them, on a task of its own (never inside a block of the store, so it may read
    /// and write the store); `onError` gets the error that ends the observation, if any.
    /// Keep the returned handle; ``ObservationHandle/cancel()`` stops the observation.
    public func observe(_ request: FetchRequest, onError: @escaping @Sendable (any Error) -> Void = { _ in },
                        onChange: @escaping @Sendable ([Record]) -> Void) -> ObservationHandle {
        let observation = observe(request)
        // Detached: a task started inside a block of the store would inherit the block's
        // task-local record and see every later write of the callback as reentrant.
        return ObservationHandle(Task.detached {
            do {
                for try await results in observation { onChange(results) }
            } catch {
                onError(error)
            }
        })
    }
}

/// A running callback observation; ``cancel()`` stops it.
public final class ObservationHandle: Sendable {
    private let task: Task<Void, Never>

    init(_ task: Task<Void, Never>) { self.task = task }

    /// Stops the observation: no callback starts after this returns... except one already
    /// running. Waits for nothing.
    public func cancel() { task.cancel() }

    /// Waits until the observation has ended (cancelled, store closed, or failed).
    public func wait() async { await task.value }
}

/// The feed from a token on (``DataStore/changes(since:)``).
public struct ChangeSequence: AsyncSequence, Sendable {
    public typealias Element = ChangeSet
    let store: any DataStore
    let token: ChangeToken

    public func makeAsyncIterator() -> Iterator { Iterator(store: store, token: token) }

    /// Delivers the sequence's elements; it ends when the store closes or the task is cancelled.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        let store: any DataStore
        var token: ChangeToken
        var buffer: [ChangeSet] = []
        var index = 0

        /// The next transaction, waiting for its commit; `nil` once the store closed.
        public mutating func next() async throws -> ChangeSet? {
            while true {
                // Resolved at each turn: a switching store's backend changes at its cutover.
                let hub = CommitWaiter(store)
                if index < buffer.count {
                    index += 1
                    return buffer[index - 1]
                }
                if Task.isCancelled { return nil }
                let generation = hub.generation
                let (token, store) = (self.token, self.store)
                // On the store's reader threads: a read blocks, and next() runs on the pool.
                guard let page = try await Store.offThePool(store, { () throws -> [ChangeSet]? in
                    try Store.unlessClosed { try store.changes(since: token, limit: 256) }
                }) else {
                    return nil
                }
                if let last = page.last {
                    buffer = page
                    index = 0
                    self.token = last.token
                } else {
                    await hub.wait(after: generation)
                }
            }
        }
    }
}

/// A live query (``DataStore/observe(_:)``).
public struct QueryObservation: AsyncSequence, Sendable {
    public typealias Element = [Record]
    let store: any DataStore
    let request: FetchRequest

    public func makeAsyncIterator() -> Iterator { Iterator(store: store, request: request) }

    /// Delivers the sequence's elements; it ends when the store closes or the task is cancelled.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        var live: LiveResults<[Record]>

        init(store: any DataStore, request: FetchRequest) {
            live = LiveResults(store: store, entities: { $0.entitiesRead(by: request, including: []) },
                               fetch: { try $0.fetch(request) })
        }

        /// The next results that differ from the last ones; `nil` once the store closed.
        public mutating func next() async throws -> [Record]? { try await live.next() }
    }
}

/// What every live query does: read its results in a snapshot, deliver them when they differ
/// from the last delivery, and wait for the next commit that touches an entity it reads (in
/// this process or another, or made outside the package, which the feed does not list).
struct LiveResults<Results: Equatable & Sendable>: Sendable {
    let store: any DataStore
    /// The entities whose changes can change the results.
    let entities: @Sendable (ReadAccessor) -> Set<String>
    let fetch: @Sendable (ReadAccessor) throws -> Results
    var last: Results?
    var token = ChangeToken(store: nil, sequence: 0)
    var counter: UInt64?

    init(store: any DataStore, entities: @escaping @Sendable (ReadAccessor) -> Set<String>,
         fetch: @escaping @Sendable (ReadAccessor) throws -> Results) {
        self.store = store
        self.entities = entities
        self.fetch = fetch
    }

    /// The next results that differ from the last ones; `nil` once the store closed.
    mutating func next() async throws -> Results? {
        while true {
            // Resolved at each turn: a switching store's backend changes at its cutover.
            let hub = CommitWaiter(store)
            if Task.isCancelled { return nil }
            let generation = hub.generation
            let (previousToken, previousCounter, first) = (token, self.counter, last == nil)
            let (entities, fetch, store) = (self.entities, self.fetch, self.store)
            // On the store's reader threads: the counter and the read block (a round trip on
            // PostgreSQL), and next() runs on the cooperative pool.
            guard let (counter, outcome) = try await Store.offThePool(store, {
                () throws -> (UInt64?, (ChangeToken, Results?))? in
                // The counter is read before the snapshot, so a commit between the two is seen
                // again next time rather than missed.
                let counter = hub.currentCounter()
                guard let outcome = try Store.unlessClosed({ try store.read { reader -> (ChangeToken, Results?) in
                    let head = try reader.changeToken()
                    // A child store's own writes are not in any feed: look again at every wake-up.
                    var relevant = first || !hub.recordsChanges
                    if head != previousToken {
                        if !relevant { relevant = try Self.touches(reader, entities(reader), since: previousToken) }
                    } else if counter != previousCounter {
                        // A commit the feed did not record: a write made outside the package,
                        // or with the feed off.
                        relevant = true
                    }
                    return (head, relevant ? try fetch(reader) : nil)
                } }) else { return nil }
                return (counter, outcome)
            }) else { return nil }
            token = outcome.0
            self.counter = counter
            if let results = outcome.1, results != last {
                last = results
                return results
            }
            await hub.wait(after: generation)
        }
    }

    /// Whether any transaction after `token` touched one of `entities` (true when the feed no
    /// longer reaches back to `token`).
    static func touches(_ reader: ReadAccessor, _ entities: Set<String>, since token: ChangeToken) throws -> Bool {
        var cursor = token
        while true {
            let page: [ChangeSet]
            do {
                page = try reader.changes(since: cursor, limit: 256)
            } catch let error as StoreError where error.code == .changesExpired || error.code == .invalidArgument {
                return true
            }
            guard let last = page.last else { return false }
            if page.contains(where: { !$0.entities.isDisjoint(with: entities) }) { return true }
            cursor = last.token
        }
    }
}

/// One delivery of ``DataStore/observeUpdates(_:)``: the results and how they differ from the
/// previous delivery's.
public struct ResultsUpdate: Sendable, Hashable {
    /// The results now.
    public var results: [Record]
    /// How they differ from the previous delivery.
    public var diff: ResultsDiff
}

/// The difference between two deliveries of a live query, by primary key, in the terms of a
/// table view's batch update: `removed` are positions in the old results, `inserted` positions
/// in the new ones, `moved` pairs of old and new positions, and `updated` the new positions of
/// items present in both whose values changed (a moved item may also be updated).
public struct ResultsDiff: Sendable, Hashable {
    /// Positions in the old results of the items that are gone.
    public var removed: [Int] = []
    /// Positions in the new results of the items that are new.
    public var inserted: [Int] = []
    /// Items in both, whose position changed: from the old results' to the new results'.
    public var moved: [(from: Int, to: Int)] = []
    /// Positions in the new results of the items whose values changed.
    public var updated: [Int] = []

    /// No difference.
    public init() {}

    /// Whether nothing changed.
    public var isEmpty: Bool { removed.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty }

    /// The difference from `old` to `new`, items identified by `primaryKey`.
    public init(from old: [Record], to new: [Record], primaryKey: String) {
        let oldKeys = old.map { $0[primaryKey] }
        let newKeys = new.map { $0[primaryKey] }
        for change in newKeys.difference(from: oldKeys).inferringMoves() {
            switch change {
            case let .remove(offset, _, associatedWith: to):
                if let to { moved.append((offset, to)) } else { removed.append(offset) }
            case let .insert(offset, _, associatedWith: from):
                if from == nil { inserted.append(offset) }
            }
        }
        moved.sort { $0.to < $1.to }
        let oldByKey = Dictionary(zip(oldKeys, old), uniquingKeysWith: { a, _ in a })
        for (position, record) in new.enumerated() {
            if let before = oldByKey[record[primaryKey]], before != record { updated.append(position) }
        }
    }

    public static func == (lhs: ResultsDiff, rhs: ResultsDiff) -> Bool {
        lhs.removed == rhs.removed && lhs.inserted == rhs.inserted && lhs.updated == rhs.updated
            && lhs.moved.map(\.from) == rhs.moved.map(\.from) && lhs.moved.map(\.to) == rhs.moved.map(\.to)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(removed)
        hasher.combine(inserted)
        hasher.combine(updated)
        for move in moved {
            hasher.combine(move.from)
            hasher.combine(move.to)
        }
    }
}

/// ``DataStore/observeUpdates(_:)``'s sequence: a live query's results with their diffs.
public struct ResultsUpdates: AsyncSequence, Sendable {
    public typealias Element = ResultsUpdate
    let observation: QueryObservation
    let primaryKey: String

    public func makeAsyncIterator() -> Iterator { Iterator(base: observation.makeAsyncIterator(), primaryKey: primaryKey) }

    /// Delivers the sequence's elements; it ends when the store closes or the task is cancelled.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        var base: QueryObservation.Iterator
        let primaryKey: String
        var previous: [Record] = []

        /// The next results with their difference from the last; `nil` once the store closed.
        public mutating func next() async throws -> ResultsUpdate? {
            guard let results = try await base.next() else { return nil }
            defer { previous = results }
            return ResultsUpdate(results: results, diff: ResultsDiff(from: previous, to: results, primaryKey: primaryKey))
        }
    }
}

/// A store that serves through another one, which may change while it is open (a switching
/// store): feeds and observations wait on the commits of the one it forwards to now.
package protocol StoreForwarding: DataStore {
    /// The store that serves reads and writes now.
    var forwardedStore: any DataStore { get }
}

/// How feeds and observations wait for commits: a ``Store``'s hub, which this process's commits
/// wake at once and which polls the engine's commit counter for other processes' commits; for
/// any other ``DataStore``, a look at the feed every ``pollingInterval``.
struct CommitWaiter: Sendable {
    private let hub: ChangeHub?
    /// Whether every commit of the store is in its feed (a child store's own writes are not).
    let recordsChanges: Bool

    static let pollingInterval = Duration.milliseconds(50)

    init(_ store: any DataStore) {
        let store = Store.serving(store)
        hub = store?.changeHub
        recordsChanges = store?.recordsChanges ?? true
    }

    /// Moves whenever a wake-up happened.
    var generation: UInt64 { hub?.generation ?? 0 }

    /// The engine's commit counter, when the store has one.
    func currentCounter() -> UInt64? { hub?.currentCounter() }

    /// Waits for a commit after `generation`, or one polling interval.
    func wait(after generation: UInt64) async {
        if let hub {
            await hub.wait(after: generation)
        } else {
            try? await Task.sleep(for: Self.pollingInterval)
        }
    }
}

extension Store {
    /// Runs `work` on `store`'s reader threads (shared ones for a store that is not a
    /// ``Store``), and suspends until it returns.
    static func offThePool<T: Sendable>(_ store: any DataStore, _ work: @escaping @Sendable () throws -> T) async throws
        -> T
    {
        try await (serving(store)?.blockingReads ?? StoreThreads.sharedReaders).run(work)
    }

    /// The ``Store`` that serves `store` now: itself, or the one a forwarding store (a
    /// switching store) forwards to.
    package static func serving(_ store: any DataStore) -> Store? {
        var store = store
        while let forwarding = store as? any StoreForwarding { store = forwarding.forwardedStore }
        return store as? Store
    }

    /// Runs `body`; `nil` when the store closed (which ends feeds and observations).
    static func unlessClosed<T>(_ body: () throws -> T) throws -> T? {
        do {
            return try body()
        } catch let error as StoreError where error.code == .closed {
            return nil
        }
    }
}

/// A live query with related items (``DataStore/observe(_:including:)``).
public struct GraphObservation: AsyncSequence, Sendable {
    public typealias Element = [RelatedRecord]
    let store: any DataStore
    let request: FetchRequest
    let including: [Include]

    public func makeAsyncIterator() -> Iterator { Iterator(store: store, request: request, including: including) }

    /// Delivers the sequence's elements; it ends when the store closes or the task is cancelled.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        var live: LiveResults<[RelatedRecord]>

        init(store: any DataStore, request: FetchRequest, including: [Include]) {
            live = LiveResults(store: store, entities: { $0.entitiesRead(by: request, including: including) },
                               fetch: { try $0.fetch(request, including: including) })
        }

        /// The next results that differ from the last ones; `nil` once the store closed.
        public mutating func next() async throws -> [RelatedRecord]? { try await live.next() }
    }
}

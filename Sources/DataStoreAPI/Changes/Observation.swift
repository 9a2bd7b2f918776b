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
        // Detached: the callbacks run on a task of their own, which inherits nothing from the
        // caller's task (its priority, its task-local values).
        return ObservationHandle(Task.detached {
            do {
                for try await results in observation { onChange(results) }
            } catch {
                onError(error)
            }
        })
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

import Foundation

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

import Foundation

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

import Foundation

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

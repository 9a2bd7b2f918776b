import Foundation

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

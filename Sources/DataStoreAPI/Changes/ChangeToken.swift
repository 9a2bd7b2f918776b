import Foundation

/// A position in a store's change feed: "every transaction up to this one has been seen".
///
/// Tokens are `Codable` (keep one with the data it describes), survive reopening, and mean the
/// same on every backend: the same writes give the same sequence numbers on SQLite, LMDB,
/// in-memory and any other backend.
public struct ChangeToken: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The store's feed identity; `nil` for a store that had recorded no transaction yet.
    public let store: UUID?
    /// The sequence number of the last transaction seen (0: none).
    public let sequence: UInt64

    /// The token of transaction `sequence` of the feed of the store identified by `store`.
    public init(store: UUID?, sequence: UInt64) {
        self.store = store
        self.sequence = sequence
    }

    public var description: String {
        "\(store.map { $0.uuidString.lowercased() } ?? "new-store")@\(sequence)"
    }
}

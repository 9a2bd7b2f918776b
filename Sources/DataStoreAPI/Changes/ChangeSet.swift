import Foundation

/// One item a transaction changed, relative to the state before the transaction.
public struct ItemChange: Hashable, Sendable, CustomStringConvertible {
    /// What happened to the item.
    public enum Kind: UInt8, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The item did not exist before the transaction and does after it.
        case inserted = 1
        /// The item existed before and after the transaction (its values may be the same).
        case updated = 2
        /// The item existed before the transaction and does not after it.
        case deleted = 3

        /// `inserted`, `updated` or `deleted`, as the case is named.
        public var description: String {
            switch self {
            case .inserted: "inserted"
            case .updated: "updated"
            case .deleted: "deleted"
            }
        }
    }

    /// The item's entity.
    public var entity: String
    /// The item's primary key.
    public var key: Value
    /// What happened to it.
    public var kind: Kind

    /// A change of the item `key` of `entity`.
    public init(entity: String, key: Value, kind: Kind) {
        self.entity = entity
        self.key = key
        self.kind = kind
    }

    public var description: String { "\(kind) \(entity)[\(key)]" }
}

/// What one committed write transaction changed.
///
/// Within a transaction only the net effect of each item is recorded: an item inserted and
/// deleted again in the same transaction does not appear; one deleted and inserted again is
/// `updated`. Items are listed by entity name, then in key order.
public struct ChangeSet: Hashable, Sendable {
    /// The transaction's sequence number; the token after it.
    public var token: ChangeToken
    /// When it committed (the writer's clock).
    public var committedAt: Timestamp
    /// Entities that `deleteAll` (or a delete of every item) emptied in this transaction,
    /// before the ``items`` changes were applied.
    public var cleared: [String]
    /// Entities in which the transaction changed more items than the feed lists per transaction
    /// (``ChangeFeedSettings/maxKeysPerTransaction``): any of their items may have changed.
    public var overflowed: [String]
    /// The items changed, by entity name, then key order.
    public var items: [ItemChange]

    /// A transaction's changes (the feed builds them; tests and other feeds may too).
    public init(token: ChangeToken, committedAt: Timestamp, cleared: [String] = [], overflowed: [String] = [],
                items: [ItemChange] = []) {
        self.token = token
        self.committedAt = committedAt
        self.cleared = cleared
        self.overflowed = overflowed
        self.items = items
    }

    /// The transaction's sequence number.
    public var sequence: UInt64 { token.sequence }

    /// The entities this transaction touched in any way.
    public var entities: Set<String> {
        Set(cleared).union(overflowed).union(items.map(\.entity))
    }
}

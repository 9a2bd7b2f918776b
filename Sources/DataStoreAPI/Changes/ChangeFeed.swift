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

/// How a store's change feed behaves; kept in the store, so every process writing it agrees.
public struct ChangeFeedSettings: Hashable, Sendable, Codable {
    /// Whether write transactions are recorded. Turning it off makes every token expire.
    public var isEnabled: Bool
    /// How many of the newest transactions the feed keeps; a token older than that is
    /// ``StoreError/Code/changesExpired``.
    public var retainedTransactions: Int
    /// How many items of one transaction the feed lists; past that, the entity is listed in
    /// ``ChangeSet/overflowed`` (bounding the feed's memory and size for bulk writes).
    public var maxKeysPerTransaction: Int

    /// Settings; the defaults keep 10,000 transactions and list up to 100,000 items of each.
    public init(isEnabled: Bool = true, retainedTransactions: Int = 10_000, maxKeysPerTransaction: Int = 100_000) {
        self.isEnabled = isEnabled
        self.retainedTransactions = retainedTransactions
        self.maxKeysPerTransaction = maxKeysPerTransaction
    }
}

extension ReadAccessor {
    /// The token of the last transaction this snapshot holds: what a reader that has seen this
    /// snapshot passes to ``changes(since:limit:)`` later.
    public func changeToken() throws -> ChangeToken {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        guard let state = try ChangeLog.readState(reader) else { return ChangeToken(store: nil, sequence: 0) }
        return ChangeToken(store: state.id, sequence: state.next - 1)
    }

    /// Up to `limit` transactions after `token`, in commit order, as this snapshot holds them.
    /// - Throws: `changesExpired` when the feed no longer holds the transaction after `token`
    ///   (retention, a feed turned off, a schema upgrade or a migration copy since);
    ///   `invalidArgument` for a token of another store, or one past this snapshot's last.
    public func changes(since token: ChangeToken, limit: Int = 1_000) throws -> [ChangeSet] {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        guard limit > 0 else {
            throw StoreError(.invalidArgument, "changes(since:) needs a positive limit, not \(limit)")
        }
        return try ChangeLog.read(reader, since: token, limit: limit)
    }

    /// The store's change-feed settings.
    public func changeFeedSettings() throws -> ChangeFeedSettings {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        return try ChangeLog.readState(reader)?.settings ?? ChangeFeedSettings()
    }
}

extension WriteAccessor {
    /// Changes the store's change-feed settings in this transaction. Lowering the retention
    /// drops the oldest transactions now; turning the feed off drops it all.
    public func setChangeFeedSettings(_ settings: ChangeFeedSettings) throws {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        guard !(writer is OverlayTransaction) else {
            throw StoreError(.invalidArgument, "a child store has no change feed of its own; set the feed's settings "
                + "on the store it was made from")
        }
        guard settings.retainedTransactions >= 1, settings.maxKeysPerTransaction >= 1 else {
            throw StoreError(.invalidArgument, "change-feed retention and keys per transaction must be at least 1 "
                + "(got \(settings.retainedTransactions) and \(settings.maxKeysPerTransaction))")
        }
        try ChangeLog.configure(writer, settings)
    }

    /// Makes the feed go on from `head` (another store's token), dropping this store's entries:
    /// tokens of the store it takes over from stay valid here. What a switching store's cutover
    /// writes.
    package func continueChangeFeed(after head: ChangeToken, settings: ChangeFeedSettings) throws {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        try ChangeLog.continueFeed(writer, after: head, settings: settings)
    }
}

import Foundation

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

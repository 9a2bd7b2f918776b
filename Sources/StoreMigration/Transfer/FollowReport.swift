@_spi(Backend) import DataStoreAPI
import Foundation

/// Where a follow stands, reported after each applied batch and about once a second while idle.
public struct FollowProgress: Sendable {
    /// The last source transaction applied to the destination.
    public var applied: ChangeToken
    /// The source's last committed transaction, as last seen.
    public var sourceHead: ChangeToken
    /// Source transactions committed but not applied yet.
    public var lagTransactions: UInt64 { sourceHead.sequence > applied.sequence ? sourceHead.sequence - applied.sequence : 0 }
    /// How long the last transaction applied waited between its commit in the source and its
    /// commit in the destination (0 when idle).
    public var lagSeconds: Double
    /// Source transactions applied so far.
    public var transactionsApplied: Int
    /// Items written so far.
    public var itemsWritten: Int
    /// Items deleted so far.
    public var itemsDeleted: Int
}

/// What a follow did.
public struct FollowReport: Sendable, Codable, Hashable {
    /// The source, as its location reads.
    public var source: String
    /// The destination, as its location reads.
    public var destination: String
    /// The token the follow started from, and the last one it applied.
    public var startToken: ChangeToken?
    /// The last source transaction applied: the destination equals the source as of it.
    public var endToken: ChangeToken?
    /// Source transactions applied.
    public var transactionsApplied = 0
    /// Items written.
    public var itemsWritten = 0
    /// Items deleted.
    public var itemsDeleted = 0
    /// Merge-join catch-ups, with why each ran (no token yet, an expired token, an overflowed
    /// transaction).
    public var catchUps: [String] = []
    /// The delay between a source commit and its destination commit, over every applied
    /// transaction: median and worst, in seconds.
    public var lagMedianSeconds = 0.0
    /// The longest of those delays.
    public var lagWorstSeconds = 0.0
    /// `idle` or `stopped`.
    public var endedBy = ""
    /// How long the follow ran.
    public var seconds = 0.0
}

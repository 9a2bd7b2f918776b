@_spi(Backend) import DataStoreAPI
import Foundation

/// Options of ``Migrator/follow(from:to:options:shouldStop:progress:)``.
public struct FollowOptions: Sendable {
    /// Stop once the source has committed nothing for this long (`nil`: follow until
    /// `shouldStop` says so, as on Ctrl-C).
    public var untilIdle: Duration?
    /// Most source transactions applied in one destination transaction.
    public var batchTransactions: PositiveInt
    /// How often to look for new source transactions while idle.
    public var pollInterval: Duration
    /// Items per write transaction of a merge-join catch-up.
    public var batchSize: PositiveInt
    /// Whether a follow that starts from a position stored in the destination first compares
    /// the two stores by a merge join (on by default). A write made to the source outside the
    /// package (the `sqlite3` shell, `psql`, another program) commits no feed entry, so only a
    /// comparison finds it. A caller that has just copied or verified the destination against
    /// the source's current snapshot may turn it off.
    public var compareFirst: Bool

    /// Options; by default a follow runs until stopped, compares the stores first and applies up
    /// to 500 transactions at a time.
    public init(untilIdle: Duration? = nil, batchTransactions: PositiveInt = 500,
                pollInterval: Duration = .milliseconds(5), batchSize: PositiveInt = 1_000,
                compareFirst: Bool = true) {
        self.untilIdle = untilIdle
        self.batchTransactions = batchTransactions
        self.pollInterval = pollInterval
        self.batchSize = batchSize
        self.compareFirst = compareFirst
    }

}

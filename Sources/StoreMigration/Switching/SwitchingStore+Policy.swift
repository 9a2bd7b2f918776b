@_spi(Backend) import DataStoreAPI
import Foundation

extension SwitchingStore {
    /// Where a switch stands.
    public enum Phase: String, Sendable, Codable, Hashable {
        /// The old store serves; its snapshot is being copied.
        case copying
        /// The old store serves; the new one applies its change feed until the cutover.
        case following
        /// The new store serves.
        case switched
        /// The new store serves; the old one catches up to serve again.
        case rollingBack
        /// The old store serves again; the new one was discarded.
        case rolledBack
        /// The old store serves; the switch was cancelled before its cutover and the new store
        /// discarded.
        case cancelled
    }

    /// How a switch runs.
    public struct Policy: Sendable {
        /// How fast the background copy goes.
        public typealias Pace = CopyPace

        /// When the cutover happens.
        public enum Cutover: Sendable, Hashable {
            /// As soon as the new store has caught up.
            case automatic
            /// When the app calls ``SwitchingStore/switchNow(timeout:)``.
            case manual
        }

        /// How fast the background copy goes.
        public var pace: Pace
        /// When the cutover happens.
        public var cutover: Cutover
        /// Items per write transaction of the copy, and per batch that the follow and the
        /// verification read: the size given (``chosenBatchSize``), else 1,000.
        public var batchSize: PositiveInt {
            get { chosenBatchSize ?? 1_000 }
            set { chosenBatchSize = newValue }
        }
        /// The batch size given, if any: without one, an unpaced copy writes transactions of the
        /// new store's size, as `migrate-store copy` does (into PostgreSQL 1,000 items first, then
        /// up to 10,000, as many as fit in 32 MiB; 1,000 into the others), and a paced copy 1,000.
        public var chosenBatchSize: PositiveInt?
        /// Whether the old store is kept after the cutover (for ``SwitchingStore/rollBack()``)
        /// until ``SwitchingStore/dropOldStore()``; when false it is deleted at the cutover.
        public var keepsOldStore: Bool
        /// The new store's durability.
        public var durability: Durability
        /// How long the cutover may hold writes, as estimated from the pace at which the new
        /// store takes the old one's transactions: the cutover waits until the transactions
        /// left to apply fit in it. An app that writes faster than the new store can take its
        /// writes keeps the switch following (``Progress/lagTransactions`` shows it).
        public var maximumPause: Duration

        /// A policy; by default the copy runs at full speed, the cutover follows as soon as the
        /// new store has caught up, and the old store is kept.
        public init(pace: Pace = .unlimited, cutover: Cutover = .automatic, batchSize: PositiveInt? = nil,
                    keepsOldStore: Bool = true, durability: Durability = .full,
                    maximumPause: Duration = .milliseconds(100)) {
            self.pace = pace
            self.maximumPause = maximumPause
            self.cutover = cutover
            self.chosenBatchSize = batchSize
            self.keepsOldStore = keepsOldStore
            self.durability = durability
        }
    }

    /// What the background work has done, for an app to show.
    public struct Progress: Sendable, Hashable {
        /// Where the switch stands.
        public var phase: Phase
        /// Items of the old store's snapshot copied so far.
        public var itemsCopied = 0
        /// Items in the old store's snapshot.
        public var itemsToCopy = 0
        /// Transactions of the serving store not yet applied to the other one.
        public var lagTransactions: UInt64 = 0
        /// How long writes were held at the last cutover.
        public var lastPause: Duration?
        /// Why the background work stopped, when it failed (the serving store is unaffected;
        /// the next launch tries again).
        public var failure: String?
    }

    /// The switch that `location` takes part in, as its record says (`nil`: none).
    public static func status(of location: StoreLocation) throws -> Status? {
        let store = try Migrator.acceptingUnfinished { try location.openSource() }
        defer { try? store.close() }
        return try status(in: store, named: location.description)
    }

    /// The switch that the open `store` takes part in, as its record says.
    package static func status(in store: any DataStore, named name: String = "the store") throws -> Status? {
        guard let record = try SwitchRecord.read(from: store, named: name) else { return nil }
        return Status(old: record.old, new: record.new, phase: record.phase, serving: record.serving,
                      switchedAt: record.switchedAt, rollingBack: record.rollingBack ?? false)
    }

    /// A switch as one of its stores records it (``status(of:)``).
    public struct Status: Sendable, Hashable {
        /// The store the data moves from, and the one it moves to.
        public var old: String
        public var new: String
        /// The phase this store last recorded.
        public var phase: Phase
        /// Whether this store serves (as of its record).
        public var serving: Bool
        /// When the cutover happened.
        public var switchedAt: Date?
        /// Whether a rollback was asked for and has not finished.
        public var rollingBack: Bool
    }
}

extension SwitchingStore.Policy {
    /// Items per write transaction of the copy into a store of `backend`: the size given, else
    /// the backend's when the copy is not paced, else 1,000.
    func copyBatchSize(into backend: any StoreBackend) -> PositiveInt {
        if case .unlimited = pace { return MigrationOptions(batchSize: chosenBatchSize).copyBatchSize(into: backend) }
        return batchSize
    }
}

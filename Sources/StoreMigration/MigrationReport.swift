@_spi(Backend) import DataStoreAPI

/// What a migration step did to one entity.
public struct EntityReport: Sendable, Codable, Hashable {
    /// The entity.
    public var entity: String
    /// Items read from the source snapshot.
    public var itemsRead = 0
    /// Items written to the destination (inserted or updated).
    public var itemsWritten = 0
    /// Items deleted from the destination (sync and resume only).
    public var itemsDeleted = 0
    /// Items compared by the verify pass.
    public var itemsVerified = 0
    /// Differences the verify pass found (0 on success).
    public var differences = 0
    /// With `checksum`: the key ranges whose digests were compared, and those that differed
    /// and were compared item by item.
    public var rangesCompared: Int?
    /// With a checksum verify: the key ranges whose digests differed.
    public var rangesDiffering: Int?
    /// How long the entity took.
    public var seconds = 0.0

    /// An empty report for `entity`.
    public init(entity: String) {
        self.entity = entity
    }
}

/// The summary of a copy, sync or verify, as printed and written by `--report`.
public struct MigrationReport: Sendable, Codable, Hashable {
    /// What a transfer does: the word `migrate-store` prints and a `--report` file stores.
    public enum Operation: String, Sendable, Codable, Hashable, CustomStringConvertible {
        /// A copy into a new (or unfinished) destination.
        case copy
        /// Applying only the differences to an existing destination.
        case sync
        /// Comparing every item.
        case verify

        public var description: String { rawValue }
    }

    /// What the transfer did: copy, sync or verify.
    public var operation: Operation
    /// The source, as its location reads.
    public var source: String
    /// The destination, as its location reads.
    public var destination: String
    /// Per entity, in schema order.
    public var entities: [EntityReport] = []
    /// Whether the destination was checked against the source snapshot.
    public var verified = false
    /// Whether the run resumed an interrupted migration.
    public var resumed = false
    /// Whether a resumed copy into a kind written whole (JSON Lines) found the source changed
    /// since the interruption and wrote the destination from the start.
    public var startedOver = false
    /// Up to 20 differences found by verify, as "Entity[key]: what".
    public var sampleDifferences: [String] = []
    /// The check of the source before the run, when one ran.
    public var sourceCheck: StoreCheckReport?
    /// How long the whole operation took.
    public var seconds = 0.0

    /// An empty report.
    public init(operation: Operation, source: String, destination: String) {
        self.operation = operation
        self.source = source
        self.destination = destination
    }

    /// Total differences over every entity.
    public var differences: Int { entities.reduce(0) { $0 + $1.differences } }
}

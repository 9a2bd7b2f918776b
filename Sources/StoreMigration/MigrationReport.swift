import DataStoreAPI

/// What a migration step did to one entity.
public struct EntityReport: Sendable, Codable, Hashable {
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
    public var seconds = 0.0

    public init(entity: String) {
        self.entity = entity
    }
}

/// The summary of a copy, sync or verify, as printed and written by `--report`.
public struct MigrationReport: Sendable, Codable, Hashable {
    public var operation: String
    public var source: String
    public var destination: String
    public var entities: [EntityReport] = []
    /// Whether the destination was checked against the source snapshot.
    public var verified = false
    /// Whether the run resumed an interrupted migration.
    public var resumed = false
    /// Up to 20 differences found by verify, as "Entity[key]: what".
    public var sampleDifferences: [String] = []
    public var seconds = 0.0

    public init(operation: String, source: String, destination: String) {
        self.operation = operation
        self.source = source
        self.destination = destination
    }

    /// Total differences over every entity.
    public var differences: Int { entities.reduce(0) { $0 + $1.differences } }
}

/// Progress of a migration, reported after every batch.
public struct MigrationProgress: Sendable {
    public enum Phase: String, Sendable { case copy, sync, verify }
    public var phase: Phase
    public var entity: String
    public var done: Int
    public var total: Int
    /// Items per second in this phase of this entity so far.
    public var itemsPerSecond: Double

    public init(phase: Phase, entity: String, done: Int, total: Int, itemsPerSecond: Double) {
        self.phase = phase
        self.entity = entity
        self.done = done
        self.total = total
        self.itemsPerSecond = itemsPerSecond
    }
}

/// Options of a migration.
public struct MigrationOptions: Sendable {
    /// The entities to copy (all when `nil`).
    public var entities: [String]?
    /// Items per write transaction (and per checkpoint).
    public var batchSize: Int
    /// Finish an interrupted migration into the destination.
    public var resume: Bool
    /// Replace a destination that exists.
    public var overwrite: Bool
    /// Compare every item after copying (on by default).
    public var verify: Bool
    /// Read and count the source and check the destination, but write nothing.
    public var dryRun: Bool

    public init(entities: [String]? = nil, batchSize: Int = 1_000, resume: Bool = false, overwrite: Bool = false,
                verify: Bool = true, dryRun: Bool = false) {
        self.entities = entities
        self.batchSize = batchSize
        self.resume = resume
        self.overwrite = overwrite
        self.verify = verify
        self.dryRun = dryRun
    }
}

/// Thrown when the caller's `shouldStop` asked the migration to stop; the destination holds
/// every finished batch and its checkpoint, and `resume` finishes the job.
public struct MigrationInterrupted: Error, Sendable, CustomStringConvertible {
    public let report: MigrationReport
    public var description: String { "migration into \(report.destination) stopped; resume to finish it" }
}

/// Progress of a migration, reported after every batch.
public struct MigrationProgress: Sendable {
    public enum Phase: String, Sendable { case copy, sync, verify, upgrade }
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

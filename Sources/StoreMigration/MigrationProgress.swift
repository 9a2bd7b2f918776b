/// Progress of a migration, reported after every batch.
public struct MigrationProgress: Sendable {
    /// The phases of a migration: copying, syncing (comparing and applying differences),
    /// verifying, upgrading the schema.
    public enum Phase: String, Sendable { case copy, sync, verify, upgrade }
    /// What the engine is doing.
    public var phase: Phase
    /// The entity it works on.
    public var entity: String
    /// Items of the entity done so far.
    public var done: Int
    /// Items of the entity in all.
    public var total: Int
    /// Items per second in this phase of this entity so far.
    public var itemsPerSecond: Double

    /// Progress of `phase` on `entity`.
    public init(phase: Phase, entity: String, done: Int, total: Int, itemsPerSecond: Double) {
        self.phase = phase
        self.entity = entity
        self.done = done
        self.total = total
        self.itemsPerSecond = itemsPerSecond
    }
}

/// Thrown when the caller's `shouldStop` asked the migration to stop; the destination holds
/// every finished batch and its checkpoint, and `resume` finishes the job.
public struct MigrationInterrupted: Error, Sendable, CustomStringConvertible {
    /// What the run did before it stopped.
    public let report: MigrationReport
    public var description: String { "migration into \(report.destination) stopped; resume to finish it" }
}

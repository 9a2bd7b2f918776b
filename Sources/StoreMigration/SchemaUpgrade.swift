@_spi(Backend) import DataStoreAPI
import Foundation

/// What ``SchemaUpgrade/upgrade(_:plan:dryRun:progress:)`` did or would do.
public struct UpgradeReport: Sendable, Codable {
    /// The store, as its location reads.
    public var store: String
    /// The version it held before.
    public var fromVersion: Int
    /// The version it holds now (or would, in a dry run).
    public var toVersion: Int
    /// Each step applied (or, in a dry run, to apply): its version, its words, and the items of
    /// the entity it changes when that entity exists before the upgrade.
    public var steps: [Step]
    /// Whether nothing was written.
    public var dryRun: Bool
    /// How long it took.
    public var seconds: Double

    /// One step of the upgrade.
    public struct Step: Sendable, Codable {
        /// The version the step belongs to.
        public var version: Int
        /// The step, in words.
        public var step: String
        /// Items it touched (counted in a dry run too), when it reads items.
        public var items: Int?
    }
}

/// Applies a declarative plan to a store of any kind: the library call behind
/// `migrate-store upgrade` and `copy --plan`.
public enum SchemaUpgrade {
    /// Brings the store at `location` to the highest version of `plan`, in one transaction.
    ///
    /// - Parameter dryRun: check the plan against the store's schema and count the items each
    ///   step touches, reading the store as a source and writing nothing. (A value that does not
    ///   convert or a duplicate under a new unique index shows only when the upgrade runs; it
    ///   then fails and leaves the store unchanged.)
    /// - Throws: `newerSchemaVersion`, a step's error naming it, `invalidValue` or
    ///   `uniqueViolation` from the data; the store is unchanged after any error.
    public static func upgrade(_ location: StoreLocation, plan: SchemaPlan, dryRun: Bool = false,
                               progress: @escaping @Sendable (SchemaUpgradeProgress) -> Void = { _ in })
        throws -> UpgradeReport
    {
        let started = Date()
        let source = try location.openSource(alreadyChecked: false)
        let stored = source.schema
        var steps: [UpgradeReport.Step] = []
        do {
            defer { try? source.close() }
            if let top = plan.targetVersion, top < stored.version {
                throw StoreError(.newerSchemaVersion, "\(location) holds schema version \(stored.version), newer than "
                    + "the plan's last version \(top)")
            }
            _ = try plan.target(from: stored)
            try source.read { reader in
                for (version, step) in plan.steps(from: stored) {
                    let items = stored.entity(named: step.entityName) == nil ? nil
                        : try reader.count(FetchRequest(step.entityName))
                    steps.append(UpgradeReport.Step(version: version, step: step.description, items: items))
                }
            }
        }
        let target = try plan.target(from: stored)
        var report = UpgradeReport(store: location.description, fromVersion: stored.version, toVersion: target.version,
                                   steps: steps, dryRun: dryRun, seconds: 0)
        if !dryRun && target.version != stored.version {
            let store = try location.backend.open(at: location.path, schema: target,
                                                  upgrades: SchemaUpgrades(plan, progress: progress),
                                                  durability: .full, key: location.key)
            try store.close()
        }
        report.seconds = Date().timeIntervalSince(started)
        return report
    }
}

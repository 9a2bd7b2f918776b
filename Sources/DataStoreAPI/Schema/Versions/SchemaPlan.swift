

/// A declarative migration plan: the steps of each version, as JSON for `migrate-store upgrade`.
public struct SchemaPlan: Sendable, Hashable, Codable {
    /// The steps that lead to one version from the one before it.
    /// The steps that take a store from the version before to `version`.
    public struct Version: Sendable, Hashable, Codable {
        /// The version the steps lead to.
        public var version: Int
        /// The steps, in order.
        public var steps: [SchemaStep]

        /// The steps to `version`.
        public init(_ version: Int, _ steps: [SchemaStep]) {
            self.version = version
            self.steps = steps
        }
    }

    /// The versions, in any order; each is applied after the one before it.
    /// The versions, each with its steps.
    public var versions: [Version]

    /// A plan of `versions`.
    public init(_ versions: [Version]) {
        self.versions = versions
    }

    /// The highest version the plan reaches.
    public var targetVersion: Int? { versions.map(\.version).max() }
}

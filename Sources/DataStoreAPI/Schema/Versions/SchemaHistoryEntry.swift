

/// One migration the store went through, kept in the store (``Store/schemaHistory()``).
public struct SchemaHistoryEntry: Sendable, Hashable, Codable {
    /// The version the store had before.
    public var fromVersion: Int
    /// The version it reached.
    public var toVersion: Int
    /// Each step applied, as ``UpgradeStep/description`` words it.
    public var steps: [String]
    /// When the migration committed.
    public var date: Timestamp
}

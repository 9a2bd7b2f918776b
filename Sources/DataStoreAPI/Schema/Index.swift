

/// An index over one or more attributes of an entity, unique or not.
///
/// A unique index rejects two items whose indexed values are all equal; as in SQL, an item
/// with a null in any indexed attribute never conflicts.
public struct Index: Sendable, Hashable, Codable {
    /// The index's name, unique within its entity.
    public var name: String
    /// The indexed attributes, in order.
    public var attributes: [String]
    /// Whether two items may not hold the same (non-null) values.
    public var isUnique: Bool

    /// An index over `attributes`, unique or not.
    public init(_ name: String, on attributes: [String], unique: Bool = false) {
        self.name = name
        self.attributes = attributes
        self.isUnique = unique
    }
}

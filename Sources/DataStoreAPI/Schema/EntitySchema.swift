

/// The schema of one entity: its name, primary key, attributes and indexes.
public struct EntitySchema: Sendable, Hashable, Codable {
    /// Every part of the entity in one immutable object: every request looks its entity up
    /// and copies it, and a copy retains this one reference, where five separate parts took
    /// five retains and five releases. A change replaces it.
    /// Its getters are inlinable, so that a backend reads a part in place (a call and a
    /// retain per read otherwise, on every insert).
    @usableFromInline final class Parts: Sendable {
        @usableFromInline let name: String
        @usableFromInline let primaryKey: String
        @usableFromInline let attributes: [Attribute]
        @usableFromInline let indexes: [Index]
        let relationships: [Relationship]
        let layout: RecordLayout
        /// The primary-key attribute's position in `attributes`, if it is there (a schema
        /// that ``Schema/validate()`` accepted has it).
        @usableFromInline let primaryKeySlot: Int?

        init(_ name: String, _ primaryKey: String, _ attributes: [Attribute], _ indexes: [Index],
             _ relationships: [Relationship], layout: RecordLayout?) {
            self.name = name
            self.primaryKey = primaryKey
            self.attributes = attributes
            self.indexes = indexes
            self.relationships = relationships
            let layout = layout ?? RecordLayout(attributes.map(\.name))
            self.layout = layout
            primaryKeySlot = layout.slot(of: primaryKey)
        }
    }

    @usableFromInline var parts: Parts

    /// The entity whose parts these are.
    init(parts: Parts) { self.parts = parts }

    /// The entity's name.
    public var name: String {
        @inlinable get { parts.name }
        set { parts = Parts(newValue, parts.primaryKey, parts.attributes, parts.indexes, parts.relationships, layout: parts.layout) }
    }
    /// The name of the primary-key attribute, of type `int`, `string` or `uuid`.
    public var primaryKey: String {
        @inlinable get { parts.primaryKey }
        set { parts = Parts(parts.name, newValue, parts.attributes, parts.indexes, parts.relationships, layout: parts.layout) }
    }
    /// Every attribute, the primary key included.
    public var attributes: [Attribute] {
        @inlinable get { parts.attributes }
        set { parts = Parts(parts.name, parts.primaryKey, newValue, parts.indexes, parts.relationships, layout: nil) }
    }
    /// The entity's indexes.
    public var indexes: [Index] {
        @inlinable get { parts.indexes }
        set { parts = Parts(parts.name, parts.primaryKey, parts.attributes, newValue, parts.relationships, layout: parts.layout) }
    }
    /// The entity's relationships to entities of the same schema (see ``Relationship``).
    public var relationships: [Relationship] {
        get { parts.relationships }
        set { parts = Parts(parts.name, parts.primaryKey, parts.attributes, parts.indexes, newValue, layout: parts.layout) }
    }
    /// The layout of the records a store returns for this entity (its attribute names in order).
    @_spi(Backend) public var layout: RecordLayout { parts.layout }

    /// Whether `other` is this very definition (a copy of it, not an equal one built again):
    /// what a backend that keeps what it derived from an entity compares, without comparing
    /// names.
    @_spi(Backend) @inlinable public func isSameDefinition(as other: EntitySchema) -> Bool { parts === other.parts }

    /// An entity; ``Schema/validate()`` checks it when a store opens.
    ///
    /// A to-one relationship is stored in an attribute of its name, holding the related item's
    /// primary key, with an index of its name: both are added when they are not declared
    /// (``Schema/resolved()``).
    public init(_ name: String, primaryKey: String, attributes: [Attribute], indexes: [Index] = [],
                relationships: [Relationship] = []) {
        parts = Parts(name, primaryKey, attributes, indexes, relationships, layout: nil)
    }

    public static func == (lhs: EntitySchema, rhs: EntitySchema) -> Bool {
        lhs.parts === rhs.parts
            || (lhs.name == rhs.name && lhs.primaryKey == rhs.primaryKey && lhs.attributes == rhs.attributes
                && lhs.indexes == rhs.indexes && lhs.relationships == rhs.relationships)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(primaryKey)
        hasher.combine(attributes)
        hasher.combine(indexes)
        hasher.combine(relationships)
    }

    private enum CodingKeys: String, CodingKey { case name, primaryKey, attributes, indexes, relationships }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(try container.decode(String.self, forKey: .name),
                  primaryKey: try container.decode(String.self, forKey: .primaryKey),
                  attributes: try container.decode([Attribute].self, forKey: .attributes),
                  indexes: try container.decode([Index].self, forKey: .indexes),
                  relationships: try container.decodeIfPresent([Relationship].self, forKey: .relationships) ?? [])
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(primaryKey, forKey: .primaryKey)
        try container.encode(attributes, forKey: .attributes)
        try container.encode(indexes, forKey: .indexes)
        // Absent when there are none: a schema without relationships is stored as before.
        if !relationships.isEmpty { try container.encode(relationships, forKey: .relationships) }
    }

    /// The attribute of that name, if any.
    public func attribute(named name: String) -> Attribute? {
        // By the layout's names: looking through the attributes copied each one it passed.
        layout.slot(of: name).map { attributes[$0] }
    }

    /// The primary key's value in `record` (null when absent), looked for first where this
    /// entity's records hold it.
    @_spi(Backend) public func primaryKeyValue(of record: Record) -> Value {
        record.value(ifPresent: primaryKey, at: parts.primaryKeySlot ?? 0) ?? .null
    }

    /// The primary-key attribute.
    public var primaryKeyAttribute: Attribute {
        parts.primaryKeySlot.map { parts.attributes[$0] } ?? Attribute(primaryKey, .int)
    }

    /// The primary key's type (`int` when the entity has no such attribute, as
    /// ``primaryKeyAttribute``), without copying the attribute.
    @_spi(Backend) public var primaryKeyType: ValueType {
        parts.primaryKeySlot.map { parts.attributes[$0].type } ?? .int
    }
}

/// An attribute of an entity: a name, a type, whether it may be null, and an optional default.
public struct Attribute: Sendable, Hashable, Codable {
    /// The attribute's name (see ``Limits/maxNameLength``).
    public var name: String
    /// The type of its non-null values.
    public var type: ValueType
    /// Whether it may hold ``Value/null``.
    public var isOptional: Bool
    /// The value a write takes when the record does not name the attribute.
    public var defaultValue: Value?

    /// An attribute; `default` is the value a write takes when the record does not name it.
    public init(_ name: String, _ type: ValueType, optional: Bool = false, default defaultValue: Value? = nil) {
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
    }
}

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

/// The schema of a store: a version number and its entities. Every store keeps its schema,
/// so a store describes itself and can be copied without the app's code.
public struct Schema: Sendable, Hashable, Codable {
    /// The app's version number of the schema; a store holds exactly one.
    public var version: Int
    /// The entities, in order.
    public var entities: [EntitySchema]

    /// A schema of `entities`.
    public init(version: Int = 1, entities: [EntitySchema]) {
        self.version = version
        self.entities = entities
    }

    /// The entity of that name, if any.
    public func entity(named name: String) -> EntitySchema? {
        entities.first { $0.name == name }
    }

    /// Checks names, types, primary keys, defaults and indexes against the ``Limits``.
    /// - Throws: ``StoreError`` naming the first problem found.
    public func validate() throws(StoreError) {
        let entities = try resolved().entities
        guard entities.count <= Limits.maxEntities else {
            throw StoreError(.limitExceeded, "schema has \(entities.count) entities; at most "
                + "\(Limits.maxEntities) are allowed")
        }
        var seen: [String: String] = [:]
        for entity in entities {
            try Schema.checkName(entity.name, what: "entity")
            try Schema.checkUnique(entity.name, in: &seen, what: "entity")
            try entity.validate()
        }
    }

    static func checkName(_ name: String, what: String) throws(StoreError) {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= Limits.maxNameLength else {
            throw StoreError(.limitExceeded, "\(what) name '\(name)' must be 1 to \(Limits.maxNameLength) "
                + "characters long")
        }
        let valid = bytes.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
        }
        guard valid, !(bytes[0] >= 0x30 && bytes[0] <= 0x39) else {
            throw StoreError(.invalidArgument, "\(what) name '\(name)' may hold only ASCII letters, digits "
                + "and '_', and may not start with a digit")
        }
        let folded = foldedName(name)
        for reserved in ["_ds", "sqlite_"] where folded.hasPrefix(reserved) {
            throw StoreError(.invalidArgument, "\(what) name '\(name)' starts with '\(reserved)' (in any letter "
                + "case), which is reserved")
        }
    }

    /// A name with ASCII letters in lower case: names that fold to the same string are the same
    /// name (SQLite's identifiers ignore case).
    static func foldedName(_ name: String) -> String {
        String(decoding: name.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// Records `name` in `seen` (by its folded form); throws when a name that differs at most by
    /// letter case is already there.
    static func checkUnique(_ name: String, in seen: inout [String: String], what: String,
                            owner: String? = nil) throws(StoreError) {
        let qualified = owner.map { "\($0).\(name)" } ?? name
        if let earlier = seen.updateValue(name, forKey: foldedName(name)) {
            let detail = earlier == name ? "is declared twice"
                : "differs from '\(owner.map { "\($0)." } ?? "")\(earlier)' only by letter case"
            throw StoreError(.invalidArgument, "\(what) '\(qualified)' \(detail)")
        }
    }
}

extension EntitySchema {
    func validate() throws(StoreError) {
        guard attributes.count <= Limits.maxAttributes else {
            throw StoreError(.limitExceeded, "entity '\(name)' has \(attributes.count) attributes; at most "
                + "\(Limits.maxAttributes) are allowed")
        }
        var seen: [String: String] = [:]
        for attribute in attributes {
            try Schema.checkName(attribute.name, what: "attribute")
            try Schema.checkUnique(attribute.name, in: &seen, what: "attribute", owner: name)
            if let value = attribute.defaultValue, !value.isNull {
                _ = try checkValue(value, for: attribute)
            } else if attribute.defaultValue != nil, !attribute.isOptional {
                throw StoreError(.invalidValue, "attribute '\(name).\(attribute.name)' is required but its "
                    + "default is null")
            }
        }
        guard let key = attribute(named: primaryKey) else {
            throw StoreError(.unknownAttribute, "entity '\(name)' names primary key '\(primaryKey)', "
                + "which is not one of its attributes")
        }
        guard key.type.canBePrimaryKey, !key.isOptional else {
            throw StoreError(.invalidArgument, "primary key '\(name).\(primaryKey)' must be a non-optional "
                + "int, string or uuid, not \(key.isOptional ? "optional " : "")\(key.type)")
        }
        guard indexes.count <= Limits.maxIndexesPerEntity else {
            throw StoreError(.limitExceeded, "entity '\(name)' has \(indexes.count) indexes; at most "
                + "\(Limits.maxIndexesPerEntity) are allowed")
        }
        var indexNames: [String: String] = [:]
        for index in indexes {
            try Schema.checkName(index.name, what: "index")
            try Schema.checkUnique(index.name, in: &indexNames, what: "index", owner: name)
            guard !index.attributes.isEmpty, index.attributes.count <= Limits.maxAttributesPerIndex else {
                throw StoreError(.limitExceeded, "index '\(name).\(index.name)' must cover 1 to "
                    + "\(Limits.maxAttributesPerIndex) attributes")
            }
            for attributeName in index.attributes where attribute(named: attributeName) == nil {
                throw StoreError(.unknownAttribute, "index '\(name).\(index.name)' names unknown attribute "
                    + "'\(attributeName)'")
            }
        }
    }
}

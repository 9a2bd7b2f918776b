/// A relationship from the items of one entity to items of an entity of the same schema.
///
/// - A **to-one** relationship is stored in an attribute of its own name that holds the related
///   item's primary key (null for none when it is optional), with an index of the same name:
///   ``Schema/resolved()`` adds both when the entity does not declare them. SQLite and
///   PostgreSQL also get a deferred `FOREIGN KEY` on that attribute; on LMDB its index is the
///   reverse index that finds the items pointing at a given item.
/// - A **to-many** relationship is the other side of a to-one (one-to-many: "the notes of a
///   user" are the notes whose `author` is the user) or of another to-many (many-to-many: the
///   pairs are stored in a join entity the schema adds, named by ``Schema/joinEntityName(_:_:)``).
/// - An **ordered** to-many keeps its items in the order they were put in (Core Data's ordered
///   relationships, a Realm list of links): each related item's place is an integer position
///   stored beside the reference, in an attribute the schema adds
///   (``Schema/positionAttribute(_:_:inverseIsToOne:)``), and reads return the items in that
///   order. An item is in an ordered to-many at most once.
///
/// The invariant, on every backend and after every commit: each to-one reference points at an
/// existing item. It is checked when the transaction commits, so a transaction may insert a
/// note before its author. A violation rolls the transaction back with
/// ``StoreError/Code/referenceViolation``.
public struct Relationship: Sendable, Hashable, Codable {
    /// How many items the relationship relates an item to.
    public enum Cardinality: String, Sendable, Hashable, Codable {
        /// At most one (exactly one when the relationship is required).
        case toOne
        /// Any number.
        case toMany
    }

    /// What deleting an item does to the items this relationship relates it to.
    public enum DeleteRule: String, Sendable, Hashable, Codable {
        /// The related items stay and no longer point at the deleted item: a to-one on their
        /// side is set to null (it must be optional), a many-to-many pair is removed.
        case nullify
        /// The related items are deleted too, in the same transaction, with their own rules.
        case cascade
        /// The delete is refused (`referenceViolation` at commit) while related items remain.
        case deny
    }

    /// The relationship's name; a to-one's attribute has the same name.
    public var name: String
    /// The related entity.
    public var destination: String
    /// To-one or to-many.
    public var cardinality: Cardinality
    /// The relationship on the destination that leads back; required for a to-many, whose
    /// items it finds. `nil` for a to-one that has no inverse.
    public var inverse: String?
    /// Whether a to-one may be null (always true for a to-many).
    public var isOptional: Bool
    /// What deleting an item of this entity does to its related items.
    public var deleteRule: DeleteRule
    /// Whether a to-many keeps its items in an order of their own (always false for a to-one);
    /// see ``Schema/positionAttribute(_:_:inverseIsToOne:)``.
    public var isOrdered: Bool

    /// A relationship; ``toOne(_:to:inverse:optional:deleteRule:)`` and
    /// ``toMany(_:to:inverse:deleteRule:ordered:)`` read better.
    public init(_ name: String, to destination: String, cardinality: Cardinality, inverse: String?,
                optional: Bool = true, deleteRule: DeleteRule = .nullify, ordered: Bool = false) {
        self.name = name
        self.destination = destination
        self.cardinality = cardinality
        self.inverse = inverse
        self.isOptional = cardinality == .toMany ? true : optional
        self.deleteRule = deleteRule
        self.isOrdered = ordered
    }

    /// A to-one relationship, stored in an attribute named `name` that holds the related item's key.
    public static func toOne(_ name: String, to destination: String, inverse: String? = nil,
                             optional: Bool = true, deleteRule: DeleteRule = .nullify) -> Relationship {
        Relationship(name, to: destination, cardinality: .toOne, inverse: inverse, optional: optional,
                     deleteRule: deleteRule)
    }

    /// A to-many relationship: the other side of the destination's relationship `inverse`;
    /// `ordered` keeps its items in the order they are put in.
    public static func toMany(_ name: String, to destination: String, inverse: String,
                              deleteRule: DeleteRule = .nullify, ordered: Bool = false) -> Relationship {
        Relationship(name, to: destination, cardinality: .toMany, inverse: inverse, deleteRule: deleteRule,
                     ordered: ordered)
    }

    private enum CodingKeys: String, CodingKey {
        case name, destination, cardinality, inverse, isOptional, deleteRule, isOrdered
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        destination = try container.decode(String.self, forKey: .destination)
        cardinality = try container.decode(Cardinality.self, forKey: .cardinality)
        inverse = try container.decodeIfPresent(String.self, forKey: .inverse)
        isOptional = try container.decode(Bool.self, forKey: .isOptional)
        deleteRule = try container.decode(DeleteRule.self, forKey: .deleteRule)
        // Stores written before ordered relationships hold no such key.
        isOrdered = try container.decodeIfPresent(Bool.self, forKey: .isOrdered) ?? false
    }

    /// Writes `isOrdered` only when it is true, so the schema an unordered store holds is the
    /// bytes it always was.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(destination, forKey: .destination)
        try container.encode(cardinality, forKey: .cardinality)
        try container.encodeIfPresent(inverse, forKey: .inverse)
        try container.encode(isOptional, forKey: .isOptional)
        try container.encode(deleteRule, forKey: .deleteRule)
        if isOrdered { try container.encode(true, forKey: .isOrdered) }
    }
}

extension EntitySchema {
    /// The relationship of that name (byte for byte), if any.
    public func relationship(named name: String) -> Relationship? {
        relationships.first { Schema.isName($0.name, name) }
    }
}

extension Schema {
    /// The name of the join entity that stores the pairs of a many-to-many relationship:
    /// `ENTITY_RELATIONSHIP` of whichever of its two sides sorts first (by entity, then
    /// relationship name). The join entity has a uuid key `id`, a to-one `source` to that
    /// side's entity and a to-one `target` to the other side's.
    public static func joinEntityName(_ entity: String, _ relationship: Relationship) -> String {
        let (first, _) = joinSides(entity, relationship)
        return "\(first.entity)_\(first.relationship)"
    }

    /// The two sides of a many-to-many, the one that names its join entity first.
    static func joinSides(_ entity: String, _ relationship: Relationship)
        -> (first: (entity: String, relationship: String), second: (entity: String, relationship: String))
    {
        let this = (entity: entity, relationship: relationship.name)
        let other = (entity: relationship.destination, relationship: relationship.inverse ?? "")
        if (this.entity, this.relationship) <= (other.entity, other.relationship) { return (this, other) }
        return (other, this)
    }

    /// The attribute that holds an item's place in the ordered to-many `relationship` of
    /// `entity`: on the destination's items, `INVERSE_position` (the inverse to-one's name), for
    /// a one-to-many; on the join entity's pairs, `source_position` or `target_position` (the
    /// column that holds the owning item's key), for a many-to-many. An optional int: the items
    /// are in ascending order of it, those without one last, ties in primary-key order.
    public static func positionAttribute(_ entity: String, _ relationship: Relationship,
                                         inverseIsToOne: Bool) -> String {
        guard !inverseIsToOne else { return "\(relationship.inverse ?? "")_position" }
        let (first, _) = joinSides(entity, relationship)
        let isFirst = first.entity == entity && first.relationship == relationship.name
        return isFirst ? "source_position" : "target_position"
    }

    /// The schema as stores hold it: each to-one's attribute and index added where the entity
    /// does not declare them, a join entity for each many-to-many, and the position attribute of
    /// each ordered to-many. Stores resolve the schema they are given, so an app declares
    /// relationships alone; resolving a resolved schema changes nothing.
    /// - Throws: `invalidArgument` or `unknownEntity` naming a relationship that cannot be
    ///   resolved (an unknown destination, an inverse that does not lead back, a rule that
    ///   cannot hold).
    public func resolved() throws(StoreError) -> Schema {
        guard entities.contains(where: { !$0.relationships.isEmpty }) else { return self }
        var entities = self.entities
        var joins: [EntitySchema] = []
        // The position attributes of ordered one-to-manys, added to their destinations last
        // (a destination may come before the entity that orders it).
        var positions: [(entity: String, attribute: String, relationship: String)] = []
        for position in entities.indices {
            var entity = entities[position]
            for relationship in entity.relationships {
                try checkRelationship(relationship, of: entity)
                // An entity whose primary key names no attribute is reported by `validate()`.
                guard let destination = self.entity(named: relationship.destination),
                      destination.attribute(named: destination.primaryKey) != nil,
                      entity.attribute(named: entity.primaryKey) != nil else { continue }
                switch relationship.cardinality {
                case .toOne:
                    try Self.addReference(relationship.name, to: destination, optional: relationship.isOptional,
                                          in: &entity)
                case .toMany:
                    guard let inverse = destination.relationship(named: relationship.inverse ?? "") else { continue }
                    guard inverse.cardinality == .toMany else {
                        if relationship.isOrdered {
                            positions.append((destination.name,
                                              Self.positionAttribute(entity.name, relationship, inverseIsToOne: true),
                                              "\(entity.name).\(relationship.name)"))
                        }
                        continue
                    }
                    let (first, second) = Self.joinSides(entity.name, relationship)
                    guard first.entity == entity.name, first.relationship == relationship.name else { continue }
                    let joinName = "\(first.entity)_\(first.relationship)"
                    if self.entity(named: joinName) != nil { continue }
                    joins.append(try Self.joinEntity(joinName, source: entity, target: destination,
                                                     sourceOrdered: relationship.isOrdered,
                                                     targetOrdered: inverse.isOrdered))
                    _ = second
                }
            }
            entities[position] = entity
        }
        for (name, attribute, relationship) in positions {
            guard let position = entities.firstIndex(where: { $0.name == name }) else { continue }
            try Self.addPosition(attribute, for: relationship, in: &entities[position])
        }
        var resolved = self
        resolved.entities = entities + joins
        return resolved
    }

    /// The join entity of a many-to-many: a uuid key `id`, a required to-one `source` into the
    /// side that names it and `target` into the other, a unique index on the pair and one on
    /// `target`; and `source_position` or `target_position` for a side that is ordered.
    static func joinEntity(_ name: String, source: EntitySchema, target: EntitySchema,
                           sourceOrdered: Bool = false, targetOrdered: Bool = false) throws(StoreError) -> EntitySchema {
        var join = EntitySchema(name, primaryKey: "id", attributes: [Attribute("id", .uuid)],
                                indexes: [Index("pair", on: ["source", "target"], unique: true)],
                                relationships: [.toOne("source", to: source.name, optional: false),
                                                .toOne("target", to: target.name, optional: false)])
        try addReference("source", to: source, optional: false, in: &join)
        try addReference("target", to: target, optional: false, in: &join)
        if sourceOrdered { join.attributes.append(Attribute("source_position", .int, optional: true)) }
        if targetOrdered { join.attributes.append(Attribute("target_position", .int, optional: true)) }
        return join
    }

    /// Adds the optional int that holds the places of an ordered one-to-many's items, or checks
    /// the declared one.
    private static func addPosition(_ name: String, for relationship: String,
                                    in entity: inout EntitySchema) throws(StoreError) {
        if let declared = entity.attribute(named: name) {
            guard declared.type == .int, declared.isOptional else {
                throw StoreError(.invalidArgument, "attribute '\(entity.name).\(name)' holds the places of ordered "
                    + "relationship '\(relationship)', so it must be an optional int, not "
                    + "\(declared.isOptional ? "an optional" : "a required") \(declared.type)")
            }
        } else {
            entity.attributes.append(Attribute(name, .int, optional: true))
        }
    }

    /// Adds the attribute and index that store a to-one reference, or checks the declared ones.
    private static func addReference(_ name: String, to destination: EntitySchema, optional: Bool,
                                     in entity: inout EntitySchema) throws(StoreError) {
        let keyType = destination.primaryKeyType
        if let declared = entity.attribute(named: name) {
            guard declared.type == keyType, declared.isOptional == optional else {
                throw StoreError(.invalidArgument, "attribute '\(entity.name).\(name)' holds the to-one relationship "
                    + "'\(name)', so it must be \(optional ? "an optional" : "a required") \(keyType) (the key of "
                    + "'\(destination.name)'), not \(declared.isOptional ? "an optional" : "a required") \(declared.type)")
            }
        } else {
            entity.attributes.append(Attribute(name, keyType, optional: optional))
        }
        if !entity.indexes.contains(where: { $0.attributes.first == name }) {
            guard !entity.indexes.contains(where: { $0.name == name }) else {
                throw StoreError(.invalidArgument, "index '\(entity.name).\(name)' must be on '\(name)': a to-one "
                    + "relationship's index takes its name")
            }
            entity.indexes.append(Index(name, on: [name]))
        }
    }

    /// Checks one relationship of `entity` against the rest of the schema.
    private func checkRelationship(_ relationship: Relationship, of entity: EntitySchema) throws(StoreError) {
        let label = "relationship '\(entity.name).\(relationship.name)'"
        try Schema.checkName(relationship.name, what: "relationship")
        guard let destination = self.entity(named: relationship.destination) else {
            throw StoreError(.unknownEntity, "\(label) leads to entity '\(relationship.destination)', which is not "
                + "in the schema")
        }
        if entity.relationships.filter({ $0.name == relationship.name }).count > 1 {
            throw StoreError(.invalidArgument, "\(label) is declared twice")
        }
        if relationship.isOrdered, relationship.cardinality == .toOne {
            throw StoreError(.invalidArgument, "\(label) is to-one and ordered: only a to-many keeps an order")
        }
        if relationship.cardinality == .toMany, entity.attribute(named: relationship.name) != nil {
            throw StoreError(.invalidArgument, "\(label) is to-many, but '\(entity.name)' has an attribute of the same name")
        }
        guard let inverseName = relationship.inverse else {
            guard relationship.cardinality == .toOne else {
                throw StoreError(.invalidArgument, "\(label) is to-many and names no inverse: a to-many is the other "
                    + "side of a relationship of '\(destination.name)'")
            }
            return
        }
        guard let inverse = destination.relationship(named: inverseName) else {
            throw StoreError(.invalidArgument, "\(label) names inverse '\(destination.name).\(inverseName)', which "
                + "'\(destination.name)' does not declare")
        }
        guard inverse.destination == entity.name, inverse.inverse == relationship.name else {
            throw StoreError(.invalidArgument, "\(label) names inverse '\(destination.name).\(inverseName)', which "
                + "leads back to '\(inverse.destination).\(inverse.inverse ?? "(no inverse)")' instead of "
                + "'\(entity.name).\(relationship.name)'")
        }
        if relationship.cardinality == .toOne, inverse.cardinality == .toOne {
            throw StoreError(.invalidArgument, "\(label) and its inverse are both to-one: declare the side that holds "
                + "the reference as to-one and the other as to-many (a unique index on the to-one makes it one-to-one)")
        }
        if relationship.isOrdered, inverse.cardinality == .toOne {
            let position = Schema.positionAttribute(entity.name, relationship, inverseIsToOne: true)
            guard position.utf8.count <= Limits.maxNameLength else {
                throw StoreError(.limitExceeded, "\(label) is ordered and its items' places would be kept in "
                    + "'\(destination.name).\(position)', over \(Limits.maxNameLength) characters: shorten the "
                    + "inverse's name")
            }
        }
        if relationship.cardinality == .toMany, inverse.cardinality == .toOne, !inverse.isOptional,
           relationship.deleteRule == .nullify {
            throw StoreError(.invalidArgument, "\(label) has the delete rule nullify, but its inverse "
                + "'\(destination.name).\(inverseName)' is required and cannot be set to null: make the rule cascade "
                + "or deny, or the inverse optional")
        }
        if relationship.cardinality == .toMany, inverse.cardinality == .toMany {
            guard inverse.name != relationship.name || destination.name != entity.name else {
                throw StoreError(.invalidArgument, "\(label) is many-to-many and its own inverse: declare two "
                    + "relationships, each the other's inverse (follows and followers)")
            }
            let join = Schema.joinEntityName(entity.name, relationship)
            guard join.utf8.count <= Limits.maxNameLength else {
                throw StoreError(.limitExceeded, "\(label) is many-to-many and its join entity would be named "
                    + "'\(join)', over \(Limits.maxNameLength) characters: shorten the entity or relationship name")
            }
        }
    }
}

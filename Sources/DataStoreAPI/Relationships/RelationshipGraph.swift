/// The relationships of a resolved schema, arranged for the questions a write asks: which
/// references an item of an entity holds, and what deleting one of its items does.
@_spi(Backend) public struct RelationshipGraph: Sendable {
    /// A to-one reference an entity's items hold: the attribute (named as the relationship) and
    /// the entity whose key it holds.
    public struct Reference: Sendable {
        public var relationship: Relationship
        public var attribute: String
        public var destination: String
    }

    /// What deleting an item of an entity does through one relationship.
    public enum Effect: Sendable {
        /// Items of `source` whose `attribute` holds the deleted key: set to null, deleted, or
        /// the delete refused, as `rule` says.
        case referrers(source: String, attribute: String, rule: Relationship.DeleteRule, relationship: String)
        /// Pairs of a many-to-many's join entity whose `column` holds the deleted key: removed
        /// (nullify), removed with the item at their `otherColumn` (cascade), or the delete
        /// refused (deny).
        case pairs(join: String, column: String, otherColumn: String, other: String,
                   rule: Relationship.DeleteRule, relationship: String)
        /// The item the deleted one referred to through `attribute`: deleted too (cascade) or
        /// the delete refused (deny).
        case referent(attribute: String, destination: String, rule: Relationship.DeleteRule, relationship: String)
    }

    /// The to-one references each entity's items hold.
    public private(set) var references: [String: [Reference]] = [:]
    /// What deleting an item of each entity does.
    public private(set) var effects: [String: [Effect]] = [:]
    /// The join entities, by name, with the relationship each side sees them through.
    public private(set) var joins: [String: (source: (entity: String, relationship: String),
                                             target: (entity: String, relationship: String))] = [:]
    /// To-many relationships by entity and name: how to find an item's related items.
    public private(set) var toMany: [String: [String: ToMany]] = [:]
    /// The position attribute of each ordered to-many, by entity and relationship name: an
    /// attribute of the destination (one-to-many) or of the join entity (many-to-many).
    public private(set) var positions: [String: [String: String]] = [:]
    /// For an entity whose to-one is the inverse of an ordered to-many, the position attribute
    /// that goes with the to-one's attribute: cleared when the reference is.
    public private(set) var referencePositions: [String: [String: String]] = [:]

    /// How the items of a to-many relationship are found.
    public enum ToMany: Sendable {
        /// The items of `source` whose `attribute` holds the key.
        case referrers(source: String, attribute: String)
        /// The items of `other` paired with the key in `join` (`column` holds the key).
        case pairs(join: String, column: String, otherColumn: String, other: String)
    }

    /// Whether the schema has relationships at all.
    public var isEmpty: Bool { references.isEmpty }

    public init(_ schema: Schema) {
        for entity in schema.entities {
            for relationship in entity.relationships {
                switch relationship.cardinality {
                case .toOne:
                    references[entity.name, default: []].append(
                        Reference(relationship: relationship, attribute: relationship.name,
                                  destination: relationship.destination))
                    if relationship.deleteRule != .nullify {
                        effects[entity.name, default: []].append(
                            .referent(attribute: relationship.name, destination: relationship.destination,
                                      rule: relationship.deleteRule, relationship: relationship.name))
                    }
                case .toMany:
                    guard let inverseName = relationship.inverse,
                          let inverse = schema.entity(named: relationship.destination)?.relationship(named: inverseName)
                    else { continue }
                    if relationship.isOrdered {
                        let position = Schema.positionAttribute(entity.name, relationship,
                                                                inverseIsToOne: inverse.cardinality == .toOne)
                        positions[entity.name, default: [:]][relationship.name] = position
                        if inverse.cardinality == .toOne {
                            referencePositions[relationship.destination, default: [:]][inverseName] = position
                        }
                    }
                    if inverse.cardinality == .toOne {
                        toMany[entity.name, default: [:]][relationship.name] =
                            .referrers(source: relationship.destination, attribute: inverseName)
                        effects[entity.name, default: []].append(
                            .referrers(source: relationship.destination, attribute: inverseName,
                                       rule: relationship.deleteRule, relationship: relationship.name))
                    } else {
                        let (first, second) = Schema.joinSides(entity.name, relationship)
                        let join = "\(first.entity)_\(first.relationship)"
                        let isFirst = first.entity == entity.name && first.relationship == relationship.name
                        let (column, otherColumn) = isFirst ? ("source", "target") : ("target", "source")
                        joins[join] = (first, second)
                        toMany[entity.name, default: [:]][relationship.name] =
                            .pairs(join: join, column: column, otherColumn: otherColumn, other: relationship.destination)
                        effects[entity.name, default: []].append(
                            .pairs(join: join, column: column, otherColumn: otherColumn, other: relationship.destination,
                                   rule: relationship.deleteRule, relationship: relationship.name))
                    }
                }
            }
        }
        // A to-one without an inverse protects its target as `deny` does: deleting an item
        // still referred to would leave the reference dangling.
        for entity in schema.entities {
            for relationship in entity.relationships where relationship.cardinality == .toOne
                && relationship.inverse == nil && joins[entity.name] == nil {
                effects[relationship.destination, default: []].append(
                    .referrers(source: entity.name, attribute: relationship.name, rule: .deny,
                               relationship: "\(entity.name).\(relationship.name)"))
            }
        }
    }
}

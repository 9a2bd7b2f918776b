/// One declarative change of a schema, from one version to the next.
///
/// Steps are `Codable`, so a plan can be stored, printed and applied from the command line
/// (`migrate-store upgrade STORE --plan plan.json`). Each step names what it changes; applying
/// it to a schema that does not have what it names fails with an error naming the step.
///
/// The primary key of an entity can be renamed (``renameAttribute(entity:from:to:)``) but not
/// removed, retyped or replaced by another attribute: a change of key is a new entity, filled
/// by a ``UpgradeStep/custom(_:_:)`` step from the old one.
public enum SchemaStep: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Adds an empty entity.
    case addEntity(EntitySchema)
    /// Removes an entity and every item it holds.
    case removeEntity(String)
    /// Renames an entity; its items and indexes follow.
    case renameEntity(from: String, to: String)
    /// Adds an attribute: optional (existing items hold null, or the default when it has one)
    /// or required with a default (existing items take the default).
    case addAttribute(entity: String, attribute: Attribute)
    /// Removes an attribute and its values; indexes over it must be removed first.
    case removeAttribute(entity: String, name: String)
    /// Renames an attribute; values and indexes follow.
    case renameAttribute(entity: String, from: String, to: String)
    /// Changes an attribute's type with the conversion ``ValueConversion`` defines (and, when
    /// `optional` is given, whether it may be null). A value that does not convert fails the
    /// migration naming the item and the value.
    case changeType(entity: String, attribute: String, to: ValueType, optional: Bool? = nil)
    /// Adds an index, unique or not; existing duplicates under a new unique index fail the
    /// migration with `uniqueViolation` listing the conflicting items.
    case addIndex(entity: String, index: Index)
    /// Removes an index.
    case removeIndex(entity: String, name: String)
    /// Adds a relationship, and its inverse on the destination when given (a to-many always
    /// needs one). A required to-one needs `defaultTarget`, the key every existing item then
    /// refers to; a step that would leave a reference dangling fails naming it, and changes
    /// nothing.
    case addRelationship(entity: String, relationship: Relationship, inverse: Relationship? = nil,
                         defaultTarget: Value? = nil)
    /// Removes a relationship and its inverse, with what stores them (a to-one's attribute and
    /// index, a many-to-many's join entity and its pairs).
    case removeRelationship(entity: String, name: String)
    /// Changes a relationship's delete rule.
    case changeDeleteRule(entity: String, relationship: String, to: Relationship.DeleteRule)

    public var description: String {
        switch self {
        case .addEntity(let entity): return "add entity \(entity.name)"
        case .removeEntity(let name): return "remove entity \(name)"
        case let .renameEntity(from, to): return "rename entity \(from) to \(to)"
        case let .addAttribute(entity, attribute):
            let how = attribute.defaultValue.map { "default \($0)" } ?? (attribute.isOptional ? "optional" : "required")
            return "add attribute \(entity).\(attribute.name) (\(attribute.type), \(how))"
        case let .removeAttribute(entity, name): return "remove attribute \(entity).\(name)"
        case let .renameAttribute(entity, from, to): return "rename attribute \(entity).\(from) to \(to)"
        case let .changeType(entity, attribute, type, optional):
            let how = optional.map { $0 ? ", optional" : ", required" } ?? ""
            return "change type of \(entity).\(attribute) to \(type)\(how)"
        case let .addIndex(entity, index):
            return "add \(index.isUnique ? "unique " : "")index \(entity).\(index.name) on "
                + index.attributes.joined(separator: ", ")
        case let .removeIndex(entity, name): return "remove index \(entity).\(name)"
        case let .addRelationship(entity, relationship, inverse, _):
            return "add relationship \(entity).\(relationship.name) (\(relationship.cardinality) \(relationship.destination)"
                + (inverse.map { ", inverse \($0.name)" } ?? "") + ")"
        case let .removeRelationship(entity, name): return "remove relationship \(entity).\(name)"
        case let .changeDeleteRule(entity, relationship, rule):
            return "change delete rule of \(entity).\(relationship) to \(rule)"
        }
    }

    /// The entity the step changes (for ``renameEntity(from:to:)``, its old name).
    public var entityName: String {
        switch self {
        case .addEntity(let entity): return entity.name
        case .removeEntity(let name), .renameEntity(let name, _): return name
        case .addAttribute(let entity, _), .removeAttribute(let entity, _), .renameAttribute(let entity, _, _),
             .changeType(let entity, _, _, _), .addIndex(let entity, _), .removeIndex(let entity, _),
             .addRelationship(let entity, _, _, _), .removeRelationship(let entity, _), .changeDeleteRule(let entity, _, _):
            return entity
        }
    }
}

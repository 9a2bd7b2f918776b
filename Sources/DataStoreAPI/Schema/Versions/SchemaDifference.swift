/// A difference between the schema a store holds and the one an app opens it with, in words,
/// with the step that would account for it.
public struct SchemaDifference: Sendable, Hashable, CustomStringConvertible {
    /// What differs, naming the entity and attribute or index (`attribute 'Pancake.rating'
    /// changed type from int to double`).
    public var summary: String
    /// The declarative step that would account for it, when one exists.
    public var fix: SchemaStep?
    /// What to do when no declarative step can (a changed primary key).
    public var advice: String?

    public var description: String {
        if let fix { return "\(summary) (step: \(fix))" }
        if let advice { return "\(summary) (\(advice))" }
        return summary
    }

    /// The differences between `stored` and `requested`, ignoring their version numbers and
    /// the order of entities, attributes and indexes; empty when they hold the same things.
    public static func between(stored: Schema, requested: Schema) -> [SchemaDifference] {
        var result: [SchemaDifference] = []
        for entity in stored.entities where requested.entity(named: entity.name) == nil {
            result.append(SchemaDifference(
                summary: "entity '\(entity.name)' was removed, with its items",
                fix: .removeEntity(entity.name),
                advice: nil))
        }
        for entity in requested.entities {
            guard let old = stored.entity(named: entity.name) else {
                result.append(SchemaDifference(summary: "entity '\(entity.name)' is new", fix: .addEntity(entity),
                                               advice: nil))
                continue
            }
            result += between(old, entity)
        }
        return result
    }

    static func between(_ old: EntitySchema, _ new: EntitySchema) -> [SchemaDifference] {
        let name = new.name
        var result: [SchemaDifference] = []
        if old.primaryKey != new.primaryKey || old.primaryKeyAttribute.type != new.primaryKeyAttribute.type {
            return [SchemaDifference(
                summary: "the primary key of '\(name)' changed from \(old.primaryKey) (\(old.primaryKeyAttribute.type)) "
                    + "to \(new.primaryKey) (\(new.primaryKeyAttribute.type))",
                fix: nil,
                advice: "a primary key cannot change: add a new entity and fill it with a custom step")]
        }
        for attribute in old.attributes where new.attribute(named: attribute.name) == nil {
            result.append(SchemaDifference(
                summary: "attribute '\(name).\(attribute.name)' was removed, with its values",
                fix: .removeAttribute(entity: name, name: attribute.name), advice: nil))
        }
        for attribute in new.attributes {
            guard let before = old.attribute(named: attribute.name) else {
                let addable = attribute.isOptional || attribute.defaultValue.map { !$0.isNull } == true
                result.append(SchemaDifference(
                    summary: "attribute '\(name).\(attribute.name)' is new",
                    fix: addable ? .addAttribute(entity: name, attribute: attribute) : nil,
                    advice: addable ? nil : "a new required attribute needs a default for the existing items"))
                continue
            }
            if before.type != attribute.type || before.isOptional != attribute.isOptional {
                var changes: [String] = []
                if before.type != attribute.type { changes.append("type from \(before.type) to \(attribute.type)") }
                if before.isOptional != attribute.isOptional {
                    changes.append(attribute.isOptional ? "from required to optional" : "from optional to required")
                }
                let defined = ValueConversion.isDefined(from: before.type, to: attribute.type)
                result.append(SchemaDifference(
                    summary: "attribute '\(name).\(attribute.name)' changed \(changes.joined(separator: " and "))",
                    fix: defined ? .changeType(entity: name, attribute: attribute.name, to: attribute.type,
                                               optional: before.isOptional != attribute.isOptional
                                                   ? attribute.isOptional : nil) : nil,
                    advice: defined ? nil : "no conversion from \(before.type) to \(attribute.type); use a custom step"))
            } else if before.defaultValue != attribute.defaultValue {
                result.append(SchemaDifference(
                    summary: "attribute '\(name).\(attribute.name)' changed its default from "
                        + "\(before.defaultValue.map { "\($0)" } ?? "none") to "
                        + "\(attribute.defaultValue.map { "\($0)" } ?? "none")",
                    fix: nil,
                    advice: "a default applies to new writes only: give the schema a new version number"))
            }
        }
        for index in old.indexes where !new.indexes.contains(index) {
            result.append(SchemaDifference(
                summary: "\(index.isUnique ? "unique " : "")index '\(name).\(index.name)' was removed or changed",
                fix: .removeIndex(entity: name, name: index.name), advice: nil))
        }
        for index in new.indexes where !old.indexes.contains(index) {
            result.append(SchemaDifference(
                summary: "\(index.isUnique ? "unique " : "")index '\(name).\(index.name)' on "
                    + "\(index.attributes.joined(separator: ", ")) is new",
                fix: .addIndex(entity: name, index: index), advice: nil))
        }
        return result
    }

    /// One line listing `differences`, for errors.
    static func list(_ differences: [SchemaDifference]) -> String {
        differences.map(\.description).joined(separator: "; ")
    }
}

extension DataObject {
    /// The differences between the entity this type derives (or declares) and the one `store`
    /// holds, in the words and with the steps a failed open names; empty when they match.
    public static func schemaDifferences(in store: any DataStore) throws -> [SchemaDifference] {
        var mine = try entitySchema()
        // With its relationships' attributes and indexes, as the store resolved them.
        var schema = store.schema
        schema.entities.removeAll { $0.name == mine.name }
        schema.entities.append(mine)
        mine = try schema.resolved().entity(named: mine.name) ?? mine
        guard let stored = store.schema.entity(named: mine.name) else {
            return [SchemaDifference(summary: "entity '\(mine.name)' is new", fix: .addEntity(mine), advice: nil)]
        }
        return SchemaDifference.between(stored, mine)
    }
}

/// Applies migration steps to a schema, checking each, and records the storage actions they
/// need; nothing touches a store.
struct Planner {
    var schema: Schema
    let location: String
    private(set) var actions: [SchemaUpgrader.Action] = []

    init(schema: Schema, location: String) {
        self.schema = schema
        self.location = location
    }

    private func entity(_ name: String, _ step: any CustomStringConvertible) throws(StoreError) -> EntitySchema {
        guard let entity = schema.entity(named: name) else {
            throw StoreError(.unknownEntity, "step '\(step)': the schema has no entity '\(name)'")
        }
        return entity
    }

    private func attribute(_ entity: EntitySchema, _ name: String, _ step: any CustomStringConvertible)
        throws(StoreError) -> Attribute
    {
        guard let attribute = entity.attribute(named: name) else {
            throw StoreError(.unknownAttribute, "step '\(step)': entity '\(entity.name)' has no attribute '\(name)'")
        }
        return attribute
    }

    private mutating func replace(_ entity: EntitySchema, with new: EntitySchema?) {
        if let i = schema.entities.firstIndex(where: { $0.name == entity.name }) {
            if let new { schema.entities[i] = new } else { schema.entities.remove(at: i) }
        }
    }

    private mutating func record(_ kind: SchemaUpgrader.Action.Kind, _ step: any CustomStringConvertible, version: Int,
                                 inHistory: Bool = true) throws {
        do {
            try schema.validate()
        } catch let error {
            throw StoreError(error.code, "step '\(step)' of version \(version) leaves an invalid schema: \(error.message)")
        }
        actions.append(SchemaUpgrader.Action(version: version, description: step.description,
                                             historyLines: inHistory ? [step.description] : [], kind: kind))
    }

    /// Renames each many-to-many's join entity whose name no longer derives from the names of
    /// its two sides (after one of them was renamed); when the renamed side now sorts second,
    /// the pairs' two columns are swapped as well.
    private mutating func renameJoinEntities(_ step: any CustomStringConvertible, version: Int) throws {
        let derived = Set(schema.entities.flatMap { entity in
            entity.relationships.filter { $0.cardinality == .toMany }.map { Schema.joinEntityName(entity.name, $0) }
        })
        for entity in schema.entities {
            for relationship in entity.relationships where relationship.cardinality == .toMany {
                guard let other = schema.entity(named: relationship.destination),
                      let inverse = other.relationship(named: relationship.inverse ?? ""),
                      inverse.cardinality == .toMany else { continue }
                let (first, second) = Schema.joinSides(entity.name, relationship)
                let name = "\(first.entity)_\(first.relationship)"
                let sides = Set([first.entity, second.entity])
                guard schema.entity(named: name) == nil, let stale = schema.entities.first(where: { join in
                    !derived.contains(join.name) && join.attributes.map(\.name) == ["id", "source", "target"]
                        && Set([join.relationship(named: "source")?.destination ?? "",
                                join.relationship(named: "target")?.destination ?? ""]) == sides
                }) else { continue }
                var renamed = stale
                renamed.name = name
                replace(stale, with: renamed)
                let label = "\(step) (its join entity \(stale.name) to \(name))"
                try record(.rename(stale, renamed), label, version: version, inHistory: false)
                guard renamed.relationship(named: "source")?.destination != first.entity,
                      let firstEntity = schema.entity(named: first.entity), let secondEntity = schema.entity(named: second.entity)
                else { continue }
                let swapped = try Schema.joinEntity(name, source: firstEntity, target: secondEntity)
                replace(renamed, with: swapped)
                let transform: (Record) throws -> Record? = { pair in
                    ["id": pair["id"], "source": pair["target"], "target": pair["source"]]
                }
                try record(.change(old: renamed, new: swapped, renamed: [:], transform: transform, conversion: nil,
                                   checkUnique: []), label, version: version, inHistory: false)
            }
        }
    }

    /// Adds a relationship (and its inverse): the entities' relationships change, a to-one's
    /// attribute and index are added (filled with `defaultTarget` when it is required), and a
    /// many-to-many's join entity is created.
    private mutating func addRelationship(_ name: String, _ relationship: Relationship, _ inverse: Relationship?,
                                          _ defaultTarget: Value?, _ step: SchemaStep, version: Int) throws {
        let old = try entity(name, step)
        guard old.relationship(named: relationship.name) == nil, old.attribute(named: relationship.name) == nil else {
            throw StoreError(.invalidArgument, "step '\(step)': entity '\(name)' already has '\(relationship.name)'")
        }
        var declared = schema
        let position = declared.entities.firstIndex { $0.name == name }!
        declared.entities[position].relationships.append(relationship)
        if let inverse {
            guard let other = declared.entities.firstIndex(where: { $0.name == relationship.destination }) else {
                throw StoreError(.unknownEntity, "step '\(step)': the schema has no entity '\(relationship.destination)'")
            }
            declared.entities[other].relationships.append(inverse)
        }
        let resolved: Schema
        do {
            resolved = try declared.resolved()
        } catch let error {
            throw StoreError(error.code, "step '\(step)' of version \(version): \(error.message)")
        }
        // Every entity the step changes is replaced first (the schema is valid only with both
        // sides), then each change is recorded.
        var changes: [(EntitySchema, EntitySchema, ((Record) throws -> Record?)?)] = []
        for entity in schema.entities {
            guard let new = resolved.entity(named: entity.name), new != entity else { continue }
            let added = new.attributes.filter { entity.attribute(named: $0.name) == nil }
            var transform: ((Record) throws -> Record?)?
            if let required = added.first(where: { !$0.isOptional }) {
                guard let defaultTarget else {
                    throw StoreError(.invalidArgument, "step '\(step)': the to-one '\(new.name).\(required.name)' is "
                        + "required, so the existing items need a default target (defaultTarget), or add it optional "
                        + "and fill it in a custom step")
                }
                let target = try new.checkValue(defaultTarget, for: required)
                transform = { record in
                    var record = record
                    record[required.name] = target
                    return record
                }
            }
            changes.append((entity, new, transform))
        }
        let joins = resolved.entities.filter { schema.entity(named: $0.name) == nil }
        for (entity, new, _) in changes { replace(entity, with: new) }
        schema.entities += joins
        for (position, (entity, new, transform)) in changes.enumerated() {
            try record(.change(old: entity, new: new, renamed: [:], transform: transform, conversion: nil,
                               checkUnique: []), step, version: version, inHistory: position == 0)
        }
        for join in joins { try record(.create(join), step, version: version, inHistory: false) }
    }

    /// Removes a relationship and its inverse, with the attribute, index or join entity that
    /// stored them.
    private mutating func removeRelationship(_ name: String, _ relationshipName: String, _ step: SchemaStep,
                                             version: Int) throws {
        let old = try entity(name, step)
        guard let relationship = old.relationship(named: relationshipName) else {
            throw StoreError(.invalidArgument, "step '\(step)': entity '\(name)' has no relationship '\(relationshipName)'")
        }
        let inverse = relationship.inverse.flatMap { schema.entity(named: relationship.destination)?.relationship(named: $0) }
        if relationship.cardinality == .toMany, inverse?.cardinality == .toMany,
           let join = schema.entity(named: Schema.joinEntityName(name, relationship)) {
            replace(join, with: nil)
            try record(.drop(join), step, version: version, inHistory: false)
        }
        // The sides: this entity's relationship, and the destination's inverse; both go before
        // either change is recorded (the schema is valid only with both or neither).
        var sides = [(name, relationshipName)]
        if let inverse { sides.append((relationship.destination, inverse.name)) }
        // An ordered one-to-many's places, on the side of its to-one.
        let sidesRelationships = [relationship] + (inverse.map { [$0] } ?? [])
        let ordered = sidesRelationships.first { $0.cardinality == .toMany && $0.isOrdered }
        let toOneSide = sidesRelationships.first { $0.cardinality == .toOne }
        var changes: [(EntitySchema, EntitySchema)] = []
        for (entityName, side) in sides {
            let before = try entity(entityName, step)
            guard let removed = before.relationship(named: side) else { continue }
            var new = before
            new.relationships.removeAll { $0.name == side }
            if removed.cardinality == .toOne {
                new.attributes.removeAll { $0.name == side }
                new.indexes.removeAll { $0.attributes.contains(side) }
                if let ordered, let toOneSide, toOneSide.name == side {
                    let position = Schema.positionAttribute(ordered.destination, ordered, inverseIsToOne: true)
                    new.attributes.removeAll { $0.name == position }
                }
            }
            replace(before, with: new)
            changes.append((before, new))
        }
        for (position, (before, new)) in changes.enumerated() {
            try record(.change(old: before, new: new, renamed: [:], transform: nil, conversion: nil, checkUnique: []),
                       step, version: version, inHistory: position == 0)
        }
    }

    mutating func add(_ step: UpgradeStep, version: Int) throws {
        switch step {
        case .step(let step):
            try add(step, version: version)
        case let .transformItems(name, to, _, transform):
            let old = try entity(name, step)
            let new = to ?? old
            guard new.name == old.name, new.primaryKey == old.primaryKey,
                  new.primaryKeyAttribute.type == old.primaryKeyAttribute.type else {
                throw StoreError(.invalidArgument, "step '\(step)': the entity must keep its name and primary key")
            }
            replace(old, with: new)
            let checked: (Record) throws -> Record? = { record in
                let key = record[old.primaryKey]
                guard let result = try transform(record) else { return nil }
                let normalized: Record
                do {
                    normalized = try new.normalize(result)
                } catch let error as StoreError {
                    throw StoreError(error.code, "step '\(step)': the record returned for \(name)[\(key)] does not "
                        + "fit: \(error.message)")
                }
                guard normalized[new.primaryKey] == key else {
                    throw StoreError(.invalidArgument, "step '\(step)': the record returned for \(name)[\(key)] has "
                        + "key \(normalized[new.primaryKey]); a step may not change an item's key")
                }
                return normalized
            }
            try record(.change(old: old, new: new, renamed: [:], transform: checked, conversion: nil,
                               checkUnique: new.indexes.filter(\.isUnique)), step, version: version)
        case .custom(_, let body):
            try record(.custom(schema, body), step, version: version)
        }
    }

    mutating func add(_ step: SchemaStep, version: Int) throws {
        switch step {
        case .addEntity(let entity):
            guard schema.entities.allSatisfy({ Schema.foldedName($0.name) != Schema.foldedName(entity.name) }) else {
                throw StoreError(.invalidArgument, "step '\(step)': entity '\(entity.name)' already exists")
            }
            schema.entities.append(entity)
            try record(.create(entity), step, version: version)
        case .removeEntity(let name):
            let old = try entity(name, step)
            replace(old, with: nil)
            try record(.drop(old), step, version: version)
        case let .renameEntity(from, to):
            let old = try entity(from, step)
            var renamed = old
            renamed.name = to
            replace(old, with: renamed)
            // Relationships follow the entity, and so do the join entities named after it.
            for position in schema.entities.indices {
                for r in schema.entities[position].relationships.indices
                where schema.entities[position].relationships[r].destination == from {
                    schema.entities[position].relationships[r].destination = to
                }
            }
            try record(.rename(old, renamed), step, version: version)
            try renameJoinEntities(step, version: version)
        case let .addAttribute(name, attribute):
            let old = try entity(name, step)
            guard attribute.isOptional || attribute.defaultValue.map({ !$0.isNull }) == true else {
                throw StoreError(.invalidArgument, "step '\(step)': a required attribute needs a default for the "
                    + "existing items")
            }
            var new = old
            new.attributes.append(attribute)
            try change(old, new, step, version: version)
        case let .removeAttribute(name, attributeName):
            let old = try entity(name, step)
            _ = try attribute(old, attributeName, step)
            guard attributeName != old.primaryKey else {
                throw StoreError(.invalidArgument, "step '\(step)': the primary key cannot be removed")
            }
            if let index = old.indexes.first(where: { $0.attributes.contains(attributeName) }) {
                throw StoreError(.invalidArgument, "step '\(step)': index '\(name).\(index.name)' covers the "
                    + "attribute; remove the index first")
            }
            var new = old
            new.attributes.removeAll { $0.name == attributeName }
            try change(old, new, step, version: version)
        case let .renameAttribute(name, from, to):
            let old = try entity(name, step)
            _ = try attribute(old, from, step)
            var new = old
            new.attributes = old.attributes.map { var a = $0; if a.name == from { a.name = to }; return a }
            if old.primaryKey == from { new.primaryKey = to }
            new.indexes = old.indexes.map { Index($0.name, on: $0.attributes.map { $0 == from ? to : $0 },
                                                   unique: $0.isUnique) }
            try change(old, new, step, version: version, renamed: [from: to])
        case let .changeType(name, attributeName, type, optional):
            let old = try entity(name, step)
            let before = try attribute(old, attributeName, step)
            guard attributeName != old.primaryKey else {
                throw StoreError(.invalidArgument, "step '\(step)': the primary key's type cannot change; add a new "
                    + "entity and fill it with a custom step")
            }
            guard ValueConversion.isDefined(from: before.type, to: type) else {
                throw StoreError(.invalidArgument, "step '\(step)': there is no conversion from \(before.type) "
                    + "to \(type)")
            }
            var after = before
            after.type = type
            after.isOptional = optional ?? before.isOptional
            if let value = before.defaultValue {
                guard let converted = ValueConversion.convert(value, to: type) else {
                    throw StoreError(.invalidValue, "step '\(step)': the default \(value) does not convert to \(type)")
                }
                after.defaultValue = converted
            }
            var new = old
            new.attributes = old.attributes.map { $0.name == attributeName ? after : $0 }
            let location = self.location
            let i = old.attributes.firstIndex { $0.name == attributeName }!
            let conversion = AttributeConversion(position: i) { value, key in
                guard let result = ValueConversion.convert(value, to: type) else {
                    throw StoreError(.invalidValue, "\(location): step '\(step)': \(name)[\(key())]"
                        + ".\(attributeName) holds \(value), which does not convert to \(type)")
                }
                if result.isNull && !after.isOptional {
                    throw StoreError(.invalidValue, "\(location): step '\(step)': \(name)[\(key())]"
                        + ".\(attributeName) is null, but the attribute becomes required")
                }
                return result
            }
            let converted: (Record) throws -> Record? = { record in
                var values = record.values(in: old.layout)
                values[i] = try conversion.convert(values[i], { record[old.primaryKey] })
                return Record(layout: new.layout, values: values)
            }
            let affected = new.indexes.filter { $0.isUnique && $0.attributes.contains(attributeName) }
            try change(old, new, step, version: version, transform: converted, conversion: conversion,
                       checkUnique: affected)
        case let .addRelationship(name, relationship, inverse, defaultTarget):
            try addRelationship(name, relationship, inverse, defaultTarget, step, version: version)
        case let .removeRelationship(name, relationshipName):
            try removeRelationship(name, relationshipName, step, version: version)
        case let .changeDeleteRule(name, relationshipName, rule):
            let old = try entity(name, step)
            guard let position = old.relationships.firstIndex(where: { $0.name == relationshipName }) else {
                throw StoreError(.invalidArgument, "step '\(step)': entity '\(name)' has no relationship '\(relationshipName)'")
            }
            var new = old
            new.relationships[position].deleteRule = rule
            try change(old, new, step, version: version)
        case let .addIndex(name, index):
            let old = try entity(name, step)
            var new = old
            new.indexes.append(index)
            try change(old, new, step, version: version, checkUnique: index.isUnique ? [index] : [])
        case let .removeIndex(name, indexName):
            let old = try entity(name, step)
            guard old.indexes.contains(where: { $0.name == indexName }) else {
                throw StoreError(.invalidArgument, "step '\(step)': entity '\(name)' has no index '\(indexName)'")
            }
            var new = old
            new.indexes.removeAll { $0.name == indexName }
            try change(old, new, step, version: version)
        }
    }

    private mutating func change(_ old: EntitySchema, _ new: EntitySchema, _ step: SchemaStep, version: Int,
                                 renamed: [String: String] = [:], transform: ((Record) throws -> Record?)? = nil,
                                 conversion: AttributeConversion? = nil, checkUnique: [Index] = []) throws {
        replace(old, with: new)
        try record(.change(old: old, new: new, renamed: renamed, transform: transform, conversion: conversion,
                           checkUnique: checkUnique),
                   step, version: version)
    }

    /// Brings the planned schema to the app's exact form: the same entities, attributes and
    /// indexes may be listed in another order, which changes the record layout of an entity
    /// whose attributes moved.
    mutating func finish(at requested: Schema) {
        for entity in requested.entities {
            guard let planned = schema.entity(named: entity.name), planned != entity else { continue }
            actions.append(SchemaUpgrader.Action(
                version: requested.version, description: "order the attributes and indexes of \(entity.name)",
                historyLines: [],
                kind: .change(old: planned, new: entity, renamed: [:], transform: nil, conversion: nil,
                              checkUnique: [])))
        }
        schema = requested
        actions = Self.merged(actions)
    }

    /// Consecutive changes of one entity, one of which rewrites every item anyway, become one
    /// change whose items pass through each step in turn: one pass over the items (and one index
    /// build) instead of one per step. Changes that need no rewrite stay apart, so that an engine
    /// can still make them in place.
    static func merged(_ actions: [SchemaUpgrader.Action]) -> [SchemaUpgrader.Action] {
        var result: [SchemaUpgrader.Action] = []
        for action in actions {
            guard case let .change(old2, new2, renamed2, transform2, _, unique2) = action.kind,
                  let last = result.last,
                  case let .change(old1, new1, renamed1, transform1, _, unique1) = last.kind,
                  new1.name == old2.name, transform1 != nil || transform2 != nil
            else {
                result.append(action)
                continue
            }
            let first = EntityChange(old: old1, new: new1, renamedAttributes: renamed1, transform: transform1,
                                     visited: { _ in })
            let second = EntityChange(old: old2, new: new2, renamedAttributes: renamed2, transform: transform2,
                                      visited: { _ in })
            let composed: (Record) throws -> Record? = { record in
                guard let middle = try first.newRecord(from: record) else { return nil }
                return try second.newRecord(from: middle)
            }
            // A unique index checked by the first change may be renamed or changed by the second:
            // check every unique index of the result that either change had to check.
            let checked = Set((unique1 + unique2).map(\.name))
            result[result.count - 1] = SchemaUpgrader.Action(
                version: action.version, description: last.description + "; " + action.description,
                historyLines: last.historyLines + action.historyLines,
                kind: .change(old: old1, new: new2, renamed: [:], transform: composed, conversion: nil,
                              checkUnique: new2.indexes.filter { $0.isUnique && checked.contains($0.name) }))
        }
        return result
    }
}

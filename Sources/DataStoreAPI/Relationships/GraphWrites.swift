import Foundation

extension WriteAccessor {
    /// Relates the item `key` of `entityName` to the item `target` of the relationship's
    /// destination: sets a to-one, points the target's inverse to-one at the item (one-to-many),
    /// or adds the pair (many-to-many; adding a pair that exists changes nothing). The target
    /// must exist when the transaction commits.
    /// - Throws: `notFound` when the item (or, for a one-to-many, the target) does not exist;
    ///   `invalidArgument` for an unknown relationship.
    public func link(_ entityName: String, key: Value, _ relationship: String, to target: Value) throws {
        let (entity, relationship, destination) = try resolve(entityName, relationship)
        let key = try entity.checkedKeyValue(key)
        let target = try destination.checkedKeyValue(target)
        switch (relationship.cardinality, catalog.graph.toMany[entity.name]?[relationship.name]) {
        case (.toOne, _):
            try update(entity.name, key: key, set: [relationship.name: target])
        case let (.toMany, .referrers(_, attribute)?):
            try requireItem(entity, key)
            try update(destination.name, key: target, set: [attribute: key])
        case let (.toMany, .pairs(joinName, column, otherColumn, _)?):
            try requireItem(entity, key)
            let existing = try fetch(FetchRequest(joinName, filter: .compare(column, .equal, key)
                && .compare(otherColumn, .equal, target), limit: 1))
            if existing.isEmpty {
                try insert([ "id": .uuid(UUID()), column: key, otherColumn: target ], into: joinName)
            }
        case (.toMany, nil):
            throw StoreError(.invalidArgument, "relationship '\(entity.name).\(relationship.name)' has no inverse")
        }
    }

    /// Undoes ``link(_:key:_:to:)``: clears a to-one that points at `target`, clears the
    /// target's inverse to-one (one-to-many), or removes the pair (many-to-many). Returns
    /// whether the items were related.
    /// - Throws: `invalidValue` when the to-one to clear is required (delete the item, or
    ///   link it elsewhere, instead).
    @discardableResult
    public func unlink(_ entityName: String, key: Value, _ relationship: String, from target: Value) throws -> Bool {
        let (entity, relationship, destination) = try resolve(entityName, relationship)
        let key = try entity.checkedKeyValue(key)
        let target = try destination.checkedKeyValue(target)
        switch (relationship.cardinality, catalog.graph.toMany[entity.name]?[relationship.name]) {
        case (.toOne, _):
            guard let item = try get(entity.name, key: key), item[relationship.name] == target else { return false }
            try update(entity.name, key: key, set: [relationship.name: .null])
            return true
        case let (.toMany, .referrers(_, attribute)?):
            guard let item = try get(destination.name, key: target), item[attribute] == key else { return false }
            try update(destination.name, key: target, set: [attribute: .null])
            return true
        case let (.toMany, .pairs(joinName, column, otherColumn, _)?):
            return try delete(FetchRequest(joinName, filter: .compare(column, .equal, key)
                && .compare(otherColumn, .equal, target))) > 0
        case (.toMany, nil):
            throw StoreError(.invalidArgument, "relationship '\(entity.name).\(relationship.name)' has no inverse")
        }
    }

    /// Deletes an item without running its delete rules: what a merge does to an item it
    /// writes again in the same transaction (the commit still checks every reference).
    func deleteKeepingRelated(_ entityName: String, key: Value) throws -> Bool {
        let entity = try entity(entityName)
        let key = try entity.primaryKey(key)
        if let references = writer as? RelationshipWriter { return try references.writer.delete(key: key, in: entity) }
        return try writer.delete(key: key, in: entity)
    }

    /// Runs the delete rules of the items that refer to an item ``deleteKeepingRelated(_:key:)``
    /// removed (its to-many and many-to-many sides), on the transaction's state now; the rules
    /// of its own to-ones are left out (a merge's child already ran them).
    func runDeleteRulesOfReferrers(ofRemoved entityName: String, key: Value) throws {
        guard let references = writer as? RelationshipWriter else { return }
        let entity = try entity(entityName)
        try references.runDeleteRules(ofRemoved: try entity.primaryKey(key), in: entity)
    }

    private func resolve(_ entityName: String, _ name: String) throws
        -> (EntitySchema, Relationship, EntitySchema)
    {
        let entity = try entity(entityName)
        let relationship = try relationship(name, of: entity)
        return (entity, relationship, try self.entity(relationship.destination))
    }

    private func requireItem(_ entity: EntitySchema, _ key: Value) throws {
        guard try reader.get(entity, keyValue: key) != nil else {
            throw StoreError(.notFound, "no '\(entity.name)' with key \(key) to relate")
        }
    }
}

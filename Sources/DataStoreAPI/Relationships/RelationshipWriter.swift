/// A write transaction that keeps the relationship invariant, above the engine: the one
/// implementation of delete rules and reference checks for every backend.
///
/// - A delete runs the deleted item's delete rules at once, in the same transaction and through
///   the layers below (so the change feed records every item a cascade deletes or a nullify
///   rewrites). Cascades go depth first, a page of related items at a time: memory grows with
///   the depth of a cascade chain, never with how many items it deletes.
/// - Every to-one reference a write stores, and every `deny` rule a delete meets, is noted and
///   checked once, in ``finish()``, before the commit: a transaction may insert a note before
///   its author, or swap two references.
final class RelationshipWriter: ForwardingWriter, BulkInserting {
    let writer: any StorageWriter
    private let graph: RelationshipGraph
    private let catalog: Catalog
    /// The keys that written references point at, by the entity that must hold them.
    private var referenced: [String: Set<PrimaryKey>] = [:]
    /// Deleted items whose `deny` rules must find nothing related at commit.
    private var denied: [(entity: String, key: PrimaryKey, effect: RelationshipGraph.Effect, target: PrimaryKey?)] = []
    /// The items delete rules (cascade) deleted in this transaction, by entity: what an import
    /// reports beside the items it deleted itself.
    private(set) var deletedByRules: [String: Int] = [:]
    /// How many related items a cascade or nullify reads at a time.
    static let pageSize = 256

    init(_ writer: any StorageWriter, graph: RelationshipGraph, catalog: Catalog) {
        self.writer = writer
        self.graph = graph
        self.catalog = catalog
    }

    private func entity(_ name: String) throws -> EntitySchema {
        guard let entity = catalog.entity(named: name) else {
            throw StoreError(.corrupt, "the schema's relationships name entity '\(name)', which it does not hold")
        }
        return entity
    }

    // MARK: StorageWriter

    /// Notes the references `record` holds, to be checked at commit.
    private func note(_ record: Record, of entity: EntitySchema) throws {
        guard let references = graph.references[entity.name] else { return }
        for reference in references {
            let value = record[reference.attribute]
            if value.isNull { continue }
            referenced[reference.destination, default: []].insert(try PrimaryKey(value))
        }
    }

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try writer.insert(record, key: key, in: entity)
        try note(record, of: entity)
    }

    /// A model of an entity that refers to none goes through as it is; one that refers to items
    /// is inserted as a record, whose references are noted.
    func insertFields<T: RowCodable>(_ object: T, in entity: EntitySchema) throws -> Value? {
        guard graph.references[entity.name] == nil else { return nil }
        return try writer.insertFields(object, in: entity)
    }

    var takesRecordFields: Bool { writer.takesRecordFields }

    /// As ``insertFields(_:in:)``: a record of an entity that refers to items is normalized and
    /// inserted, its references noted.
    func insertRecordFields(_ record: Record, in entity: EntitySchema) throws -> Value? {
        guard graph.references[entity.name] == nil else { return nil }
        return try writer.insertRecordFields(record, in: entity)
    }

    func insertAllOrNone(_ records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws -> Bool {
        guard let bulk = writer as? any BulkInserting, try bulk.insertAllOrNone(records, in: entity) else {
            return false
        }
        for (record, _) in records { try note(record, of: entity) }
        return true
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try writer.put(record, key: key, in: entity)
        try note(record, of: entity)
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        try writer.setMetadata(value, forKey: key)
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        guard let effects = graph.effects[entity.name], !effects.isEmpty else {
            return try writer.delete(key: key, in: entity)
        }
        let record = try needsRecord(effects) ? writer.get(entity, key: key) : nil
        guard try writer.delete(key: key, in: entity) else { return false }
        try applyRules(from: Deleted(entity: entity, key: key, record: record))
        return true
    }

    /// Runs the delete rules of the items that refer to an item already removed without its
    /// rules (a merge removes every changed item first, writes the final versions, then runs the
    /// rules of the items the child deleted, on that state). Without the item's record, the rules
    /// of its own to-ones find no target: they ran in the child. The items a rule deletes run
    /// all of theirs.
    func runDeleteRules(ofRemoved key: PrimaryKey, in entity: EntitySchema) throws {
        guard let effects = graph.effects[entity.name], !effects.isEmpty else { return }
        try applyRules(from: Deleted(entity: entity, key: key, record: nil))
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        guard let effects = graph.effects[entity.name], !effects.isEmpty else {
            return try writer.deleteAll(in: entity)
        }
        // Item by item, each with its rules; the scan starts over after each page, since the
        // rules may delete items the page did not hold. Every item of the entity goes, those a
        // rule deleted (a cascade within the entity) included, so the count is taken first: a
        // count of the deletes that returned true left out the cascaded ones.
        let deleted = try writer.count(.all, in: entity)
        while case let page = try writer.scan(entity, after: nil, limit: Self.pageSize), !page.isEmpty {
            for record in page {
                _ = try delete(key: PrimaryKey(entity.primaryKeyValue(of: record)), in: entity)
            }
        }
        return deleted
    }

    private func needsRecord(_ effects: [RelationshipGraph.Effect]) -> Bool {
        effects.contains { if case .referent = $0 { true } else { false } }
    }

    /// A deleted item whose rules have yet to run: `next` is the effect the rules are at.
    private struct Deleted {
        var entity: EntitySchema
        var key: PrimaryKey
        var record: Record?
        var next = 0
    }

    /// Runs the delete rules of `first` and of every item they delete, depth first.
    private func applyRules(from first: Deleted) throws {
        var stack = [first]
        while var top = stack.popLast() {
            let effects = graph.effects[top.entity.name] ?? []
            guard top.next < effects.count else { continue }
            var children: [Deleted] = []
            let finished = try apply(effects[top.next], of: top, deleting: &children)
            if finished { top.next += 1 }
            stack.append(top)
            stack.append(contentsOf: children)
        }
    }

    /// Deletes `key` of `entity` without its rules, and returns it as an item whose rules must
    /// run (when it has any), or `nil` when there was no such item.
    private func deleteOne(_ entity: EntitySchema, _ key: PrimaryKey, record: Record?) throws -> Deleted? {
        let effects = graph.effects[entity.name] ?? []
        let record = try record ?? (needsRecord(effects) ? writer.get(entity, key: key) : nil)
        guard try writer.delete(key: key, in: entity) else { return nil }
        deletedByRules[entity.name, default: 0] += 1
        return effects.isEmpty ? nil : Deleted(entity: entity, key: key, record: record)
    }

    /// Applies one rule of a deleted item, a page of related items at most.
    /// - Returns: whether the rule is done (otherwise it runs again for the next page).
    private func apply(_ effect: RelationshipGraph.Effect, of item: Deleted,
                       deleting children: inout [Deleted]) throws -> Bool {
        switch effect {
        case let .referrers(sourceName, attribute, rule, _):
            let source = try entity(sourceName)
            if rule == .deny {
                denied.append((item.entity.name, item.key, effect, nil))
                return true
            }
            let page = try writer.fetch(FetchRequest(sourceName, filter: .compare(attribute, .equal, item.key.value),
                                                     limit: Self.pageSize), in: source)
            for var referrer in page {
                let key = try PrimaryKey(source.primaryKeyValue(of: referrer))
                if rule == .cascade {
                    if let child = try deleteOne(source, key, record: referrer) { children.append(child) }
                } else {
                    referrer[attribute] = .null
                    // Its place in the ordered list it left goes with it.
                    if let position = graph.referencePositions[sourceName]?[attribute] { referrer[position] = .null }
                    try writer.put(try source.normalize(referrer), key: key, in: source)
                }
            }
            return page.count < Self.pageSize
        case let .pairs(joinName, column, otherColumn, otherName, rule, _):
            let join = try entity(joinName)
            if rule == .deny {
                denied.append((item.entity.name, item.key, effect, nil))
                return true
            }
            let page = try writer.fetch(FetchRequest(joinName, filter: .compare(column, .equal, item.key.value),
                                                     limit: Self.pageSize), in: join)
            let other = try entity(otherName)
            for pair in page {
                _ = try writer.delete(key: PrimaryKey(join.primaryKeyValue(of: pair)), in: join)
                if rule == .cascade, case let otherKey = pair[otherColumn], !otherKey.isNull,
                   let child = try deleteOne(other, PrimaryKey(otherKey), record: nil) {
                    children.append(child)
                }
            }
            return page.count < Self.pageSize
        case let .referent(attribute, destinationName, rule, _):
            guard let value = item.record?[attribute], !value.isNull else { return true }
            let target = try PrimaryKey(value)
            if rule == .deny {
                denied.append((item.entity.name, item.key, effect, target))
            } else if let child = try deleteOne(try entity(destinationName), target, record: nil) {
                children.append(child)
            }
            return true
        }
    }

    // MARK: The check at commit

    /// Checks every reference the transaction wrote and every `deny` rule it met.
    /// - Throws: `referenceViolation` naming the entity, key, relationship and missing target.
    func finish() throws {
        for (destinationName, keys) in referenced.sorted(by: { $0.key < $1.key }) {
            let destination = try entity(destinationName)
            for key in keys.sorted() where !(try writer.contains(destination, key: key)) {
                if let message = try danglingReference(to: destination, key) {
                    throw StoreError(.referenceViolation, message)
                }
            }
        }
        for (entityName, key, effect, target) in denied {
            let entity = try entity(entityName)
            if try writer.contains(entity, key: key) { continue }
            switch effect {
            case let .referrers(sourceName, attribute, _, relationship):
                let source = try self.entity(sourceName)
                if let referrer = try writer.fetch(FetchRequest(sourceName, filter: .compare(attribute, .equal, key.value),
                                                                limit: 1), in: source).first {
                    let label = relationship.contains(".") ? "'\(relationship)', which has no inverse"
                        : "'\(entityName).\(relationship)' (delete rule deny)"
                    throw StoreError(.referenceViolation, "'\(entityName)' \(key) cannot be deleted: "
                        + "'\(sourceName)' \(source.primaryKeyValue(of: referrer)) refers to it through "
                        + "'\(attribute)', and \(label) keeps it")
                }
            case let .pairs(joinName, column, otherColumn, otherName, _, relationship):
                let join = try self.entity(joinName)
                if let pair = try writer.fetch(FetchRequest(joinName, filter: .compare(column, .equal, key.value),
                                                            limit: 1), in: join).first {
                    throw StoreError(.referenceViolation, "'\(entityName)' \(key) cannot be deleted: it is related to "
                        + "'\(otherName)' \(pair[otherColumn]) through '\(entityName).\(relationship)' (delete rule deny)")
                }
            case let .referent(attribute, destinationName, _, relationship):
                guard let target, try writer.contains(try self.entity(destinationName), key: target) else { continue }
                throw StoreError(.referenceViolation, "'\(entityName)' \(key) cannot be deleted: it refers to "
                    + "'\(destinationName)' \(target) through '\(attribute)', and '\(entityName).\(relationship)' "
                    + "has the delete rule deny")
            }
        }
    }

    /// The message for an item that refers to the missing `key` of `destination`, or `nil` when
    /// no item does any more (the reference was changed again in the transaction).
    private func danglingReference(to destination: EntitySchema, _ key: PrimaryKey) throws -> String? {
        for (sourceName, references) in graph.references.sorted(by: { $0.key < $1.key }) {
            for reference in references where reference.destination == destination.name {
                let source = try entity(sourceName)
                if let referrer = try writer.fetch(
                    FetchRequest(sourceName, filter: .compare(reference.attribute, .equal, key.value), limit: 1),
                    in: source).first {
                    return "'\(sourceName)' \(source.primaryKeyValue(of: referrer)) refers through "
                        + "'\(reference.attribute)' to '\(destination.name)' \(key), which does not exist; "
                        + "the transaction was rolled back"
                }
            }
        }
        return nil
    }
}

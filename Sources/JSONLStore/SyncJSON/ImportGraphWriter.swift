@_spi(Backend) import DataStoreAPI
import Foundation

/// Writes mapped objects and their nested objects into one write transaction with Sync's
/// semantics, counting what it does per entity.
///
/// - An object whose values equal its stored item is not written (the change feed and live
///   queries see only real changes).
/// - A to-one given as a nested object writes that object first and points at it; given by key,
///   the key must name an item: one that does not exist yet is set later (``pending``), when the
///   relationship is optional, so that an object may name one further on in the input.
/// - A to-many's nested objects are written and related to the object, and the items it lists
///   by key are related to it (later, when they come further on in the input); the items it related
///   before and the array no longer lists are removed from the relationship: deleted when the
///   relationship cascades or their inverse to-one is required, else unlinked. With deletes off
///   (`--keep-missing`), they stay.
struct ImportGraphWriter {
    /// A relationship set once its target exists: a to-one, a one-to-many child or a
    /// many-to-many pair that names an item further on in the input.
    struct PendingReference: Codable, Hashable {
        var entity: String
        var key: Value
        var relationship: String
        var target: Value
        /// The root object's position in the input.
        var position: Int
    }

    let writer: WriteAccessor
    let options: JSONImport.Options
    var counts: [String: JSONImport.EntityCounts] = [:]
    var pending: [PendingReference] = []
    /// The keys of the items this run has written so far, by entity (for ``JSONImport/EntityCounts/updatedAgain``).
    var written: [String: Set<Value>] = [:]
    /// The position of the root object being written.
    var position = 0

    init(_ writer: WriteAccessor, _ options: JSONImport.Options) {
        self.writer = writer
        self.options = options
    }

    /// Writes `object` (with `extra` values, the inverse of the parent that lists it) and its
    /// nested objects; returns whether its item exists afterwards.
    @discardableResult
    mutating func write(_ object: ImportObject, extra: [String: Value] = [:]) throws -> Bool {
        var values = object.values
        for (name, value) in extra { values[name] = value }
        for (relationship, nested) in object.toOne {
            if try write(nested) { values[relationship.name] = nested.key }
        }
        for relationship in object.references {
            guard let target = values[relationship.name], !target.isNull, extra[relationship.name] == nil,
                  try writer.get(relationship.destination, key: target) == nil else { continue }
            guard relationship.isOptional else {
                throw JSONImport.ImportRejection("'\(object.entity.name).\(relationship.name)' names "
                    + "\(relationship.destination) \(target), which does not exist")
            }
            values[relationship.name] = .null
            pending.append(PendingReference(entity: object.entity.name, key: object.key,
                                            relationship: relationship.name, target: target, position: position))
        }
        let entity = object.entity
        let inserted: Bool
        if var record = try writer.get(entity.name, key: object.key) {
            inserted = false
            if options.operations.contains(.update) {
                let existing = record
                for (name, value) in values { record[name] = value }
                let normalized = try entity.normalize(record)
                if normalized == existing {
                    counts[entity.name, default: .init()].unchanged += 1
                } else {
                    try writer.save(normalized, into: entity.name)
                    counts[entity.name, default: .init()].updated += 1
                    if !written[entity.name, default: []].insert(object.key).inserted {
                        counts[entity.name, default: .init()].updatedAgain += 1
                    }
                }
            }
        } else {
            guard options.operations.contains(.insert) else { return false }
            var record = Record()
            record[entity.primaryKey] = object.key
            for (name, value) in values { record[name] = value }
            try writer.insert(try entity.normalize(record), into: entity.name)
            counts[entity.name, default: .init()].inserted += 1
            written[entity.name, default: []].insert(object.key)
            inserted = true
        }
        for (relationship, children) in object.toMany {
            try write(children, of: relationship, from: object, isNew: inserted)
        }
        return true
    }

    /// Relates the object to the items `children` lists, and removes the ones it no longer lists.
    private mutating func write(_ children: [ImportObject.Child], of relationship: Relationship,
                                from object: ImportObject, isNew: Bool) throws {
        guard let destination = writer.schema.entity(named: relationship.destination),
              let inverse = destination.relationship(named: relationship.inverse ?? "") else { return }
        var listed = Set<Value>()
        // The keys in the array's order, for an ordered relationship.
        var order: [Value] = []
        switch inverse.cardinality {
        case .toOne:
            // One-to-many: each child points at the object.
            for child in children {
                switch child {
                case .object(let nested):
                    if try write(nested, extra: [inverse.name: object.key]) {
                        listed.insert(nested.key)
                        order.append(nested.key)
                    }
                case .key(let key):
                    listed.insert(key)
                    order.append(key)
                    guard var record = try writer.get(destination.name, key: key) else {
                        // Related once it is written, further on in the input.
                        pending.append(PendingReference(entity: object.entity.name, key: object.key,
                                                        relationship: relationship.name, target: key,
                                                        position: position))
                        continue
                    }
                    guard record[inverse.name] != object.key else { continue }
                    guard options.operations.contains(.update) else { continue }
                    record[inverse.name] = object.key
                    try writer.save(record, into: destination.name)
                    counts[destination.name, default: .init()].updated += 1
                }
            }
            try arrange(order, of: relationship, from: object, isNew: isNew)
            // A new item has no children but those it just listed.
            guard !isNew, options.operations.contains(.delete) else { return }
            let removes = relationship.deleteRule == .cascade || !inverse.isOptional
            for record in try writer.fetch(FetchRequest(destination.name,
                                                        filter: .compare(inverse.name, .equal, object.key)))
            where !listed.contains(record[destination.primaryKey]) {
                let key = record[destination.primaryKey]
                if removes {
                    if try writer.delete(destination.name, key: key) {
                        counts[destination.name, default: .init()].deleted += 1
                    }
                } else {
                    try writer.update(destination.name, key: key, set: [inverse.name: .null])
                    counts[destination.name, default: .init()].unlinked += 1
                }
            }
        case .toMany:
            // Many-to-many: pairs in the join entity.
            let before = isNew ? Set<Value>()
                : Set(try writer.related(object.entity.name, key: object.key, relationship.name)
                    .map { $0[destination.primaryKey] })
            for child in children {
                let key: Value
                switch child {
                case .object(let nested):
                    guard try write(nested) else { continue }
                    key = nested.key
                case .key(let target):
                    guard try writer.get(destination.name, key: target) != nil else {
                        listed.insert(target)
                        pending.append(PendingReference(entity: object.entity.name, key: object.key,
                                                        relationship: relationship.name, target: target,
                                                        position: position))
                        continue
                    }
                    key = target
                }
                order.append(key)
                guard listed.insert(key).inserted, !before.contains(key) else { continue }
                try writer.link(object.entity.name, key: object.key, relationship.name, to: key)
                counts[destination.name, default: .init()].linked += 1
            }
            try arrange(order, of: relationship, from: object, isNew: isNew)
            guard options.operations.contains(.delete) else { return }
            for key in before where !listed.contains(key) {
                if try writer.unlink(object.entity.name, key: object.key, relationship.name, from: key) {
                    counts[destination.name, default: .init()].unlinked += 1
                }
            }
        }
    }

    /// Puts the items of an ordered relationship in the order the array lists them, ahead of
    /// those it no longer lists (which the delete phase then removes); an item it names before
    /// the item exists comes last, when it is related.
    private func arrange(_ order: [Value], of relationship: Relationship, from object: ImportObject,
                         isNew: Bool) throws {
        guard relationship.isOrdered, isNew || options.operations.contains(.update),
              let destination = writer.schema.entity(named: relationship.destination) else { return }
        let current = try writer.related(object.entity.name, key: object.key, relationship.name)
            .map { destination.primaryKeyValue(of: $0) }
        let related = Set(current)
        var seen = Set<Value>()
        let wanted = order.filter { related.contains($0) && seen.insert($0).inserted }
        guard Array(current.prefix(wanted.count)) != wanted else { return }
        for (index, key) in wanted.enumerated() {
            try writer.link(object.entity.name, key: object.key, relationship.name, to: key, at: index)
        }
    }

    /// Sets the references that named items not yet written; returns the ones whose target
    /// still does not exist.
    mutating func resolve(_ references: [PendingReference]) throws -> [PendingReference] {
        var missing: [PendingReference] = []
        for reference in references {
            guard let entity = writer.schema.entity(named: reference.entity),
                  let relationship = entity.relationship(named: reference.relationship),
                  try writer.get(relationship.destination, key: reference.target) != nil,
                  try writer.get(entity.name, key: reference.key) != nil
            else {
                missing.append(reference)
                continue
            }
            try writer.link(entity.name, key: reference.key, relationship.name, to: reference.target)
        }
        return missing
    }
}

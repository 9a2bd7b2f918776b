import Foundation

extension WriteAccessor {
    /// Relates the item `key` of `entityName` to the item `target` of the relationship's
    /// destination: sets a to-one, points the target's inverse to-one at the item (one-to-many),
    /// or adds the pair (many-to-many; adding a pair that exists changes nothing). An ordered
    /// to-many puts `target` last, unless it is already there. The target must exist when the
    /// transaction commits.
    /// - Throws: `notFound` when the item (or, for a one-to-many, the target) does not exist;
    ///   `invalidArgument` for an unknown relationship.
    public func link(_ entityName: String, key: Value, _ relationship: String, to target: Value) throws {
        let (entity, relationship, destination) = try resolve(entityName, relationship)
        let key = try entity.checkedKeyValue(key)
        let target = try destination.checkedKeyValue(target)
        if relationship.isOrdered {
            try requireItem(entity, key)
            return try place(target, at: nil, in: orderedList(entity, key, relationship))
        }
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
            var cleared: [String: Value] = [attribute: .null]
            if let position = catalog.graph.positions[entity.name]?[relationship.name] { cleared[position] = .null }
            try update(destination.name, key: target, set: cleared)
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

    // MARK: Ordered to-many relationships

    /// Puts `target` at `index` of the ordered to-many `relationship` of the item `key` (0 puts
    /// it first, the count of its items last), moving it there when it is already related.
    /// - Throws: `invalidArgument` when the relationship is not an ordered to-many or `index` is
    ///   outside `0...count`; `notFound` when the item does not exist.
    public func link(_ entityName: String, key: Value, _ relationship: String, to target: Value,
                     at index: Int) throws {
        let (entity, relationship, destination) = try resolve(entityName, relationship)
        let key = try entity.checkedKeyValue(key)
        let target = try destination.checkedKeyValue(target)
        try requireItem(entity, key)
        try place(target, at: index, in: orderedList(entity, key, relationship))
    }

    /// Moves the item at `source` of the ordered to-many `relationship` of the item `key` to
    /// `destination` (an index of the list as it is after the move).
    /// - Throws: `invalidArgument` when the relationship is not an ordered to-many or an index is
    ///   outside the list.
    public func moveRelated(_ entityName: String, key: Value, _ relationship: String, from source: Int,
                            to destination: Int) throws {
        let (entity, relationship, _) = try resolve(entityName, relationship)
        let list = try orderedList(entity, try entity.checkedKeyValue(key), relationship)
        try list.check(source, in: 0..<list.members.count)
        try list.check(destination, in: 0..<list.members.count)
        guard source != destination else { return }
        try place(list.members[source].target, at: destination, in: list)
    }

    /// Removes the item at `index` of the ordered to-many `relationship` of the item `key` from
    /// it (as ``unlink(_:key:_:from:)`` does) and returns its key.
    /// - Throws: `invalidArgument` when the relationship is not an ordered to-many or `index` is
    ///   outside the list.
    @discardableResult
    public func unlink(_ entityName: String, key: Value, _ relationship: String, at index: Int) throws -> Value {
        let (entity, relationship, _) = try resolve(entityName, relationship)
        let key = try entity.checkedKeyValue(key)
        let list = try orderedList(entity, key, relationship)
        try list.check(index, in: 0..<list.members.count)
        let target = list.members[index].target
        try unlink(entity.name, key: key, relationship.name, from: target)
        return target
    }

    /// The step between two positions an append or a renumbering leaves: room for 16 inserts
    /// between two neighbors before the list is renumbered.
    static var positionStep: Int64 { 1 << 16 }

    /// An ordered to-many of one item, as stored: its members in order, and where their
    /// positions live.
    private struct OrderedList {
        struct Member {
            /// The related item's key.
            var target: Value
            /// The key of the record that holds the position: the related item (one-to-many)
            /// or the pair (many-to-many).
            var holder: Value
            var position: Value
        }
        var label: String
        var owner: Value
        var members: [Member]
        /// The entity whose records hold the positions, and the attribute.
        var holder: String
        var position: String
        /// One-to-many: the destination's to-one; many-to-many: the pair's columns.
        var attribute: String?
        var pair: (column: String, otherColumn: String)?

        func check(_ index: Int, in range: Range<Int>) throws(StoreError) {
            guard range.contains(index) else {
                throw StoreError(.invalidArgument, "index \(index) is outside \(label) of \(owner), which has "
                    + "\(members.count) item\(members.count == 1 ? "" : "s")")
            }
        }
    }

    private func orderedList(_ entity: EntitySchema, _ key: Value, _ relationship: Relationship) throws -> OrderedList {
        let label = "'\(entity.name).\(relationship.name)'"
        guard relationship.cardinality == .toMany, relationship.isOrdered,
              let position = catalog.graph.positions[entity.name]?[relationship.name] else {
            throw StoreError(.invalidArgument, "relationship \(label) is not an ordered to-many: its items have no "
                + "index (declare it with ordered: true)")
        }
        let destination = try self.entity(relationship.destination)
        switch catalog.graph.toMany[entity.name]?[relationship.name] {
        case let .referrers(_, attribute)?:
            let items = Self.inPositionOrder(try fetch(FetchRequest(destination.name,
                                                                    filter: .compare(attribute, .equal, key))),
                                             position: position) { destination.primaryKeyValue(of: $0) }
            let members = items.map {
                let target = destination.primaryKeyValue(of: $0)
                return OrderedList.Member(target: target, holder: target, position: $0[position])
            }
            return OrderedList(label: label, owner: key, members: members, holder: destination.name,
                               position: position, attribute: attribute)
        case let .pairs(joinName, column, otherColumn, _)?:
            let join = try self.entity(joinName)
            let pairs = Self.inPositionOrder(try fetch(FetchRequest(joinName, filter: .compare(column, .equal, key))),
                                             position: position) { $0[otherColumn] }
            let members = pairs.map {
                OrderedList.Member(target: $0[otherColumn], holder: join.primaryKeyValue(of: $0),
                                   position: $0[position])
            }
            return OrderedList(label: label, owner: key, members: members, holder: joinName, position: position,
                               pair: (column, otherColumn))
        case nil:
            throw StoreError(.invalidArgument, "relationship \(label) has no inverse")
        }
    }

    /// Puts `target` at `index` of `list` (last when `nil`, where an append of a member changes
    /// nothing): a position between its neighbors', or, when they leave no room (or one has
    /// none), every member renumbered a step apart.
    private func place(_ target: Value, at index: Int?, in list: OrderedList) throws {
        var members = list.members
        let existing = members.firstIndex { $0.target == target }
        if index == nil, existing != nil { return }
        let moved = existing.map { members.remove(at: $0) }
        let index = index ?? members.count
        try list.check(index, in: 0..<(members.count + 1))
        let step = Self.positionStep
        let lower: Value? = index > 0 ? members[index - 1].position : nil
        let upper: Value? = index < members.count ? members[index].position : nil
        var position: Int64?
        switch (lower, upper) {
        case (nil, nil): position = step
        case let (nil, .int(u)?): position = u > Int64.min + step ? u - step : nil
        case let (.int(l)?, nil): position = l < Int64.max - step ? l + step : nil
        case let (.int(l)?, .int(u)?):
            // Positions another program wrote may lie further apart than an Int64 counts (the
            // members are in order, so then l < 0 <= u): the sum of their halves lies between them.
            let (gap, apart) = u.subtractingReportingOverflow(l)
            position = apart ? l / 2 + u / 2 : gap >= 2 ? l + gap / 2 : nil
        default: position = nil
        }
        let holder = moved?.holder
        guard let position else {
            // Renumber: every member a step apart, in the new order.
            members.insert(OrderedList.Member(target: target, holder: holder ?? .null, position: .null), at: index)
            for (offset, member) in members.enumerated() {
                let new = Value.int(Int64(offset + 1) * step)
                if member.target == target {
                    try write(target, holder: holder, position: new, in: list)
                } else if member.position != new {
                    _ = try update(list.holder, key: member.holder, set: [list.position: new])
                }
            }
            return
        }
        try write(target, holder: holder, position: .int(position), in: list)
    }

    /// Stores `target` as a member of `list` at `position`: points its to-one at the owner
    /// (one-to-many), or updates its pair (`holder`) or adds one (many-to-many).
    private func write(_ target: Value, holder: Value?, position: Value, in list: OrderedList) throws {
        if let attribute = list.attribute {
            _ = try update(list.holder, key: target, set: [attribute: list.owner, list.position: position])
        } else if let holder {
            _ = try update(list.holder, key: holder, set: [list.position: position])
        } else if let pair = list.pair {
            try insert(["id": .uuid(UUID()), pair.column: list.owner, pair.otherColumn: target,
                        list.position: position], into: list.holder)
        }
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

/// What a merge does when the parent changed an item after the child first changed it.
public enum MergePolicy: Sendable, Hashable {
    /// The child's version is applied (the default).
    case childWins
    /// The parent's version is kept; the child's change to that item is dropped.
    case parentWins
    /// The merge fails with a ``StoreError/Code/conflict`` error listing every such item, and
    /// applies nothing.
    case fail
}

/// What a merge applied.
public struct MergeReport: Sendable, Hashable {
    /// Items the merge added to the parent.
    public var inserted = 0
    /// Items the merge replaced in the parent.
    public var updated = 0
    /// Items the merge removed from the parent.
    public var deleted = 0
    /// Changes dropped because the parent won a conflict.
    public var skipped = 0
    /// The items that both sides changed.
    public var conflicts: [StoreError.ItemReference] = []

    /// An empty report.
    public init() {}
}

extension DataStore {
    /// Makes a child store: its writes stay in an overlay, its reads see this store's current
    /// data with the overlay applied, until ``merge(_:policy:)`` applies them here. Children nest.
    public func makeChild() throws -> ChildStore {
        if isClosed { throw StoreError(.closed, "cannot make a child of a closed store") }
        return try ChildStore(parent: self)
    }

    /// Applies every change of `child` in one atomic write and clears the child's overlay.
    /// - Throws: `invalidArgument` when this store is not the child's parent; `conflict` (with
    ///   the items) under ``MergePolicy/fail``; a write error such as `uniqueViolation`. On any
    ///   error nothing is applied and the child keeps its changes.
    @discardableResult
    public func merge(_ child: ChildStore, policy: MergePolicy = .childWins) throws -> MergeReport {
        guard child.overlay.parent === self else {
            throw StoreError(.invalidArgument, "cannot merge a child store into a store that is not its parent")
        }
        return try child.exclusively {
            let overlay = child.overlay.takeChanges()
            let report = try writeSync { writer in try Self.apply(overlay, to: writer, policy: policy) }
            child.overlay.clear()
            return report
        }
    }

    private static func apply(_ overlay: Overlay, to writer: WriteAccessor, policy: MergePolicy) throws -> MergeReport {
        var report = MergeReport()
        var writes: [(entity: String, change: Overlay.Change)] = []
        for (entity, changes) in overlay.entities.sorted(by: { $0.key < $1.key }) {
            for (_, change) in changes.sorted(by: { $0.key < $1.key }) {
                let now = try writer.get(entity, key: change.key.value)
                if now != change.base {
                    report.conflicts.append(StoreError.ItemReference(entity: entity, key: change.key.value))
                    if policy == .parentWins {
                        report.skipped += 1
                        continue
                    }
                }
                writes.append((entity, change))
            }
        }
        if policy == .fail, !report.conflicts.isEmpty {
            throw StoreError(.conflict, "merge found \(report.conflicts.count) items changed by both parent and "
                + "child: \(report.conflicts.prefix(10).map(\.description).joined(separator: ", "))",
                items: report.conflicts)
        }
        // Every changed item leaves first, without its delete rules, and its final version is
        // written after, so that only the child's final state meets the unique indexes (values
        // swapped between items merge). Only then do the items the child deleted run their rules,
        // on the parent's state with every item the child moved already in its final place: an
        // item moved away from a deleted parent stays, as it did in the child (run before the
        // writes, in entity-name order, a cascade took it and what hung off it), while a note
        // the parent related to a user the child deleted meanwhile goes with it, as the user's
        // cascade says. The rules of a deleted item's own to-ones are not run again: they ran in
        // the child, on the item as the child last held it (a to-one cleared or moved before the
        // delete leads nowhere), and what they deleted is among the child's changes. Run on the
        // parent's older copy, they would delete (or deny) what the child kept.
        var removed: [Bool] = []
        for (entity, change) in writes {
            removed.append(try writer.deleteKeepingRelated(entity, key: change.key.value))
        }
        for ((entity, change), wasThere) in zip(writes, removed) {
            if let current = change.current {
                try writer.insert(current, into: entity)
                if wasThere { report.updated += 1 } else { report.inserted += 1 }
            } else if wasThere {
                report.deleted += 1
            }
        }
        for ((entity, change), wasThere) in zip(writes, removed) where change.current == nil && wasThere {
            try writer.runDeleteRulesOfReferrers(ofRemoved: entity, key: change.key.value)
        }
        for (key, value) in overlay.metadata.sorted(by: { Value.compareBytes($0.key, $1.key) < 0 }) {
            try writer.setMetadata(value, forKey: String(decoding: key, as: UTF8.self))
        }
        return report
    }
}

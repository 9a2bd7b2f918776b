@_spi(Backend) import DataStoreAPI
import Foundation
import JSONLStore

/// What `diff` found, or what applying a diff did.
public struct DiffReport: Sendable, Codable, Hashable {
    /// What a diff found in one entity.
    public struct Counts: Sendable, Codable, Hashable {
        /// The entity.
        public var entity: String
        /// Items only the source holds.
        public var inserted = 0
        /// Items both hold with different values.
        public var updated = 0
        /// Items only the destination holds.
        public var deleted = 0
    }

    /// The source, as its location reads.
    public var source: String
    /// The destination, as its location reads.
    public var destination: String
    /// Per entity, in schema order.
    public var entities: [Counts] = []
    /// How long it took.
    public var seconds = 0.0

    /// Every change, over every entity.
    public var changes: Int { entities.reduce(0) { $0 + $1.inserted + $1.updated + $1.deleted } }
}

extension Migrator {
    /// Lists the item-level differences between `source` and `destination` (what `sync` would
    /// do to the destination) as a diff file at `output` (standard output when `nil` or `-`):
    /// one streaming merge join of both stores in key order, each read in one snapshot.
    public static func diff(from source: StoreLocation, to destination: StoreLocation, output: String?,
                            options: MigrationOptions = MigrationOptions(checkSource: false),
                            progress: @escaping (MigrationProgress) -> Void = { _ in }) throws -> DiffReport {
        let started = Date()
        let (sourceStore, schema, _) = try openSource(source, distinctFrom: destination, options)
        defer { try? sourceStore.close() }
        let destinationStore = try withResumeCommand(destination) { try destination.openSource() }
        defer { try? destinationStore.close() }
        try requireEntities(of: schema, in: destinationStore.schema, destination, selected: options.entities)
        var report = DiffReport(source: source.description, destination: destination.description)
        let writer = try StoreChanges.Writer(path: output, schema: schema, from: source.description,
                                             to: destination.description)
        do {
            try sourceStore.read { ours in
                try destinationStore.read { theirs in
                    for entity in schema.entities {
                        var counts = DiffReport.Counts(entity: entity.name)
                        let total = try ours.count(FetchRequest(entity.name))
                        var read = 0
                        var a = PageCursor(reader: ours, entity: entity, limit: options.batchSize.value)
                        var b = PageCursor(reader: theirs, entity: entity, limit: options.batchSize.value)
                        try PageCursor.mergeJoin(&a, &b) { step in
                            switch step {
                            case .sourceOnly(_, let record):
                                try writer.write(.insert(entity: entity.name, item: record), of: entity)
                                counts.inserted += 1
                                read += 1
                            case .destinationOnly(_, let record):
                                try writer.write(.delete(entity: entity.name, item: record), of: entity)
                                counts.deleted += 1
                            case .both(_, let source, let destination):
                                if source != destination {
                                    try writer.write(.update(entity: entity.name, old: destination, new: source),
                                                     of: entity)
                                    counts.updated += 1
                                }
                                read += 1
                            }
                            if read % 1_000 == 0 {
                                progress(MigrationProgress(phase: .verify, entity: entity.name, done: read, total: total,
                                                           itemsPerSecond: Double(read) / max(Date().timeIntervalSince(started), 1e-6)))
                            }
                            return true
                        }
                        report.entities.append(counts)
                    }
                }
            }
            try writer.finish()
        } catch {
            writer.abandon()
            throw error
        }
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    /// Applies a diff file to `destination` in one write transaction, after checking every line:
    /// each insert's key must be free, each update's item must still hold the diff's old values,
    /// each delete's item must be as the diff saw it. Anything else fails with `conflict` naming
    /// the line, and nothing is written.
    @discardableResult
    public static func apply(diff path: String, to destination: StoreLocation) throws -> DiffReport {
        let started = Date()
        // The whole file is read (and checked) before the store is opened for writing.
        let (schema, from, _) = try StoreChanges.read(path) { _, _ in }
        // Opened as a sync opens its destination (a diff applied is a sync): without delete rules
        // or reference checks, so that an item taken out and put back (its unique values moved)
        // takes nothing with it, and a delete deletes that item alone, as the diff lists it.
        let store = try withResumeCommand(destination) {
            try MigrationGate.$defersReferenceChecks.withValue(true) { try destination.open(schema: nil) }
        }
        defer { try? store.close() }
        for entity in schema.entities where store.schema.entity(named: entity.name) != entity {
            throw StoreError(.schemaMismatch, "\(path) is a diff of entity '\(entity.name)', which \(destination) "
                + "does not have as the diff does")
        }
        var report = DiffReport(source: from, destination: destination.description)
        report.entities = schema.entities.map { DiffReport.Counts(entity: $0.name) }
        try store.writeSync { writer in
            // Three passes over the file, so that a unique value is free when an item takes it:
            // the deletes; the updates that change a unique index's values, each item taken out
            // and put back, changed, at the end (two items that swap an email); the inserts and
            // other updates. Each key has one change in a diff, so the order changes nothing else.
            var changed: [(entity: String, item: Record)] = []
            for pass in ApplyPass.allCases {
                var line = 1
                try StoreChanges.read(path) { entity, change in
                    line += 1
                    guard ApplyPass(change, entity) == pass,
                          let index = report.entities.firstIndex(where: { $0.entity == entity.name }) else { return }
                    func conflict(_ what: String) -> StoreError {
                        StoreError(.conflict, "\(path): line \(line): \(entity.name)[\(keyOf(change, entity))] \(what); "
                            + "the destination changed since the diff was made, and nothing was applied")
                    }
                    switch change {
                    case .insert(_, let item):
                        if try writer.get(entity.name, key: item[entity.primaryKey]) != nil { throw conflict("exists") }
                        try writer.insert(item, into: entity.name)
                        report.entities[index].inserted += 1
                    case .update(_, let old, let new):
                        guard let current = try writer.get(entity.name, key: new[entity.primaryKey]) else {
                            throw conflict("is gone")
                        }
                        for attribute in entity.attributes where old[attribute.name] != new[attribute.name] {
                            guard current[attribute.name] == old[attribute.name] else {
                                throw conflict("has \(attribute.name) = \(current[attribute.name]), not the diff's old "
                                    + "value \(old[attribute.name])")
                            }
                        }
                        var updated = current
                        for attribute in entity.attributes where old[attribute.name] != new[attribute.name] {
                            updated[attribute.name] = new[attribute.name]
                        }
                        if pass == .uniqueValuesMoved {
                            _ = try writer.delete(entity.name, key: new[entity.primaryKey])
                            changed.append((entity.name, updated))
                        } else {
                            try writer.save(updated, into: entity.name)
                        }
                        report.entities[index].updated += 1
                    case .delete(_, let item):
                        guard let current = try writer.get(entity.name, key: item[entity.primaryKey]) else {
                            throw conflict("is already gone")
                        }
                        guard current == item else { throw conflict("changed since the diff") }
                        _ = try writer.delete(entity.name, key: item[entity.primaryKey])
                        report.entities[index].deleted += 1
                    }
                }
            }
            for (entity, item) in changed { try writer.insert(item, into: entity) }
        }
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    private static func keyOf(_ change: StoreChange, _ entity: EntitySchema) -> Value {
        switch change {
        case .insert(_, let item), .delete(_, let item), .update(_, _, let item): return item[entity.primaryKey]
        }
    }
}

/// The passes of ``Migrator/apply(diff:to:)`` over a diff file, in order, and the pass of each change.
private enum ApplyPass: CaseIterable {
    case deletes
    /// Updates that change the values of a unique index.
    case uniqueValuesMoved
    case rest

    init(_ change: StoreChange, _ entity: EntitySchema) {
        switch change {
        case .delete: self = .deletes
        case .insert: self = .rest
        case .update(_, let old, let new):
            let moves = entity.indexes.contains { index in
                index.isUnique && index.attributes.contains { old[$0] != new[$0] }
            }
            self = moves ? .uniqueValuesMoved : .rest
        }
    }
}

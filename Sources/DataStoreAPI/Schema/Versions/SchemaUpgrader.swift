import Foundation

/// Brings a store from the schema version it holds to the app's, the same way on every backend.
///
/// A backend's store type opens its engine through ``open(requested:upgrades:location:_:)``.
/// The migrator checks the plan against the stored schema before it writes anything (every step
/// must apply, and the result must be the app's schema, or the open fails listing each
/// unexplained difference), then applies every step of every version in one restartable write
/// transaction with the new header and a history entry, so a store is all-old or all-new
/// whatever happens. The engine is then reopened with the new schema.
@_spi(Backend) public enum SchemaUpgrader {
    /// Opens an engine with `requested`, migrating the stored schema to it first when the store
    /// holds an older version.
    ///
    /// - Parameter open: opens the backend's engine with a schema (`nil`: the stored one).
    /// - Throws: `newerSchemaVersion` when the store's version is newer than `requested`'s;
    ///   `schemaMismatch` listing each difference no step accounts for; what a step throws
    ///   (`invalidValue` for a value that does not convert, `uniqueViolation` listing duplicates).
    /// - Parameter requestedFirst: open the engine with `requested` first, and with the stored
    ///   schema only when that open refuses a different one (`schemaMismatch`,
    ///   `newerSchemaVersion`): one open instead of two for a new store, for a backend whose open
    ///   costs a connection and takes the same lock with a schema as without (PostgreSQL). An open
    ///   with a schema must refuse any other stored schema before it changes the store (every
    ///   engine's goes through `Schema.resolve`; PostgreSQL's checks it before it upgrades the
    ///   store's format, in the transaction it rolls back). SQLite's open with a schema takes the
    ///   write lock, which an open of an existing store should not wait for, so it is off by
    ///   default.
    public static func open<E: StorageEngine>(
        requested: Schema?, upgrades: SchemaUpgrades, location: String, requestedFirst: Bool = false,
        _ open: (Schema?) throws -> E
    ) throws -> E {
        guard let requested = try requested?.resolved() else { return try open(nil) }
        if requestedFirst {
            do {
                return try open(requested)
            } catch let error as StoreError where error.code == .schemaMismatch || error.code == .newerSchemaVersion {}
        }
        let engine: E
        do {
            engine = try open(nil)
        } catch let error as StoreError where error.code == .notFound {
            return try open(requested)
        }
        let stored = engine.schema
        if stored == requested { return engine }
        let plan: Plan
        do {
            plan = try self.plan(from: stored, to: requested, upgrades: upgrades, location: location)
        } catch {
            try? engine.close()
            throw error
        }
        try engine.close()
        // The steps rebuild and rename tables, which engines that enforce references natively
        // (SQLite's foreign keys) do with enforcement off; the store checks references itself.
        let editing = try MigrationGate.$defersReferenceChecks.withValue(true) { try open(nil) }
        do {
            try apply(plan, to: editing, upgrades: upgrades)
        } catch {
            try? editing.close()
            throw error
        }
        try editing.close()
        return try open(requested)
    }

    /// The actions that bring `stored` to `requested`, checked without touching the store.
    static func plan(from stored: Schema, to requested: Schema, upgrades: SchemaUpgrades,
                     location: String) throws -> Plan {
        if stored.version > requested.version {
            throw StoreError(.newerSchemaVersion, "\(location) holds schema version \(stored.version), newer than this "
                + "app's version \(requested.version); it was written by a newer version of the app and is left "
                + "unchanged")
        }
        if stored.version == requested.version {
            let differences = SchemaDifference.between(stored: stored, requested: requested)
            let detail = differences.isEmpty ? "the order of entities, attributes or indexes differs"
                : SchemaDifference.list(differences)
            throw StoreError(.schemaMismatch, "\(location) holds a different schema of the same version "
                + "\(stored.version): \(detail); a changed schema needs a new version and migration steps")
        }
        try requested.validate()
        var planner = Planner(schema: stored, location: location)
        // Only the versions that have steps, in order: versions far apart (date-stamped ones, or a
        // damaged stored version) are not counted through one by one.
        for version in upgrades.steps.keys.sorted() where version > stored.version && version <= requested.version {
            planner.schema.version = version
            for step in upgrades.steps[version] ?? [] {
                try planner.add(step, version: version)
            }
        }
        planner.schema.version = requested.version
        let differences = SchemaDifference.between(stored: planner.schema, requested: requested)
        guard differences.isEmpty else {
            throw StoreError(.schemaMismatch, "\(location): migrating from version \(stored.version) to "
                + "\(requested.version) leaves differences no step accounts for: " + SchemaDifference.list(differences))
        }
        planner.finish(at: requested)
        return Plan(from: stored, to: requested, actions: planner.actions)
    }

    /// Applies a plan in one write transaction.
    static func apply(_ plan: Plan, to engine: any StorageEngine, upgrades: SchemaUpgrades) throws {
        try engine.withRestartableWriter { writer in
            guard let editor = writer as? any SchemaEditingWriter else {
                throw StoreError(.invalidArgument, "this backend cannot change a store's schema")
            }
            for action in plan.actions {
                try action.run(editor, upgrades.progress)
            }
            // No step may leave a reference dangling (a default target that does not exist, a
            // custom step that deleted what others refer to): the whole migration is refused.
            if plan.to.entities.contains(where: { !$0.relationships.isEmpty }) {
                let report = try ReadAccessor(reader: writer, catalog: Catalog(plan.to)).checkReferences(listing: 5)
                if report.danglingCount > 0 {
                    throw StoreError(.referenceViolation, "the migration to schema version \(plan.to.version) would "
                        + "leave \(report.danglingCount) dangling reference\(report.danglingCount == 1 ? "" : "s"), so "
                        + "nothing was changed: \(report.summary)")
                }
            }
            var history = try readHistory(writer)
            history.append(SchemaHistoryEntry(
                fromVersion: plan.from.version, toVersion: plan.to.version,
                steps: plan.actions.flatMap(\.historyLines),
                date: try Timestamp(Date())))
            try writer.setMetadata(try encodeHistory(history), forKey: historyKey)
            // The migration's rewrites are not listed in the change feed: every earlier token
            // expires, so a follower resynchronizes instead of missing them.
            try ChangeLog.restart(writer)
            try editor.writeSchema(plan.to)
        }
    }

    /// The metadata key of the migration history (JSON).
    static let historyKey = "datastore.schema.history"

    static func readHistory(_ reader: any StorageReader) throws -> [SchemaHistoryEntry] {
        guard let bytes = try reader.metadata(forKey: historyKey) else { return [] }
        return try decodeHistory(bytes)
    }

    static func decodeHistory(_ bytes: [UInt8]) throws -> [SchemaHistoryEntry] {
        do {
            return try JSONDecoder().decode([SchemaHistoryEntry].self, from: Data(bytes))
        } catch {
            throw StoreError(.corrupt, "the store's schema history cannot be read: \(error)")
        }
    }

    static func encodeHistory(_ history: [SchemaHistoryEntry]) throws -> [UInt8] {
        do {
            return Array(try JSONEncoder.sortingKeys().encode(history))
        } catch {
            throw StoreError(.invalidValue, "the schema history cannot be encoded: \(error)")
        }
    }

    /// What a migration will do, in order.
    struct Plan {
        let from: Schema
        let to: Schema
        let actions: [Action]
    }

    /// One change of the store's storage.
    struct Action {
        let version: Int
        let description: String
        /// The steps it stands for, as the history words them (none for the implicit reordering).
        let historyLines: [String]
        let kind: Kind

        enum Kind {
            case create(EntitySchema)
            case drop(EntitySchema)
            case rename(EntitySchema, EntitySchema)
            case change(old: EntitySchema, new: EntitySchema, renamed: [String: String],
                        transform: ((Record) throws -> Record?)?, conversion: AttributeConversion?,
                        checkUnique: [Index])
            case custom(Schema, @Sendable (WriteAccessor) throws -> Void)
        }

        func run(_ editor: any SchemaEditingWriter,
                 _ progress: (@Sendable (SchemaUpgradeProgress) -> Void)?) throws {
            switch kind {
            case .create(let entity):
                try editor.createEntity(entity)
            case .drop(let entity):
                try editor.dropEntity(entity)
            case let .rename(entity, renamed):
                try editor.renameEntity(entity, to: renamed)
            case let .change(old, new, renamed, transform, conversion, checkUnique):
                let total = try editor.count(.all, in: old)
                var done = 0
                let report: (Int) -> Void = { n in
                    done += n
                    if done % 10_000 == 0 || done == total {
                        progress?(SchemaUpgradeProgress(version: version, step: description, items: done,
                                                          totalItems: total))
                    }
                }
                let change = EntityChange(old: old, new: new, renamedAttributes: renamed, transform: transform,
                                          conversion: conversion, visited: report)
                if !checkUnique.isEmpty {
                    let quiet = EntityChange(old: old, new: new, renamedAttributes: renamed, transform: transform,
                                             conversion: conversion, visited: { _ in })
                    try UniqueCheck.run(quiet, checkUnique, editor)
                }
                try editor.changeEntity(change)
                progress?(SchemaUpgradeProgress(version: version, step: description, items: total,
                                                  totalItems: total))
            case let .custom(schema, body):
                let accessor = WriteAccessor(writer: editor, catalog: Catalog(schema))
                defer { accessor.expire() }
                try body(accessor)
            }
        }
    }
}

/// Finds items that would share values under new unique indexes, before anything changes.
enum UniqueCheck {
    static let page = 1_000

    /// - Throws: `uniqueViolation` naming the index and listing the conflicting items (at most
    ///   the first 20 groups).
    static func run(_ change: EntityChange, _ indexes: [Index], _ reader: any StorageReader) throws {
        var owners: [[[Value]: PrimaryKey]] = Array(repeating: [:], count: indexes.count)
        var conflicts: [[[Value]: [PrimaryKey]]] = Array(repeating: [:], count: indexes.count)
        var after: PrimaryKey?
        while true {
            let records = try reader.scan(change.old, after: after, limit: page)
            for record in records {
                let key = try PrimaryKey(record[change.old.primaryKey])
                after = key
                guard let new = try change.newRecord(from: record) else { continue }
                for (i, index) in indexes.enumerated() {
                    guard let tuple = UniqueIndexRule.tuple(new, index) else { continue }
                    if let first = owners[i].updateValue(key, forKey: tuple), first != key {
                        owners[i][tuple] = first
                        conflicts[i][tuple, default: [first]].append(key)
                    }
                }
            }
            if records.count < page { break }
        }
        for (i, index) in indexes.enumerated() where !conflicts[i].isEmpty {
            let groups = conflicts[i].sorted { $0.value[0] < $1.value[0] }
            let listed = groups.prefix(20).map { tuple, keys in
                "(\(tuple.map(\.description).joined(separator: ", "))): "
                    + keys.map { "\(change.new.name)[\($0)]" }.joined(separator: ", ")
            }
            let more = groups.count > 20 ? "; and \(groups.count - 20) more values" : ""
            throw StoreError(
                .uniqueViolation,
                "unique index '\(change.new.name).\(index.name)' cannot hold the existing items: "
                    + listed.joined(separator: "; ") + more,
                items: groups.flatMap { $0.value.map { StoreError.ItemReference(entity: change.new.name, key: $0.value) } })
        }
    }
}

extension SchemaPlan {
    /// The schema a store holding `stored` reaches with the plan's versions above its own,
    /// checked step by step (nothing is read or written).
    /// - Throws: what a step that cannot apply throws, naming the step.
    public func target(from stored: Schema) throws -> Schema {
        guard let top = targetVersion, top > stored.version else { return stored }
        var planner = Planner(schema: stored, location: "plan")
        // The plan's versions in order, not every number between (see ``SchemaUpgrader``).
        for version in Set(versions.map(\.version)).sorted() where version > stored.version && version <= top {
            planner.schema.version = version
            for step in versions.filter({ $0.version == version }).flatMap(\.steps) {
                try planner.add(step, version: version)
            }
        }
        planner.schema.version = top
        return planner.schema
    }

    /// The steps the plan applies to a store holding `stored`, with their versions, in order.
    public func steps(from stored: Schema) -> [(version: Int, step: SchemaStep)] {
        versions.filter { $0.version > stored.version }.sorted { $0.version < $1.version }
            .flatMap { version in version.steps.map { (version.version, $0) } }
    }
}

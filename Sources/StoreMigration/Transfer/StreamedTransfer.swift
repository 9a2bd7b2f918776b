@_spi(Backend) import DataStoreAPI
import Foundation

/// Copies and syncs into a kind of store written whole (``StreamedStoreBackend``: JSON Lines):
/// the source snapshot is written as one stream, with a checkpoint per batch, and moved into
/// place when complete.
extension Migrator {
    static func copyStreamed(_ backend: any StreamedStoreBackend, from source: StoreLocation,
                             to destination: StoreLocation, _ options: MigrationOptions,
                             _ shouldStop: @escaping () -> Bool,
                             _ progress: @escaping (MigrationProgress) -> Void) throws -> MigrationReport {
        let (sourceStore, schema, sourceCheck) = try openSource(source, distinctFrom: destination, options)
        defer { try? sourceStore.close() }
        let run = MigrationRun(operation: .copy, source, destination, options, shouldStop, progress)
        run.report.sourceCheck = sourceCheck
        run.report.resumed = options.resume
        var written: (any DataStore)?
        var writer: any StreamedStoreWriter
        if options.resume {
            let resumed = try backend.resumeStream(at: destination.path, schema: schema, key: destination.key)
            writer = resumed.writer
            written = resumed.written
        } else {
            if options.overwrite {
                try destination.requireReplaceable()
            } else {
                if destination.exists {
                    throw StoreError(.invalidArgument, "destination \(destination) already exists; replace it "
                        + "with --overwrite")
                }
                if backend.hasUnfinishedStream(at: destination.path) {
                    throw StoreError(.invalidArgument, "destination \(destination) is an unfinished copy: finish it "
                        + "with --resume or replace it with --overwrite")
                }
            }
            if options.dryRun { return try dryRun(run, sourceStore, schema) }
            writer = try backend.beginStream(at: destination.path, schema: schema, source: source.description,
                                             key: destination.key)
            try FilePermissions(of: source)?.apply(to: destination.path)
        }
        defer { try? written?.close() }
        try run.interruptible {
            try sourceStore.read { snapshot in
                // What an interrupted run wrote must equal the snapshot up to its checkpoint, or the
                // source changed since and the copy starts over.
                if let store = written {
                    let same = try writtenPrefixMatches(store, snapshot, schema, writer.position)
                    try store.close()
                    written = nil
                    if !same {
                        writer.abandon()
                        writer = try backend.beginStream(at: destination.path, schema: schema, source: source.description,
                                                         key: destination.key)
                        run.report.startedOver = true
                    }
                }
                var position = writer.position
                for entity in schema.entities {
                    try run.entity(entity, phase: .copy, snapshot) { entry, _, tick in
                        if position.finishedEntities.contains(entity.name) { return }
                        let after = position.entity == entity.name ? position.lastKey : nil
                        let limit = options.batchSize.value
                        try snapshot.forEachPage(entity, pageSize: limit, after: after) { page in
                            for record in page { try writer.append(record, of: entity) }
                            if let last = page.last {
                                position.entity = entity.name
                                position.lastKey = entity.primaryKeyValue(of: last)
                            }
                            if page.count < limit {
                                position.finishedEntities.append(entity.name)
                                position.entity = nil
                                position.lastKey = nil
                            }
                            try writer.checkpoint(position)
                            entry.itemsRead += page.count
                            entry.itemsWritten += page.count
                            tick(entry.itemsRead)
                            if page.count == limit && shouldStop() { throw StopRequested() }
                            return true
                        }
                    }
                }
                // The stream is verified as its last checkpoint left it, and its references
                // checked, as every destination's are, then moved into place: a run killed while
                // verifying leaves it unfinished, and --resume verifies it. One with dangling
                // references stays unfinished (a source copied with --no-check can hold them).
                let store = try writer.openWritten()
                defer { try? store.close() }
                if options.verify { try run.verify(schema, snapshot, store) }
                try requireReferences(store, destination)
                if run.report.differences == 0 { try writer.finish() }
            }
        }
        return run.finish()
    }

    /// Writes the snapshot as a new stream that replaces the destination, counting the
    /// differences with what it held by a merge join; entities the run does not select are
    /// copied from the old destination.
    static func syncStreamed(_ backend: any StreamedStoreBackend, from source: StoreLocation,
                             to destination: StoreLocation, _ options: MigrationOptions,
                             _ shouldStop: @escaping () -> Bool,
                             _ progress: @escaping (MigrationProgress) -> Void) throws -> MigrationReport {
        let (sourceStore, schema, sourceCheck) = try openSource(source, distinctFrom: destination, options)
        defer { try? sourceStore.close() }
        let old = try destination.openSource()
        defer { try? old.close() }
        try requireEntities(of: schema, in: old.schema, destination, selected: options.entities)
        let run = MigrationRun(operation: .sync, source, destination, options, shouldStop, progress)
        run.report.sourceCheck = sourceCheck
        let writer = try backend.beginStream(at: destination.path, schema: old.schema, source: source.description,
                                             key: destination.key)
        do {
            try run.interruptible {
                try sourceStore.read { snapshot in
                    try old.read { previous in
                        for entity in old.schema.entities {
                            let selected = schema.entity(named: entity.name) != nil
                            try run.entity(entity, phase: .sync, selected ? snapshot : previous) { entry, _, tick in
                                try streamEntity(entity, from: selected ? snapshot : previous, comparedWith: previous,
                                                 into: writer, options.batchSize, &entry, tick, shouldStop)
                            }
                        }
                    }
                }
            }
            try old.close()
            try writer.finish()
        } catch {
            writer.abandon()
            throw error
        }
        return run.finish()
    }

    /// Appends every item of `entity` from `reader` to `writer`, counting against `previous`
    /// (the destination before) the items written new or changed and those dropped.
    private static func streamEntity(_ entity: EntitySchema, from reader: ReadAccessor, comparedWith previous: ReadAccessor,
                                     into writer: any StreamedStoreWriter, _ batchSize: PositiveInt,
                                     _ entry: inout EntityReport, _ tick: (Int) -> Void,
                                     _ shouldStop: () -> Bool) throws {
        let limit = batchSize.value
        var ours = PageCursor(reader: reader, entity: entity, limit: limit)
        var theirs = PageCursor(reader: previous, entity: entity, limit: limit)
        try PageCursor.mergeJoin(&ours, &theirs) { step in
            switch step {
            case .sourceOnly(_, let record):
                entry.itemsWritten += 1
                entry.itemsRead += 1
                try writer.append(record, of: entity)
            case .both(_, let record, let old):
                if old != record { entry.itemsWritten += 1 }
                entry.itemsRead += 1
                try writer.append(record, of: entity)
            case .destinationOnly:
                // An item of the old destination that the source no longer holds.
                entry.itemsDeleted += 1
                return true
            }
            if entry.itemsRead % limit == 0 {
                tick(entry.itemsRead)
                if shouldStop() { throw StopRequested() }
            }
            return true
        }
        tick(entry.itemsRead)
    }

    /// Whether `written` (an interrupted stream's items up to `position`) equals the snapshot
    /// over the same range.
    private static func writtenPrefixMatches(_ written: any DataStore, _ snapshot: ReadAccessor, _ schema: Schema,
                                             _ position: StreamPosition) throws -> Bool {
        try written.read { ours in
            for entity in schema.entities {
                let whole = position.finishedEntities.contains(entity.name)
                guard whole || position.entity == entity.name else { continue }
                let end = whole ? nil : position.lastKey
                var mine = PageCursor(reader: ours, entity: entity, limit: 1_000)
                var theirs = PageCursor(reader: snapshot, entity: entity, limit: 1_000)
                var same = true
                // The snapshot up to the stream's last key against everything the stream holds.
                try PageCursor.mergeJoin(&theirs, &mine, sourceThrough: end) { step in
                    guard case .both(_, let expected, let written) = step, expected == written else {
                        same = false
                        return false
                    }
                    return true
                }
                if !same { return false }
            }
            return true
        }
    }

    /// A dry run's report: the snapshot's count of each entity, nothing written.
    static func dryRun(_ run: MigrationRun, _ store: any DataStore, _ schema: Schema) throws -> MigrationReport {
        try store.read { snapshot in
            for entity in schema.entities {
                var entry = EntityReport(entity: entity.name)
                entry.itemsRead = try snapshot.count(FetchRequest(entity.name))
                run.report.entities.append(entry)
            }
        }
        return run.finish()
    }
}

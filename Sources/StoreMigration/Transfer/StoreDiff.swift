@_spi(Backend) import DataStoreAPI

/// The one streaming pass that compares a source snapshot with a destination: a merge join of
/// both in canonical key order, a page at a time, in constant memory. Applied, it makes the
/// destination equal to the snapshot (sync, resume); compared, it counts the differences
/// (verify).
struct StoreDiff {
    enum Mode { case apply, compare }

    let entity: EntitySchema
    let source: ReadAccessor
    let destination: any DataStore
    let batchSize: PositiveInt
    let mode: Mode
    /// The key the pass starts after; `nil`: from the first key.
    var after: Value? = nil
    /// The last key the pass covers; `nil`: every key.
    var through: Value? = nil
    /// Called inside each write transaction with the last source key of the batch.
    let checkpoint: (WriteAccessor, Value?) throws -> Void
    let progress: (Int) -> Void
    let shouldStop: () -> Bool

    private enum Change {
        /// An item the destination lacks: runs of them go in one `insert(contentsOf:)` (a COPY
        /// on a server backend).
        case insert(Record)
        case save(Record)
        case delete(Value)
    }

    /// What the pass found for one key: a compare counts it (and names the first 20), an apply
    /// makes the change.
    private enum Difference {
        case missing(Value, Record)
        case extra(Value)
        case differs(Value, Record)

        var change: Change {
            switch self {
            case .missing(_, let record): return .insert(record)
            case .extra(let key): return .delete(key)
            case .differs(_, let record): return .save(record)
            }
        }

        func sample(_ entity: String) -> String {
            switch self {
            case .missing(let key, _): return "\(entity)[\(key)]: missing in the destination"
            case .extra(let key): return "\(entity)[\(key)]: not in the source"
            case .differs(let key, _): return "\(entity)[\(key)]: differs"
            }
        }
    }

    func run(_ report: inout EntityReport, samples: inout [String]) throws {
        let name = entity.name
        let limit = batchSize.value
        var src = PageCursor(reader: source, entity: entity, limit: limit, after: after)
        // Each destination page in a read transaction of its own: the pass writes between them.
        // A compare writes nothing, so its destination pages are read ahead on another thread
        // while this one compares.
        let fetch: @Sendable (Value?, inout [Record]) throws -> Void = { [destination] after, page in
            try destination.read { try $0.scan(name, after: after, limit: limit, into: &page) }
        }
        var dst = mode == .compare
            ? PageCursor(entity: entity, limit: limit, after: after, readingAhead: fetch)
            : PageCursor(entity: entity, limit: limit, after: after, fetch: fetch)
        defer { dst.finishReadingAhead() }
        var pending: [Change] = []
        var lastSourceKey: Value?
        var sinceProgress = 0
        // Items past the batches so far that a batch written as replacements wrote or deleted
        // (``writeReplacing(_:_:)``): the destination's page read before may still show them as
        // they were, and they are not written, deleted or counted again when the pass reaches
        // them.
        var replaced = Set<Value>()  // Membership only.
        // The pass's state is changed only in this closure, never in a function it calls (a
        // nested function that captured `pending` or `lastSourceKey` boxed them, and each access
        // in the closure then cost a dynamic exclusivity check: two per item; callgrind of
        // `profile-store sqlite verify 100000` counted 5,198 instructions an item with them and
        // 5,104 without).
        try PageCursor.mergeJoin(&src, &dst, sourceThrough: through, destinationThrough: through) { step in
            let difference: Difference?
            switch step {
            case .sourceOnly(let key, let record):
                difference = .missing(key, record)
                report.itemsRead += 1
                if mode == .apply { report.itemsWritten += 1 }
                lastSourceKey = key
            case .destinationOnly(let key, _):
                if !replaced.isEmpty, replaced.remove(key) != nil {
                    difference = nil
                } else {
                    difference = .extra(key)
                    if mode == .apply { report.itemsDeleted += 1 }
                }
            case .both(let key, let source, let destination):
                if !replaced.isEmpty, replaced.remove(key) != nil {
                    difference = nil
                } else if source != destination {
                    difference = .differs(key, source)
                    if mode == .apply { report.itemsWritten += 1 }
                } else {
                    difference = nil
                }
                report.itemsRead += 1
                report.itemsVerified += mode == .compare ? 1 : 0
                lastSourceKey = key
            }
            if let difference {
                switch mode {
                case .compare:
                    report.differences += 1
                    if samples.count < 20 { samples.append(difference.sample(name)) }
                case .apply:
                    pending.append(difference.change)
                }
            }
            sinceProgress += 1
            if pending.count >= limit || sinceProgress >= limit {
                let besides = try flush(&pending, after: lastSourceKey)
                report.itemsWritten += besides.written.count
                report.itemsDeleted += besides.deleted.count
                replaced.formUnion(besides.written)
                replaced.formUnion(besides.deleted)
                progress(report.itemsRead)
                sinceProgress = 0
                if shouldStop() { throw StopRequested() }
            }
            return true
        }
        let besides = try flush(&pending, after: lastSourceKey)
        report.itemsWritten += besides.written.count
        report.itemsDeleted += besides.deleted.count
        progress(report.itemsRead)
    }

    /// Writes the changes a batch found, and the checkpoint after `key` (its last source key), in
    /// one transaction; a batch that found nothing to change writes nothing, not even a
    /// checkpoint: the one before it still holds (a resume interrupted here compares these items
    /// again). Only when applying.
    ///
    /// A batch that breaks a unique index as written in key order (two items that swap an email, a
    /// value that an item of a later batch gives up) is written again as replacements
    /// (``writeReplacing(_:_:)``).
    /// - Returns: the keys of the items written or deleted besides the batch's own (none but for
    ///   replacements), which the pass reaches later.
    private func flush(_ pending: inout [Change], after key: Value?) throws -> (written: [Value], deleted: [Value]) {
        guard mode == .apply, !pending.isEmpty else { return ([], []) }
        let changes = pending
        var besides: (written: [Value], deleted: [Value]) = ([], [])
        do {
            try destination.writeSync { writer in
                try write(changes, writer)
                try checkpoint(writer, key)
            }
        } catch let error as StoreError where error.code == .uniqueViolation && entity.indexes.contains(where: \.isUnique) {
            try destination.writeSync { writer in
                besides = try writeReplacing(changes, writer)
                try checkpoint(writer, key)
            }
        }
        pending.removeAll(keepingCapacity: true)
        return besides
    }

    /// The batch's changes, in key order after its deletes: a unique value that moved from a
    /// deleted item to a new or changed one (a customer's email under a new key) is free when the
    /// other is written. (The destination's writes have no delete rules: the order of the rest
    /// changes nothing else.)
    private func write(_ changes: [Change], _ writer: WriteAccessor) throws {
        let name = entity.name
        var missing: [Record] = []
        func insertMissing() throws {
            guard !missing.isEmpty else { return }
            do {
                try writer.insert(contentsOf: missing, into: name)
            } catch let error as StoreError where error.code == .keyExists {
                // Written meanwhile by someone else: saved over, as a sync does.
                for record in missing { try writer.save(record, into: name) }
            }
            missing.removeAll(keepingCapacity: true)
        }
        for case .delete(let key) in changes { _ = try writer.delete(name, key: key) }
        for change in changes {
            switch change {
            case .insert(let record): missing.append(record)
            case .save(let record):
                try insertMissing()
                try writer.save(record, into: name)
            case .delete:
                break
            }
        }
        try insertMissing()
    }

    /// The batch's changes as replacements, for a batch that broke a unique index written in key
    /// order. Every destination item that holds a unique value one of the batch's items is to
    /// take joins the batch at its source version (or as a delete, when the source has none),
    /// and so on for the values those take; then every item of the batch is deleted and its new
    /// version inserted. What is left clashing clashes in the source too (or was written
    /// meanwhile), and the write fails as before.
    /// - Returns: the keys of the items written and deleted that were not the batch's own.
    private func writeReplacing(_ changes: [Change], _ writer: WriteAccessor) throws -> (written: [Value], deleted: [Value]) {
        let name = entity.name
        let keyName = entity.primaryKey
        let unique = entity.indexes.filter(\.isUnique)
        var records: [Record] = []
        var deletes: [Value] = []
        var inBatch = Set<Value>()  // Membership only: the writes follow the arrays' order.
        for change in changes {
            switch change {
            case .insert(let record), .save(let record):
                records.append(record)
                inBatch.insert(record[keyName])
            case .delete(let key):
                deletes.append(key)
                inBatch.insert(key)
            }
        }
        var besides: (written: [Value], deleted: [Value]) = ([], [])
        var next = 0
        while next < records.count {
            let record = records[next]
            next += 1
            for index in unique {
                let values = index.attributes.map { record[$0] }
                guard !values.contains(.null) else { continue }  // Nulls never clash.
                var filter = Field(index.attributes[0]) == values[0]
                for (attribute, value) in zip(index.attributes, values).dropFirst() {
                    filter = filter && Field(attribute) == value
                }
                for holder in try writer.fetch(FetchRequest(name, filter: filter)) {
                    let key = holder[keyName]
                    guard inBatch.insert(key).inserted else { continue }
                    if let current = try source.get(name, key: key) {
                        records.append(current)
                        besides.written.append(key)
                    } else {
                        deletes.append(key)
                        besides.deleted.append(key)
                    }
                }
            }
        }
        for key in deletes { _ = try writer.delete(name, key: key) }
        for record in records { _ = try writer.delete(name, key: record[keyName]) }
        try writer.insert(contentsOf: records, into: name)
        return besides
    }
}

/// Raised inside a pass when the caller asked to stop; turned into ``MigrationInterrupted``.
struct StopRequested: Error {}

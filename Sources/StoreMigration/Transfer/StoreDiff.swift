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
                difference = .extra(key)
                if mode == .apply { report.itemsDeleted += 1 }
            case .both(let key, let source, let destination):
                if source != destination {
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
                try flush(&pending, after: lastSourceKey)
                progress(report.itemsRead)
                sinceProgress = 0
                if shouldStop() { throw StopRequested() }
            }
            return true
        }
        try flush(&pending, after: lastSourceKey)
        progress(report.itemsRead)
    }

    /// Writes the changes a batch found, and the checkpoint after `key` (its last source key), in
    /// one transaction; a batch that found nothing to change writes nothing, not even a
    /// checkpoint: the one before it still holds (a resume interrupted here compares these items
    /// again). Only when applying.
    private func flush(_ pending: inout [Change], after key: Value?) throws {
        guard mode == .apply, !pending.isEmpty else { return }
        let changes = pending
        let name = entity.name
        try destination.writeSync { writer in
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
            // The batch's deletes first: a unique value that moved from a deleted item to a new
            // or changed one (a customer's email under a new key) is free when the other is
            // written. (The destination's writes have no delete rules: the order of the rest
            // changes nothing else.)
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
            try checkpoint(writer, key)
        }
        pending.removeAll(keepingCapacity: true)
    }
}

/// Raised inside a pass when the caller asked to stop; turned into ``MigrationInterrupted``.
struct StopRequested: Error {}

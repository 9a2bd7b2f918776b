@_spi(Backend) import DataStoreAPI

/// The paged, checkpointed copy of one entity: the one place where items move from a source into
/// a destination that holds none of them. ``Migrator/copy(from:to:options:shouldStop:progress:)``
/// and ``SwitchingStore``'s background copy both run it.
///
/// Pages of the source are read in key order; each is written in one write transaction of the
/// destination together with the checkpoint that names its last key, so that a copy stopped or
/// killed anywhere resumes after the last committed page. The calling thread reads the next page
/// while a worker writes the one before (``PageWorker``): the two stores work at once, the pages
/// still commit one after the other in key order, and a stop or an error waits for the write in
/// flight, so that the last checkpoint names what is committed.
struct PagedCopy {
    /// The store the pages are written into.
    let destination: any DataStore
    /// Items per page, and so per write transaction and checkpoint.
    let batchSize: PositiveInt
    /// Asked once after each page's write has started; when it returns true the copy waits for
    /// that write and throws ``StopRequested``.
    let shouldStop: () -> Bool
    /// Runs before each page is read (the switch's pacing).
    var beforePage: () -> Void = {}
    /// When set, the first page reads at most 1,000 items, and each later page as many as fit in
    /// about this many bytes (measured on the first page, as compact records hold the values),
    /// at least 1,000 and at most `batchSize`: a large batch that the destination chose, not the
    /// user, then holds no more memory than pages of 1,000 did when items are large.
    var pageBytes: Int?

    /// Sets ``pageBytes`` to 32 MiB when the batch is the destination's choice (`chosen` false)
    /// and above 1,000: a large batch then grows only while its pages stay small.
    mutating func measurePages(batchChosen chosen: Bool) {
        if !chosen, batchSize.value > 1_000 { pageBytes = 32 << 20 }
    }

    /// Copies the items of `entity` after `start` (all when `nil`), up to and including `bound`
    /// when one is given.
    ///
    /// - Parameters:
    ///   - reading: runs its argument with a reader of the source: the same snapshot for every
    ///     page, or a read transaction of its own per page.
    ///   - checkpoint: writes the checkpoint that names a page's last key, in that page's
    ///     transaction.
    ///   - committed: called with the items committed so far, once a page's transaction has
    ///     committed (a process killed after it loses none of them).
    /// - Returns: the items copied.
    func copy(_ entity: EntitySchema, after start: Value?, through bound: Value? = nil,
              reading: ((ReadAccessor) throws -> Void) throws -> Void,
              checkpoint: @escaping (WriteAccessor, Value) throws -> Void,
              committed: (Int) -> Void) throws -> Int {
        var limit = pageBytes == nil ? batchSize.value : min(batchSize.value, 1_000)
        var measured = false
        let name = entity.name
        let destination = self.destination
        var after = start
        var copied = 0
        var inFlight = 0
        // Two page buffers, each array's storage kept for the next page once the destination let go
        // of it: this thread reads into one while the worker writes the other.
        var page: [Record] = []
        // Each page is checked for the destination's entity here, while the worker writes the
        // page before; the worker stores it (a COPY on PostgreSQL, whose server would otherwise
        // wait for the check), and the checked items of a page that was written are let go of
        // here too, once the next page's write has begun.
        let checkedFor = destination.schema.entity(named: name) ?? entity
        var written: WriteAccessor.CheckedInserts?
        let writes = PageWorker()
        defer { writes.drain() }
        func settle() throws -> [Record] {
            let spare = try writes.take()
            if inFlight > 0 {
                copied += inFlight
                inFlight = 0
                committed(copied)
            }
            return spare
        }
        while true {
            if let bound, let after, try KeyEncoding.compareKeys(after, bound) >= 0 { break }
            beforePage()
            let asked = limit
            try reading { try $0.scan(name, after: after, limit: asked, into: &page) }
            if let bound {
                while let key = page.last?[entity.primaryKey], try KeyEncoding.compareKeys(key, bound) > 0 {
                    page.removeLast()
                }
            }
            guard let last = page.last?[entity.primaryKey] else { break }
            let count = page.count
            if let pageBytes, !measured {
                measured = true
                let bytes = page.reduce(0) { total, record in
                    record.values(in: entity.layout).reduce(total) { $0 + FieldWriter.size(of: $1) }
                }
                limit = min(batchSize.value, max(limit, pageBytes / max(1, bytes / count)))
            }
            let checked = WriteAccessor.check(page, for: checkedFor)
            // The page's records go once checked (the checked items hold values of their own), so
            // that while this thread waits it holds one checked page besides the one being
            // written, as it held one read page before the check moved here.
            page.removeAll(keepingCapacity: true)
            let spare = try settle()
            writes.start(page) { _ in
                try destination.writeSync { writer in
                    try writer.insert(checked)
                    try checkpoint(writer, last)
                }
            }
            // (The page before's checked items go here: its write is over.)
            withExtendedLifetime(written) {}
            written = checked
            inFlight = count
            page = spare
            after = last
            if shouldStop() {
                _ = try settle()
                throw StopRequested()
            }
            // A short page (or one cut at the bound) is the entity's last.
            if count < asked { break }
        }
        _ = try settle()
        return copied
    }
}

@_spi(Backend) import DataStoreAPI
import Dispatch

/// An entity's items in key order, a page at a time: the cursor of every merge join of two
/// stores. The current item's primary key is read once, when the cursor reaches the item, and
/// compared as a value (``KeyEncoding/compareKeys(_:_:)``, the encoded keys' order) without
/// encoding it.
struct PageCursor {
    let entity: EntitySchema
    let limit: Int
    private let fetch: (Value?, inout [Record]) throws -> Void
    private var page: [Record] = []
    private var index = 0
    private var after: Value?
    private var exhausted = false
    /// The current item's primary key (meaningful after ``load()`` returned true).
    private(set) var key: Value = .null
    /// Reads pages ahead on a worker thread (``init(entity:limit:after:readingAhead:)``), with
    /// the fetch it runs there.
    private var ahead: (worker: PageWorker, fetch: (Value?, inout [Record]) throws -> Void)?

    /// Pages that `fetch` reads into the page it is given (the last one, its array's storage
    /// kept: ``ReadAccessor/scan(_:after:limit:into:)``): up to `limit` items
    /// after the key it is given, starting after `start` (from the first key when `nil`).
    init(entity: EntitySchema, limit: Int, after start: Value? = nil,
         fetch: @escaping (Value?, inout [Record]) throws -> Void) {
        self.entity = entity
        self.limit = limit
        self.fetch = fetch
        after = start
    }

    /// Pages that `fetch` reads on a worker thread, each in a read of its own, while the caller
    /// works through the page before it: for a store only read during the pass (a verify's
    /// destination), so that both stores are read at once on two cores. The next page is asked
    /// for as soon as a page arrives, after the key that page ends with.
    init(entity: EntitySchema, limit: Int, after start: Value? = nil,
         readingAhead fetch: @escaping @Sendable (Value?, inout [Record]) throws -> Void) {
        self.init(entity: entity, limit: limit, after: start, fetch: { _, _ in })
        ahead = (PageWorker(), fetch)
    }

    /// Pages of one read transaction.
    init(reader: ReadAccessor, entity: EntitySchema, limit: Int, after start: Value? = nil) {
        self.init(entity: entity, limit: limit, after: start, fetch: { after, page in
            try reader.scan(entity.name, after: after, limit: limit, into: &page)
        })
    }

    /// Whether there is a current item, reading the next page when the last is used up.
    mutating func load() throws -> Bool {
        if index < page.count { return true }
        guard !exhausted else { return false }
        if let (worker, fetch) = ahead {
            // The worker reads the next page into the buffer of the page just used up.
            if !worker.isBusy {
                let start = after
                worker.start([]) { try fetch(start, &$0) }
            }
            let previous = page
            page = []
            page = try worker.take()
            if page.count == limit, let last = page.last {
                let next = entity.primaryKeyValue(of: last)
                worker.start(consume previous) { try fetch(next, &$0) }
            }
        } else {
            try fetch(after, &page)
        }
        index = 0
        exhausted = page.count < limit
        guard let last = page.last else {
            exhausted = true
            return false
        }
        after = entity.primaryKeyValue(of: last)
        key = entity.primaryKeyValue(of: page[0])
        return true
    }

    /// The current item (only after ``load()`` returned true).
    var record: Record { page[index] }

    /// The order of the current keys of both cursors (both loaded): negative when this one's
    /// comes first.
    func compareKey(with other: PageCursor) throws -> Int {
        try KeyEncoding.compareKeys(key, other.key)
    }

    mutating func advance() {
        index += 1
        if index < page.count { key = entity.primaryKeyValue(of: page[index]) }
    }

    /// Waits for a page the worker is still reading (a pass that ends early, or throws): no read
    /// of the store outlives the pass.
    func finishReadingAhead() {
        ahead?.worker.drain()
    }
}

/// One step of a merge join of a source and a destination in key order.
enum MergeStep {
    /// An item only the source holds.
    case sourceOnly(key: Value, record: Record)
    /// An item only the destination holds.
    case destinationOnly(key: Value, record: Record)
    /// The items both hold under one key.
    case both(key: Value, source: Record, destination: Record)
}

extension PageCursor {
    /// The merge join of two stores in key order: hands `body` each step (an item only one side
    /// holds, or the items both hold under one key) and then moves past it, until both cursors
    /// are used up (each up to its bound, when one is given) or `body` returns false. The one
    /// merge join of the package: a copy's resume, sync, verify, diff, the streamed sync and the
    /// streamed copy's resume check all walk two stores with it.
    static func mergeJoin(_ source: inout PageCursor, _ destination: inout PageCursor,
                          sourceThrough: Value? = nil, destinationThrough: Value? = nil,
                          _ body: (MergeStep) throws -> Bool) throws {
        func loaded(_ cursor: inout PageCursor, _ bound: Value?) throws -> Bool {
            guard try cursor.load() else { return false }
            guard let bound else { return true }
            return try KeyEncoding.compareKeys(cursor.key, bound) <= 0
        }
        while true {
            let hasSource = try loaded(&source, sourceThrough)
            let hasDestination = try loaded(&destination, destinationThrough)
            if !hasSource && !hasDestination { return }
            let order = !hasSource ? 1 : !hasDestination ? -1 : try source.compareKey(with: destination)
            let step: MergeStep = order < 0 ? .sourceOnly(key: source.key, record: source.record)
                : order > 0 ? .destinationOnly(key: destination.key, record: destination.record)
                : .both(key: source.key, source: source.record, destination: destination.record)
            guard try body(step) else { return }
            if order <= 0 { source.advance() }
            if order >= 0 { destination.advance() }
        }
    }
}

/// A worker thread with one page in flight: ``start(_:_:)`` hands it a page and a job on that
/// page (read the next page into it, or write it into a store), ``take()`` waits for the job and
/// hands the page back, for the next job or the caller's use. The read-ahead of a cursor
/// (``PageCursor/init(entity:limit:after:readingAhead:)``) and the writes of a copy
/// (``MigrationRun/copyEntity(_:_:_:after:_:_:_:)``) run on it. Only the caller's thread calls
/// it; the worker sets the page and the failure before it signals, and the caller reads them
/// after waiting for that signal. The jobs run on a thread of the worker's own
/// (``StoreThreads``), which ends with the worker.
final class PageWorker: @unchecked Sendable {
    private let thread: StoreThreads
    private let done = DispatchSemaphore(value: 0)
    private var page: [Record] = []
    private var job: ((inout [Record]) throws -> Void)?
    private var failure: (any Error)?
    /// Whether a job was started and its page not taken yet.
    private(set) var isBusy = false

    init() {
        thread = StoreThreads(label: "DataStore.migration")
    }

    /// Runs `job` on `page` on the worker (its array's storage kept, when the job reads into
    /// it). Call ``take()`` for the job before, first.
    func start(_ page: consuming [Record], _ job: @escaping (inout [Record]) throws -> Void) {
        self.page = page
        self.job = job
        failure = nil
        isBusy = true
        thread.submit { [self] in
            var page = self.page
            self.page = []
            do {
                try self.job?(&page)
            } catch {
                failure = error
                page = []
            }
            self.job = nil
            self.page = page
            done.signal()
        }
    }

    /// Waits for the job in flight, if any, and hands its page back (empty when there was none).
    /// - Throws: what the job threw.
    func take() throws -> [Record] {
        guard isBusy else { return [] }
        done.wait()
        isBusy = false
        let taken = page
        page = []
        if let failure { throw failure }
        return taken
    }

    /// Waits for the job in flight, if any, ignoring its outcome (the caller is already failing
    /// or done): no read or write of a store outlives the pass that started it.
    func drain() {
        guard isBusy else { return }
        done.wait()
        isBusy = false
        page = []
    }
}

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
    /// Reads pages ahead on a worker thread (``init(entity:limit:after:readingAhead:)``).
    private var ahead: PageAhead?

    /// Pages that `fetch` reads into the page it is given (the last one, refilled where no copy
    /// of its records is alive: ``ReadAccessor/scan(_:after:limit:into:)``): up to `limit` items
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
        ahead = PageAhead(fetch: fetch)
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
        if let ahead {
            // The worker reads the next page into the buffer of the page just used up.
            if !ahead.isReading { ahead.start(after: after, reusing: []) }
            let previous = page
            page = []
            page = try ahead.take()
            if page.count == limit, let last = page.last {
                ahead.start(after: entity.primaryKeyValue(of: last), reusing: consume previous)
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

    /// Whether the current items of both cursors are equal (both loaded).
    func recordEquals(_ other: PageCursor) -> Bool { page[index] == other.page[other.index] }

    /// The order of the current keys of both cursors (both loaded): negative when this one's
    /// comes first.
    func compareKey(with other: PageCursor) throws -> Int {
        try KeyEncoding.compareKeys(key, other.key)
    }

    /// The current item and its primary key.
    mutating func peek() throws -> (key: Value, record: Record)? {
        try load() ? (key, page[index]) : nil
    }

    mutating func advance() {
        index += 1
        if index < page.count { key = entity.primaryKeyValue(of: page[index]) }
    }

    /// Waits for a page the worker is still reading (a pass that ends early, or throws): no read
    /// of the store outlives the pass.
    func finishReadingAhead() {
        ahead?.drain()
    }
}

/// The worker of a cursor that reads ahead: one page at a time, on a serial queue of its own.
/// Only the cursor's thread calls it; the worker writes the page (or the error) before it
/// signals, and the cursor reads it after waiting for that signal.
final class PageAhead: @unchecked Sendable {
    private let queue = DispatchQueue(label: "DataStore.pageAhead")
    private let fetch: @Sendable (Value?, inout [Record]) throws -> Void
    private let ready = DispatchSemaphore(value: 0)
    /// The buffer the worker refills, then the page it read or the error.
    private var buffer: [Record] = []
    private var failure: (any Error)?
    /// Whether a page was asked for and not taken yet (the cursor's thread only).
    private(set) var isReading = false

    init(fetch: @escaping @Sendable (Value?, inout [Record]) throws -> Void) {
        self.fetch = fetch
    }

    /// Asks for the page after `after`, read into `reused` (its records refilled in place where
    /// no copy of them is alive).
    func start(after: Value?, reusing reused: consuming [Record]) {
        buffer = reused
        failure = nil
        isReading = true
        queue.async { [self] in
            var page = buffer
            buffer = []
            do {
                try fetch(after, &page)
            } catch {
                failure = error
                page = []
            }
            buffer = page
            ready.signal()
        }
    }

    /// The page asked for last, once read.
    func take() throws -> [Record] {
        guard isReading else { return [] }
        ready.wait()
        isReading = false
        let page = buffer
        buffer = []
        if let failure { throw failure }
        return page
    }

    func drain() {
        guard isReading else { return }
        ready.wait()
        isReading = false
        buffer = []
    }
}

@_spi(Backend) import DataStoreAPI

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

    /// Pages of one read transaction.
    init(reader: ReadAccessor, entity: EntitySchema, limit: Int, after start: Value? = nil) {
        self.init(entity: entity, limit: limit, after: start) { after, page in
            try reader.scan(entity.name, after: after, limit: limit, into: &page)
        }
    }

    /// Whether there is a current item, reading the next page when the last is used up.
    mutating func load() throws -> Bool {
        if index < page.count { return true }
        guard !exhausted else { return false }
        try fetch(after, &page)
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
}

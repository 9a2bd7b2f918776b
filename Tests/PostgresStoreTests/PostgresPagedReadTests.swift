#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import PostgresStore
import Testing

/// A read of more rows than a page comes a page at a time (by key, or through a cursor): every row comes back
/// once, in the request's order, with its offset and limit, from a read and from a write
/// transaction (its own uncommitted rows included); pages shrink for large rows; a damaged row
/// in a later page is refused naming it, and the reads after it on the same connections work.
@Test func aReadOfManyRowsComesAPageAtATimeInTheRequestsOrder() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let schema = Schema(entities: [EntitySchema("Row", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("rank", .int), Attribute("text", .string),
    ])])
    let store = try PostgresStore(location: location, schema: schema)
    defer { try? store.close() }
    let count = 25_000
    // Unique ranks in another order than the keys (7,919 and 25,000 share no factor); every
    // 1,000th row holds 256 KiB of text, so that pages after the first hold fewer rows.
    func rank(_ id: Int) -> Int64 { Int64(id * 7_919 % count) }
    func text(_ id: Int) -> String { id % 1_000 == 999 ? String(repeating: "\(id % 10)", count: 256 << 10) : "row \(id)" }
    try store.writeSync { writer in
        try writer.insert(contentsOf: (0..<count).map { id -> Record in
            ["id": .int(Int64(id)), "rank": .int(rank(id)), "text": .string(text(id))]
        }, into: "Row")
    }
    func check(_ records: [Record], _ ids: [Int], _ what: String) {
        #expect(records.count == ids.count, "\(what): \(records.count) rows, expected \(ids.count)")
        let wrong = zip(records, ids).first { record, id in
            record["id"] != .int(Int64(id)) || record["rank"] != .int(rank(id)) || record["text"] != .string(text(id))
        }
        #expect(wrong == nil, "\(what): the first wrong row is \(wrong.map { "\($0.0["id"])" } ?? ""), expected \(wrong?.1 ?? -1)")
    }
    let all = try store.read { try $0.fetch(FetchRequest("Row")) }
    check(all, Array(0..<count), "every row")
    let byRank = (0..<count).sorted { rank($0) > rank($1) }
    let window = try store.read { reader in
        try reader.fetch(FetchRequest("Row", sort: [.descending("rank")], offset: 1_234, limit: 20_000))
    }
    check(window, Array(byRank[1_234..<21_234]), "rank descending, offset 1,234, limit 20,000")
    let filtered = try store.read { try $0.fetch(FetchRequest("Row", filter: Field("rank") >= 5_000)) }
    check(filtered, (0..<count).filter { rank($0) >= 5_000 }, "rank >= 5,000")
    // In a write transaction, with a row of its own not yet committed.
    do {
        try store.writeSync { writer in
            try writer.insert(["id": .int(Int64(count)), "rank": .int(rank(count)), "text": .string(text(count))], into: "Row")
            check(try writer.fetch(FetchRequest("Row")), Array(0...count), "every row in a write transaction")
            throw CancellationError()
        }
    } catch is CancellationError {}

    // A row of a later page damaged under the store: the read names it, and reads go on.
    try PostgresTestServer.psql("SET session_replication_role = replica; UPDATE \"\(location.schema)\".\"Row\" "
        + "SET rank = rank + 1 WHERE id = 23456")
    for _ in 0..<2 {
        do {
            let rows = try store.read { try $0.fetch(FetchRequest("Row")) }
            Issue.record("a damaged row read: \(rows.count) rows")
        } catch let error as StoreError {
            #expect(error.code == .corrupt && error.message.contains("Row[23456]"), "\(error)")
        }
        #expect(try store.read { try $0.fetch(FetchRequest("Row", limit: 10)) }.count == 10)
    }
    try PostgresTestServer.psql("SET session_replication_role = replica; UPDATE \"\(location.schema)\".\"Row\" "
        + "SET rank = rank - 1 WHERE id = 23456")
    check(try store.read { try $0.fetch(FetchRequest("Row")) }, Array(0..<count), "every row, mended")
}

/// Reads at a page's edges through the cursor: no row, one row short of a page, a page exactly,
/// one past it, two pages exactly and one past them, each row once in key order; and a read
/// whose connections the server ended between two reads (`pg_terminate_backend`) is run again on
/// a new connection, its `BEGIN` replayed, with every row.
@Test func pagedReadsAtAPagesEdgesAndAfterTheConnectionsEnded() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let schema = Schema(entities: [EntitySchema("Row", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("text", .string),
    ])])
    let store = try PostgresStore(location: location, schema: schema)
    defer { try? store.close() }
    try store.writeSync { writer in
        try writer.insert(contentsOf: (0..<2_001).map { ["id": .int(Int64($0)), "text": .string("row \($0)")] }, into: "Row")
    }
    func expectRows(below count: Int, _ what: String) throws {
        let rows = try store.read { try $0.fetch(FetchRequest("Row", filter: Field("id") < Int64(count))) }
        #expect(rows.map { $0["id"] } == (0..<count).map { .int(Int64($0)) }, "\(what): \(rows.count) rows")
        #expect(rows.map { $0["text"] } == (0..<count).map { .string("row \($0)") }, "\(what)")
    }
    for count in [0, 999, 1_000, 1_001, 2_000, 2_001] { try expectRows(below: count, "ids below \(count)") }
    // With no filter and no sort, pages go by key (each a query after the last page's key): a
    // limit at and around the pages' edges.
    for limit in [1_001, 1_999, 2_000, 2_001, 5_000] {
        let rows = try store.read { try $0.fetch(FetchRequest("Row", limit: limit)) }
        #expect(rows.map { $0["id"] } == (0..<min(limit, 2_001)).map { .int(Int64($0)) }, "limit \(limit): \(rows.count) rows")
    }
    let ended = try PostgresTestServer.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        + "WHERE application_name = 'datastore:\(location.schema)'")
    #expect((Int(ended) ?? 0) > 0, "no connection of the store was ended: \(ended)")
    try expectRows(below: 2_001, "every row, after the connections ended")
    for count in [0, 1_000, 2_000] { try expectRows(below: count, "ids below \(count), again") }
}

/// Pages by key on text keys (the server's order of the bytes it stores, escapes included): every
/// row once, in the order the same read sorted by its key through a cursor gives, in a read and
/// in a write transaction that holds rows of its own; the next page starts after the bytes the
/// last row's key came back as.
@Test func pagesByTextKeyComeInTheKeysOrder() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let schema = Schema(entities: [EntitySchema("Word", primaryKey: "key", attributes: [
        Attribute("key", .string), Attribute("n", .int),
    ])])
    let store = try PostgresStore(location: location, schema: schema)
    defer { try? store.close() }
    // Keys that sort across the pages' edges: ASCII, accented and CJK text, upper and lower case,
    // the store's escape byte, and prefixes of one another.
    let stems = ["a", "A", "é", "\u{1}", "x\u{1}y", "日本", "z", ""]
    let keys = (0..<2_600).map { i in stems[i % stems.count] + String(i / stems.count) + stems[(i / 7) % stems.count] }
    #expect(Set(keys).count == keys.count)
    try store.writeSync { writer in
        try writer.insert(contentsOf: keys.enumerated().map { ["key": .string($1), "n": .int(Int64($0))] }, into: "Word")
    }
    func ids(_ records: [Record]) -> [Value] { records.map { $0["key"] } }
    let sorted = try store.read { try $0.fetch(FetchRequest("Word", sort: [.ascending("key")])) }
    #expect(sorted.count == keys.count)
    #expect(Set(ids(sorted)) == Set(keys.map(Value.string)))
    let byKey = try store.read { try $0.fetch(FetchRequest("Word")) }
    #expect(ids(byKey) == ids(sorted), "pages by key and the sorted cursor disagree")
    #expect(byKey.map { $0["n"] } == sorted.map { $0["n"] })
    do {
        try store.writeSync { writer in
            try writer.insert(["key": .string("é\u{1}new"), "n": .int(-1)], into: "Word")
            let withOwn = try writer.fetch(FetchRequest("Word"))
            #expect(ids(withOwn) == ids(try writer.fetch(FetchRequest("Word", sort: [.ascending("key")]))))
            #expect(withOwn.count == keys.count + 1)
            throw CancellationError()
        }
    } catch is CancellationError {}
}
#endif

@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import SQLiteStore
import Testing

/// A writer process commits 1,000 transactions while an observer process follows the feed: it
/// receives every one, in order, with the changes the writer made. The delay between a commit and
/// its delivery is what the README reports.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func anObserverProcessReceivesEveryTransactionOfAWriterProcessInOrder() throws {
    let dir = try TemporaryDirectory()
    let outcome = try CrossProcessFeed.run(kind: "sqlite", path: dir.path("feed.sqlite"), count: 1_000)
    #expect(outcome.received == 1_000, "\(outcome.output)")
    #expect(outcome.inOrder, "\(outcome.output)")
    print("sqlite cross-process feed: \(outcome)")
}

/// Another process's commits reach an observer from the kernel's report of a write to the
/// store's file, with no polling: every transaction arrives, in order, and sooner than by
/// polling every 5 ms (the figures are printed; the README reports them).
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func sqliteCommitsReachAnObserverProcessByNotificationAndByPolling() throws {
    let dir = try TemporaryDirectory()
    let (notified, polled) = try CrossProcessFeed.notificationsAndPolling(kind: "sqlite") { dir.path("\($0).sqlite") }
    #expect(notified.received == 200 && notified.inOrder && notified.notified, "\(notified.output)")
    #expect(polled.received == 200 && polled.inOrder && !polled.notified, "\(polled.output)")
    print("sqlite commit to another process's observer: notified: \(notified); polling: \(polled)")
}

/// A write made with the `sqlite3` shell is not in the feed, but a live query notices it: an
/// insert (a row without a checksum, read as it is) and an update (whose row the store's trigger
/// takes the stale checksum off).
@Test func aLiveQueryNoticesAWriteMadeWithTheSQLiteShell() async throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("outside.sqlite")
    let store = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? store.close() }
    try store.writeSync { try $0.insert(["key": "a", "value": 1], into: "Keyed") }
    let head = try store.currentChangeToken()
    var results = store.observe(FetchRequest("Keyed", sort: [.ascending("key")])).makeAsyncIterator()
    #expect(try await results.next()?.map(\.["key"]) == ["a"])
    _ = try runCommand("/usr/bin/sqlite3", [path, "INSERT INTO Keyed (key, value) VALUES ('outside', 2)"])
    let next = try await results.next()
    #expect(next?.map(\.["key"]) == ["a", "outside"])
    #expect(try store.currentChangeToken() == head, "the shell's write is not in the feed")
    _ = try runCommand("/usr/bin/sqlite3", [path, "UPDATE Keyed SET value = 5 WHERE key = 'a'"])
    #expect(try await results.next()?.map(\.["value"]) == [5, 2])
}

/// Entries past the retention are removed in batches, never more than an eighth of the retention
/// (at most 256) at a time: with a retention of 24, `_ds_feed` holds between 24 and 27 entries once
/// 24 transactions were recorded, and the oldest it holds is never older than that.
@Test func theFeedTableHoldsTheRetentionPlusAtMostItsSlack() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("trim.sqlite")
    let store = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? store.close() }
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 24)) }
    var counts: Set<Int> = []
    for i in 1...60 {
        try store.writeSync { try $0.insert(["key": .string("k\(i)")], into: "Keyed") }
        let shown = try runCommand("/usr/bin/sqlite3", [path, "SELECT count(*), min(seq), max(seq) FROM _ds_feed"])
        let fields = shown.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").compactMap { Int($0) }
        #expect(fields.count == 3 && fields[2] == i, "after commit \(i): \(shown)")
        guard fields.count == 3 else { continue }
        #expect(fields[0] == fields[2] - fields[1] + 1, "the entries are dense after commit \(i): \(shown)")
        #expect(fields[0] == min(i, 24) || (i > 24 && fields[0] <= 27), "after commit \(i): \(shown)")
        if i > 24 { counts.insert(fields[0]) }
    }
    #expect(counts == [24, 25, 26, 27], "each batch waits for 3 entries past the retention: \(counts)")
}

/// Two stores on one file in one process (two writer connections), their writes interleaved: a
/// write transaction keeps the feed's state from its store's last write only while the file's
/// data version is the one that write's commit left, so each write notices the other store's
/// commits. A write that took the kept state after the other's commit would number its entry
/// with the other's number, and its insert into `_ds_feed` would fail.
@Test func interleavedWritesOfTwoStoresOnOneFileNumberTheFeedDensely() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("two.sqlite")
    let first = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? first.close() }
    try first.writeSync { try $0.insert(["key": "a0", "value": 0], into: "Keyed") }
    let second = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? second.close() }
    var expected: [[ItemChange]] = [[ItemChange(entity: "Keyed", key: "a0", kind: .inserted)]]
    for round in 1...20 {
        // The first store writes twice in a row (the second write may keep the state the first
        // left), then the second store once, every third round twice.
        for key in ["a\(round)", "b\(round)"] {
            try first.writeSync { try $0.insert(["key": .string(key), "value": .int(Int64(round))], into: "Keyed") }
            expected.append([ItemChange(entity: "Keyed", key: .string(key), kind: .inserted)])
        }
        for key in round % 3 == 0 ? ["c\(round)", "d\(round)"] : ["c\(round)"] {
            try second.writeSync { try $0.insert(["key": .string(key), "value": .int(Int64(round))], into: "Keyed") }
            expected.append([ItemChange(entity: "Keyed", key: .string(key), kind: .inserted)])
        }
    }
    for store in [first, second] {
        let feed = try store.changes(since: ChangeToken(store: nil, sequence: 0), limit: 1_000)
        #expect(feed.map(\.sequence) == Array(1...UInt64(expected.count)))
        #expect(feed.map(\.items) == expected)
    }
    #expect(try first.read { try $0.count(FetchRequest("Keyed")) } == expected.count)
}

/// A store whose feed is off keeps its feed's state from one write to the next, as one whose feed
/// is on does, and only while the file's data version is the one its last write left: when
/// another store on the file turns the feed on, the first store's next write is recorded.
@Test func aStoreWhoseFeedIsOffNoticesAnotherStoreTurningItOn() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("off.sqlite")
    let first = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? first.close() }
    try first.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    // Two writes with the feed off: the second takes the state the first left.
    for key in ["a", "b"] { try first.writeSync { try $0.insert(["key": .string(key)], into: "Keyed") } }
    let second = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? second.close() }
    try second.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings()) }
    let token = try second.currentChangeToken()
    try first.writeSync { try $0.insert(["key": "c"], into: "Keyed") }
    try first.writeSync { try $0.insert(["key": "d"], into: "Keyed") }
    #expect(try second.changes(since: token, limit: 10).map(\.items) == [
        [ItemChange(entity: "Keyed", key: "c", kind: .inserted)], [ItemChange(entity: "Keyed", key: "d", kind: .inserted)],
    ])
    // And off again from the second store: the first store's next write is not recorded.
    try second.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    try first.writeSync { try $0.insert(["key": "e"], into: "Keyed") }
    try second.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings()) }
    let restarted = try second.currentChangeToken()
    #expect(try first.changes(since: restarted, limit: 10).isEmpty)
    #expect(try first.read { try $0.count(FetchRequest("Keyed")) } == 5)
}

/// Feed rows numbered as the store never numbers them (another program's: below 1, or the
/// largest row number, after which there is none): the next recorded write and a read of the
/// feed fail naming the damage, and the items stay as they were. Before, the first trapped
/// converting a negative number, the second adding one to the largest.
@Test(arguments: ["-1", "9223372036854775807"])
func feedRowsNumberedOutOfRangeAreDamageNotACrash(_ seq: String) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("numbers.sqlite")
    var store = try SQLiteStore(path: path, schema: Fixtures.schema)
    try store.writeSync { try $0.insert(["key": "before"], into: "Keyed") }
    try store.close()
    _ = try runCommand("/usr/bin/sqlite3", [path, "INSERT INTO _ds_feed (seq, entry) VALUES (\(seq), x'00')"])
    store = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? store.close() }
    for attempt in ["write", "read"] {
        #expect(performing: {
            if attempt == "write" {
                try store.writeSync { try $0.insert(["key": "after"], into: "Keyed") }
            } else {
                _ = try store.read { try $0.changes(since: ChangeToken(store: nil, sequence: 0)) }
            }
        }, throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.code == .corrupt && error.message.contains(seq == "-1" ? "_ds_feed" : "largest number")
        })
    }
    #expect(try store.read { try $0.fetch(FetchRequest("Keyed")).count } == 1)
}

/// A feed continued just below the largest number it gives (a cutover from a store whose feed
/// got there): the writes that take the last two numbers are recorded and read back, the next
/// one fails as past the feed's limit and changes nothing, and the store reopens readable, not
/// damaged.
@Test func aFeedAtItsLargestNumberRefusesTheNextWriteAndStaysReadable() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("last.sqlite")
    let largest = UInt64(Int64.max) - 1
    let head = ChangeToken(store: UUID(), sequence: largest - 2)
    var store = try SQLiteStore(path: path, schema: Fixtures.schema)
    try store.writeSync { try $0.continueChangeFeed(after: head, settings: ChangeFeedSettings()) }
    for key in ["one", "two"] { try store.writeSync { try $0.insert(["key": .string(key)], into: "Keyed") } }
    #expect(performing: { try store.writeSync { try $0.insert(["key": "three"], into: "Keyed") } },
            throws: { ($0 as? StoreError)?.code == .limitExceeded && "\($0)".contains("the most it can number") })
    try store.close()
    store = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? store.close() }
    let changes = try store.read { try $0.changes(since: head) }
    #expect(changes.map(\.token.sequence) == [largest - 1, largest])
    #expect(try store.read { try $0.fetch(FetchRequest("Keyed")).count } == 2)
}

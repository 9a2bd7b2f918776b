#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import PostgresStore
import Testing

/// A note with an id and a title (also the pipelined commits' tests').
let noteSchema = Schema(version: 1, entities: [
    EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("title", .string)]),
])

private func psql(_ sql: String) throws -> String { try PostgresTestServer.psql(sql) }

/// A new store of notes on the test server, and a second store on its schema (as another
/// process opens it); `close()` closes both and drops the schema.
private struct TwoNoteStores {
    let directory: TemporaryDirectory
    let location: PostgresLocation
    let store: PostgresStore
    let other: PostgresStore

    init(_ directory: TemporaryDirectory) throws {
        self.directory = directory
        location = PostgresTestServer.location(directory.url.path)
        store = try PostgresStore(location: location, schema: noteSchema)
        do {
            other = try PostgresStore(location: location, schema: nil)
        } catch {
            try? store.close()
            try? PostgresStore.destroy(location)
            throw error
        }
    }

    func close() {
        try? other.close()
        try? store.close()
        try? PostgresStore.destroy(location)
    }
}

/// A flipped byte in the header (format version, schema) or in the feed's state of a
/// PostgreSQL store is damage, as on the embedded backends (which flip every byte of them): the
/// store refuses to open, or its feed to be read and a commit to be made, with `corrupt`; the
/// notes are as they were once the byte is put back.
@Test func aFlippedByteOfTheHeaderOrTheFeedsStateIsDamage() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    do {
        let store = try PostgresStore(location: location, schema: noteSchema)
        defer { try? store.close() }
        for id in 1...2 {
            try store.writeSync { try $0.insert(["id": .int(Int64(id)), "title": "note \(id)"], into: "Note") }
        }
    }
    let s = "\"\(location.schema)\"._ds_meta"
    for key in ["datastore.format", "datastore.schema", "datastore.feed"] {
        let length = try #require(Int(try psql("SELECT length(value) FROM \(s) WHERE key = '\(key)'")))
        for index in Set([0, length / 2, length - 1]).sorted() {
            let flip = "UPDATE \(s) SET value = set_byte(value, \(index), get_byte(value, \(index)) # 255) WHERE key = '\(key)'"
            _ = try psql(flip)
            do {
                let store = try PostgresStore(location: location, schema: nil)
                defer { try? store.close() }
                _ = try store.currentChangeToken()
                try store.writeSync { try $0.insert(["id": 3, "title": "note 3"], into: "Note") }
                Issue.record("\(key), byte \(index): no error")
            } catch let error as StoreError {
                #expect(error.code == .corrupt, "\(key), byte \(index): \(error)")
            }
            _ = try psql(flip)
        }
    }
    let store = try PostgresStore(location: location, schema: nil)
    defer { try? store.close() }
    #expect(try store.read { try $0.count(FetchRequest("Note")) } == 2)
}

/// A write block that reads the feed sees it as of its own snapshot, taken at its first
/// statement: the commits before the block, and not one that another store made while the
/// block ran; its token is the head the store had before it.
@Test func aWriteBlockReadsTheFeedAsOfItsSnapshot() throws {
    let stores = try TwoNoteStores(try TemporaryDirectory())
    defer { stores.close() }
    let (store, other) = (stores.store, stores.other)
    let start = try store.currentChangeToken()
    for id in 1...3 {
        try store.writeSync { try $0.insert(["id": .int(Int64(id)), "title": "note \(id)"], into: "Note") }
    }
    let before = try store.currentChangeToken()
    func ids(_ sets: [ChangeSet]) -> [Int64] {
        sets.flatMap(\.items).compactMap { change -> Int64? in
            if case .int(let id) = change.key { return id }
            return nil
        }
    }
    var runs = 0
    let (inside, seen) = try store.writeSync { w -> (ChangeToken, [ChangeSet]) in
        runs += 1
        // The block's first statement takes its snapshot; then another store commits.
        _ = try w.get("Note", key: .int(1))
        if runs == 1 {
            try other.writeSync { try $0.insert(["id": 10, "title": "from the other store"], into: "Note") }
        }
        return (try w.changeToken(), try w.changes(since: start))
    }
    #expect(runs == 1)
    #expect(inside == before)
    #expect(seen.last?.token == before)
    #expect(ids(seen) == [1, 2, 3])
    // After the block, the other store's commit.
    #expect(ids(try store.read { try $0.changes(since: before) }) == [10])
}

/// A store that format 1 made (a counter row that every write moved, dense numbers, no
/// sequence) opens, is upgraded to the sequence, and keeps its feed: tokens taken before the
/// upgrade are followed after it, and the next commit's number follows the last one's.
@Test func aStoreOfTheFormatWithACounterRowOpensUpgradedAndItsTokensStillWork() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    var tokens: [ChangeToken] = []
    do {
        let store = try PostgresStore(location: location, schema: noteSchema)
        defer { try? store.close() }
        for id in 1...5 {
            try store.writeSync { try $0.insert(["id": .int(Int64(id)), "title": "note \(id)"], into: "Note") }
            tokens.append(try store.currentChangeToken())
        }
    }
    #expect(tokens.map(\.sequence) == [1, 2, 3, 4, 5])
    // Back to format 1, as that version left its stores.
    let s = "\"\(location.schema)\""
    _ = try psql("BEGIN; DROP SEQUENCE \(s)._ds_feed_seq; DROP TABLE \(s)._ds_gate; "
        + "DELETE FROM \(s)._ds_meta WHERE key = 'datastore.feed-floor'; "
        + "CREATE TABLE \(s)._ds_commits (id int PRIMARY KEY, n bigint NOT NULL); INSERT INTO \(s)._ds_commits VALUES (1, 5); "
        + "UPDATE \(s)._ds_meta SET value = '1'::bytea WHERE key = 'datastore.format'; "
        // Rows without their checksum column, its trigger and function.
        + "DROP TRIGGER \"_ds_sum\" ON \(s).\"Note\"; ALTER TABLE \(s).\"Note\" DROP COLUMN \"_ds_sum\"; "
        + "DROP FUNCTION \(s)._ds_unsum(); "
        // The schema's JSON without its NUL byte and checksum, as format 1 wrote it.
        + "UPDATE \(s)._ds_meta SET value = substring(value from 1 for length(value) - 5) WHERE key = 'datastore.schema'; "
        + "COMMIT")

    let store = try PostgresStore(location: location, schema: noteSchema)
    defer { try? store.close() }
    #expect(try psql("SELECT convert_from(value, 'UTF8') FROM \(s)._ds_meta WHERE key = 'datastore.format'") == "4")
    // Each row was given its checksum by the upgrade.
    #expect(try psql("SELECT count(*) FILTER (WHERE \"_ds_sum\" IS NOT NULL) FROM \(s).\"Note\"") == "5")
    #expect(try psql("SELECT count(*) FROM pg_tables WHERE schemaname = '\(location.schema)' AND tablename = '_ds_commits'")
        == "0")
    #expect(try store.changes(since: tokens[1], limit: 10).map(\.sequence) == [3, 4, 5])
    try store.writeSync { try $0.insert(["id": 6, "title": "note 6"], into: "Note") }
    let after = try store.changes(since: tokens[4], limit: 10)
    #expect(after.map(\.sequence) == [6])
    #expect(after.first?.items.map(\.key) == [.int(6)])
}

/// Another transaction that took a feed number and is still running holds back every later
/// entry (a reader must not hand out a higher number while a lower one may still commit); when
/// it rolls back, which sends no notification, an observer gets the later entry all the same,
/// past the gap its number left.
@Test func aNumberTakenByARunningTransactionHoldsTheFeedBackUntilItRollsBack() async throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: noteSchema)
    defer { try? store.close() }
    try store.writeSync { try $0.insert(["id": 1, "title": "first"], into: "Note") }
    let head = try store.currentChangeToken()
    #expect(head.sequence == 1)

    // What a writer's last statement does, held open before its COMMIT.
    let feed = PostgresFeedSQL(s: "\"\(location.schema)\"", lockKey: PostgresEngine.lockKey(location.schema))
    let other = try OpenPsql()
    other.send("BEGIN; SELECT pg_current_xact_id(); SELECT pg_advisory_xact_lock_shared(\(feed.writerLock)); "
        + "SELECT nextval(\(feed.sequenceLiteral)) AS taken;")
    other.wait(for: "taken")
    try store.writeSync { try $0.insert(["id": 2, "title": "second"], into: "Note") }
    #expect(try store.changes(since: head, limit: 10).isEmpty, "entry 3 was handed out while number 2 may commit")
    #expect(try store.currentChangeToken().sequence == 1)

    let observed = Task { () async throws -> ChangeSet? in
        for try await set in store.changes(since: head) { return set }
        return nil
    }
    other.send("ROLLBACK;")
    other.finish()
    let set = try await observed.value
    #expect(set?.sequence == 3)
    #expect(set?.items.map(\.key) == [.int(2)])
    #expect(try store.currentChangeToken().sequence == 3)
}

/// Two processes' writers that both increment one item: at SERIALIZABLE one of every pair of
/// overlapping transactions is rolled back and runs again, and one that lost twice in a row runs
/// alone next, so neither starves behind the other and no increment is lost.
@Test func twoProcessesIncrementingOneItemBothMakeProgress() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    // The schema of the crash-writer's stores.
    let schema = Schema(entities: [
        EntitySchema("Entry", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("batch", .int), Attribute("text", .string),
        ], indexes: [Index("byBatch", on: ["batch"])]),
        EntitySchema("Counter", primaryKey: "name", attributes: [Attribute("name", .string), Attribute("value", .int)]),
    ])
    let store = try PostgresStore(location: location, schema: schema)
    defer { try? store.close() }
    try store.writeSync { try $0.save(["name": "hot", "value": 0], into: "Counter") }
    let increments = 300
    let other = try WorkerProcess(["postgres", location.description, "increment", "hot", "\(increments)"])
    var mine = 0
    while mine < increments {
        try store.writeSync { w in
            guard case .int(let n)? = try w.get("Counter", key: "hot")?["value"] else { throw StoreError(.notFound, "hot") }
            try w.save(["name": "hot", "value": .int(n + 1)], into: "Counter")
        }
        mine += 1
    }
    #expect(other.wait(for: "incremented \(increments)"), "\(other.lines)")
    other.process.waitUntilExit()
    #expect(other.process.terminationStatus == 0, "\(other.lines)")
    let total = try store.read { try $0.get("Counter", key: "hot")?["value"] }
    #expect(total == .int(Int64(2 * increments)))
}

/// A write assumes the feed's state (its identity and settings) that the store last read, and
/// checks it as it commits: when another store changed the settings in between, the write runs
/// again with the new ones. Turned off, the feed records nothing of the writes after; turned on
/// again, it records the next one; a write of the settings made on an assumed state that
/// changed runs again, on the stored one. Each row checks the runs of the block, so that a
/// write that kept the old settings (no check) fails the test; and the feed's rows.
@Test func aWriteThatAssumedTheFeedsSettingsFollowsAnotherStoresChangeOfThem() throws {
    let stores = try TwoNoteStores(try TemporaryDirectory())
    defer { stores.close() }
    let (location, store, other) = (stores.location, stores.store, stores.other)
    let feedRows = "SELECT count(*) FROM \"\(location.schema)\"._ds_feed"
    func insert(_ id: Int64) throws -> Int {
        var runs = 0
        try store.writeSync { w in
            runs += 1
            try w.insert(["id": .int(id), "title": .string("note \(id)")], into: "Note")
        }
        return runs
    }
    // The first write stores the feed's state, the second reads it; the writes after assume it.
    #expect(try insert(1) == 1)
    #expect(try insert(2) == 1)
    #expect(try psql(feedRows) == "2")

    // Off, by the other store: the write that assumed it on runs again, and records nothing.
    try other.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    #expect(try psql(feedRows) == "0")
    #expect(try insert(3) == 2)
    #expect(try insert(4) == 1)
    #expect(try psql(feedRows) == "0")

    // On again: the write that assumed it off runs again, and is recorded.
    try other.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: true)) }
    let head = try other.currentChangeToken()
    #expect(try insert(5) == 2)
    #expect(try insert(6) == 1)
    let recorded = try other.read { try $0.changes(since: head) }.flatMap(\.items).compactMap { change -> Int64? in
        if case .int(let id) = change.key { return id }
        return nil
    }
    #expect(recorded == [5, 6])

    // A write of the settings on an assumed state that another store changed runs again on
    // the stored one: the retention both set, the other's kept where this one's does not apply.
    try other.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 50)) }
    var runs = 0
    try store.writeSync { w in
        runs += 1
        let now = try w.changeFeedSettings()
        try w.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: now.retainedTransactions + 1))
    }
    #expect(runs == 2)
    #expect(try other.read { try $0.changeFeedSettings() }.retainedTransactions == 51)
    #expect(try insert(7) == 1)

    // A block that catches the conflict of its write of the settings cannot commit what it did
    // on the assumed state: the server rolled the transaction back, and the write fails.
    try other.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 70)) }
    #expect(throws: StoreError.self) {
        try store.writeSync { w in
            _ = try? w.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 80))
            try w.insert(["id": 8, "title": "after a caught conflict"], into: "Note")
        }
    }
    #expect(try store.read { try $0.get("Note", key: 8) } == nil)
    #expect(try other.read { try $0.changeFeedSettings() }.retainedTransactions == 70)
    #expect(try insert(9) == 1)
}

/// Blocks queued without awaiting (each `COMMIT` sent with the next block's first statements)
/// follow another store's change of the feed's settings too: the first block after the change
/// fails its check at commit, it and the block after it run again in order, and the feed records
/// exactly the blocks that committed while it was on; every block's item is stored.
@Test func queuedWritesFollowAnotherStoresChangeOfTheFeedsSettings() throws {
    let stores = try TwoNoteStores(try TemporaryDirectory())
    defer { stores.close() }
    let (location, store, other) = (stores.location, stores.store, stores.other)
    let feedRows = "SELECT count(*) FROM \"\(location.schema)\"._ds_feed"
    // The first write stores the feed's state, the second reads it: the blocks after assume it.
    try store.writeSync { try $0.insert(["id": 0, "title": "note 0"], into: "Note") }
    try store.writeSync { try $0.insert(["id": 100, "title": "note 100"], into: "Note") }
    func enqueue(_ ids: ClosedRange<Int64>) throws {
        for id in ids {
            store.enqueueWrite { try $0.insert(["id": .int(id), "title": .string("note \(id)")], into: "Note") }
        }
        try store.waitForPendingWrites()
    }
    try other.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    try enqueue(1...20)
    #expect(try psql(feedRows) == "0")
    try other.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: true)) }
    let head = try other.currentChangeToken()
    try enqueue(21...40)
    let recorded = try other.read { try $0.changes(since: head) }.flatMap(\.items).compactMap { change -> Int64? in
        if case .int(let id) = change.key { return id }
        return nil
    }
    #expect(recorded == Array(21...40))
    #expect(try other.read { try $0.count(FetchRequest("Note")) } == 42)
}

/// A store that does not run a conflicting block again (`write_retries=0`) reads the feed's
/// state in every write rather than assume it: another store's change of the settings never
/// fails its next write, which follows the new settings.
@Test func aStoreWithoutRetriesReadsTheFeedsStateInEveryWrite() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let created = try PostgresStore(location: location, schema: noteSchema)
    try created.close()
    var noRetries = location
    noRetries.writeRetries = 0
    let store = try PostgresStore(location: noRetries, schema: nil)
    defer { try? store.close() }
    let other = try PostgresStore(location: location, schema: nil)
    defer { try? other.close() }
    let feedRows = "SELECT count(*) FROM \"\(location.schema)\"._ds_feed"
    try store.writeSync { try $0.insert(["id": 1, "title": "note 1"], into: "Note") }
    try store.writeSync { try $0.insert(["id": 2, "title": "note 2"], into: "Note") }
    try other.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    try store.writeSync { try $0.insert(["id": 3, "title": "note 3"], into: "Note") }
    #expect(try psql(feedRows) == "0")
    try other.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: true)) }
    try store.writeSync { try $0.insert(["id": 4, "title": "note 4"], into: "Note") }
    #expect(try psql(feedRows) == "1")
}

/// Each statement that checks an assumed feed state also sets the commit's durability (which the
/// read of the state carries when it is read): after it, the transaction's `synchronous_commit`
/// is the store's, on a server whose setting is the other one; the check holds for the stored
/// state, and fails with the number null (what the session takes for a conflict) for another.
@Test func theChecksOfAnAssumedFeedStateSetTheCommitsDurability() throws {
    let stores = try TwoNoteStores(try TemporaryDirectory())
    defer { stores.close() }
    let location = stores.location
    try stores.store.writeSync { try $0.insert(["id": 1, "title": "note 1"], into: "Note") }
    let schema = "\"\(location.schema)\""
    let feed = PostgresFeedSQL(s: schema, lockKey: PostgresEngine.lockKey(location.schema))
    let session = try PostgresSession(location)
    defer { session.close() }
    let stored = try #require(try session.query("SELECT value FROM \(schema)._ds_meta WHERE key = 'datastore.feed'")
        .first?[0].bytes())
    for (server, store) in [("on", "off"), ("off", "on")] {
        let checked = feed.checked(commitSetting: store)
        _ = try session.query("SET synchronous_commit = \(server)")
        func binds(_ state: [UInt8], entry: Bool) -> LibpqParameters {
            var binds = LibpqParameters()
            if entry {
                binds.append(bytes: [1, 2, 3])
                binds.append(feed.writerLock)
            }
            binds.append(bytes: state)
            return binds
        }
        for (sql, entry) in [(checked.appendEntry, true), (checked.check, false)] {
            _ = try session.query("BEGIN ISOLATION LEVEL SERIALIZABLE")
            _ = try session.query(sql, binds(stored, entry: entry))
            #expect(try session.query("SHOW synchronous_commit").first?[0].string() == store, "\(sql)")
            _ = try session.query("ROLLBACK")
        }
        for (sql, entry) in [(checked.appendEntry, true), (checked.check, false)] {
            _ = try session.query("BEGIN ISOLATION LEVEL SERIALIZABLE")
            do {
                _ = try session.query(sql, binds(stored + [0], entry: entry))
                Issue.record("a check of another state held: \(sql)")
            } catch {
                #expect(error.code == .conflict && error.cause?.sqlState == "40001", "\(error)")
            }
            _ = try session.query("ROLLBACK")
        }
    }
    // Without a setting of the store's own, the statements leave the server's.
    let plain = feed.checked(commitSetting: nil)
    _ = try session.query("SET synchronous_commit = local")
    for (sql, entry) in [(plain.appendEntry, true), (plain.check, false)] {
        var binds = LibpqParameters()
        if entry {
            binds.append(bytes: [1, 2, 3])
            binds.append(feed.writerLock)
        }
        binds.append(bytes: stored)
        _ = try session.query("BEGIN ISOLATION LEVEL SERIALIZABLE")
        _ = try session.query(sql, binds)
        #expect(try session.query("SHOW synchronous_commit").first?[0].string() == "local", "\(sql)")
        _ = try session.query("ROLLBACK")
    }
}

/// A trim of the feed counts from its last cut (`datastore.feed-count`) rather than reading every
/// kept entry, and keeps exactly the newest entries of the retention: after each of 30 commits
/// with a retention of 8 (a trim after every commit), across numbers taken and never used (gaps),
/// entries removed from the bottom by another version of the package (which leaves the count
/// behind), and a count deleted or damaged, the table holds the newest 8 entries, or all when fewer.
@Test func trimsCountFromTheLastCutAndKeepExactlyTheRetention() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: noteSchema)
    defer { try? store.close() }
    let s = "\"\(location.schema)\""
    let keep = 8
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: keep)) }
    var numbers: [Int] = []
    var id = 0
    /// Commits one note and checks the stored entries: `expected` of them, the newest numbers.
    func commit(expecting expected: Int, _ step: String, retention: Int = keep) throws {
        id += 1
        try store.writeSync { try $0.insert(["id": .int(Int64(id)), "title": "note \(id)"], into: "Note") }
        numbers.append(Int(try store.currentChangeToken().sequence))
        let stored = try psql("SELECT string_agg(seq::text, ',' ORDER BY seq) FROM \(s)._ds_feed")
        #expect(stored == numbers.suffix(expected).map(String.init).joined(separator: ","), "\(step), commit \(id)")
        let count = try psql("SELECT convert_from(value, 'UTF8') FROM \(s)._ds_meta WHERE key = 'datastore.feed-count'")
        if expected == retention, let lowest = numbers.suffix(expected).first {
            // The count names the lowest entry kept, and how many are stored up to its number.
            let parts = count.split(separator: " ").compactMap { Int($0) }
            #expect(parts.count == 3 && parts[0] == lowest, "the count \(count) after \(step), commit \(id)")
            if parts.count == 3 {
                #expect(numbers.suffix(expected).filter { $0 <= parts[1] }.count == parts[2],
                        "the count \(count) after \(step), commit \(id)")
            }
        }
    }
    for i in 1...12 { try commit(expecting: min(i, keep), "filling") }
    // Numbers taken and never used leave gaps: the retention counts entries, not numbers.
    _ = try psql("SELECT nextval('\(s)._ds_feed_seq') FROM generate_series(1, 5)")
    for _ in 1...3 {
        try commit(expecting: keep, "after a gap")
        _ = try psql("SELECT nextval('\(s)._ds_feed_seq')")
    }
    // Another version trims from the bottom without the count: the count's lowest entry is gone,
    // so the next trim counts down from the top (with the count believed, it would keep 5).
    _ = try psql("WITH gone AS (DELETE FROM \(s)._ds_feed WHERE seq < \(numbers[numbers.count - 5]) RETURNING 1) "
        + "UPDATE \(s)._ds_meta SET value = int8send(\(numbers[numbers.count - 5])::int8) WHERE key = 'datastore.feed-floor'")
    for n in 6...keep { try commit(expecting: n, "after another version's trim") }
    for _ in 1...4 { try commit(expecting: keep, "after another version's trim") }
    // A count that is gone, or is not three numbers, is made again from the top.
    _ = try psql("DELETE FROM \(s)._ds_meta WHERE key = 'datastore.feed-count'")
    for _ in 1...3 { try commit(expecting: keep, "after the count was deleted") }
    _ = try psql("UPDATE \(s)._ds_meta SET value = '\\xff0031207a'::bytea WHERE key = 'datastore.feed-count'")
    try commit(expecting: keep, "after the count was damaged")
    // A smaller retention takes effect at the next trim; a larger one keeps what is stored and
    // lets the entries grow to it (a change of the settings records no entry).
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 4)) }
    try commit(expecting: 4, "after the retention shrank", retention: 4)
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 6)) }
    try commit(expecting: 5, "after the retention grew", retention: 6)
    try commit(expecting: 6, "after the retention grew", retention: 6)
    try commit(expecting: 6, "after the retention grew", retention: 6)
    #expect(id == 30)
}

/// The largest retention the API takes (`Int.max`): a token's transactions are counted against it
/// (one more than it is asked for) without an overflow, and the feed reads as with any other.
@Test func theLargestRetentionIsCountedWithoutAnOverflow() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: noteSchema)
    defer { try? store.close() }
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: Int.max)) }
    let start = try store.currentChangeToken()
    for id in 1...3 {
        try store.writeSync { try $0.insert(["id": .int(Int64(id)), "title": "note \(id)"], into: "Note") }
    }
    let changes = try store.read { try $0.changes(since: start) }
    #expect(changes.count == 3)
}

#endif

#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import PostgresStore
import Testing

/// A `crash-writer concurrent-writers` process, its output collected line by line.
final class WorkerProcess: @unchecked Sendable {
    let process = Process()
    private let lock = NSLock()
    private var text = ""
    /// Whether the pipe reached its end: every line the process printed is in `text`.
    private var ended = false

    init(_ arguments: [String]) throws {
        process.executableURL = CrashRecovery.tool
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        // What goes wrong in the worker ("unexpected …") shows in the test's messages.
        process.standardError = pipe
        try process.run()
        pipe.fileHandleForReading.readabilityHandler = { [self] handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil }
            lock.withLock {
                text += String(decoding: data, as: UTF8.self)
                if data.isEmpty { ended = true }
            }
        }
    }

    var lines: [String] { lock.withLock { text }.split(separator: "\n").map(String.init) }

    /// Waits until the process printed `line` (or its output ended, or a minute passed). An exited
    /// process's last lines can still be in the pipe: its output has ended only at the pipe's end.
    func wait(for line: String) -> Bool {
        let deadline = Date().addingTimeInterval(60)
        while !lines.contains(line) {
            if lock.withLock({ ended }) || Date() > deadline { return lines.contains(line) }
            usleep(5_000)
        }
        return true
    }
}

/// The keys of every entity of the store, in one snapshot.
private func keys(_ store: any DataStore) throws -> [String: Set<Value>] {
    try store.read { r in
        var result: [String: Set<Value>] = [:]
        for entity in store.schema.entities {
            result[entity.name] = Set(try r.fetch(FetchRequest(entity.name)).map { $0[entity.primaryKey] })
        }
        return result
    }
}

/// 16 writers (2 processes, each with 2 stores of 4 writer threads) run random transactions on
/// one PostgreSQL store for 3 s: read-modify-write increments of 4 hot counters,
/// items with a unique name and a required owner, owners a `deny` rule keeps while they have
/// items. Then: every acknowledged increment is counted (no lost update) and the ticks each
/// increment inserted are in the feed in the order of the values they wrote (the feed's order is
/// the conflicts' order); names are unique and every item's owner exists; replaying
/// `changes(since: start)` on the keys before rebuilds exactly the keys after; every observer
/// (one per store) saw every commit after its token once, in order. Direct and through pgbouncer
/// in transaction mode.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"), arguments: [false, true])
func sixteenConcurrentWritersLoseNoUpdateAndTheFeedRebuildsTheTables(throughPooler: Bool) throws {
    let dir = try TemporaryDirectory()
    let direct = PostgresTestServer.location(dir.url.path)
    let location = throughPooler ? PostgresTestServer.pooledLocation(dir.url.path) : direct
    defer { try? PostgresStore.destroy(direct) }
    let setup = try runCommand(CrashRecovery.tool.path, ["postgres", location.description, "concurrent-writers", "setup"])
    #expect(setup.contains("set up"), "\(setup)")
    let store = try PostgresStore(location: location, schema: nil)
    defer { try? store.close() }
    let start = try store.currentChangeToken()
    let before = try keys(store)

    let workers = try (0..<2).map { seed in
        try WorkerProcess(["postgres", location.description, "concurrent-writers", "3", "\(seed + 1)", "2", "4"])
    }
    for worker in workers { #expect(worker.wait(for: "writers-done"), "\(worker.lines)") }
    try store.writeSync { try $0.save(["name": "end", "n": 1], into: "Counter") }
    for worker in workers { worker.process.waitUntilExit() }
    for worker in workers { #expect(worker.process.terminationStatus == 0, "\(worker.lines)") }

    // Every acknowledged increment is in its counter.
    var acked = [Int](repeating: 0, count: 4)
    for line in workers.flatMap(\.lines) where line.hasPrefix("acked ") {
        let parts = line.split(separator: " ").compactMap { Int($0) }
        if parts.count == 2 { acked[parts[0]] += parts[1] }
    }
    let counters = try store.read { r in
        try (0..<4).map { try r.get("Counter", key: .string("c\($0)"))?["n"] }
    }
    #expect(counters == acked.map { Value.int(Int64($0)) }, "counters \(counters), acknowledged increments \(acked)")
    #expect(acked.reduce(0, +) > 100, "the writers got little done: \(acked)")

    // The rules held: unique names, owners that exist.
    let (names, owners, itemOwners) = try store.read { r in
        let items = try r.fetch(FetchRequest("Item"))
        return (items.map { $0["name"] }, Set(try r.fetch(FetchRequest("Owner")).map { $0["id"] }), items.map { $0["owner"] })
    }
    #expect(Set(names).count == names.count, "a name is held twice")
    #expect(itemOwners.allSatisfy { owners.contains($0) }, "an item's owner is gone")

    // The feed, replayed on the keys before, gives the keys after; its ticks rise per counter.
    func feed(since start: ChangeToken) throws -> [ChangeSet] {
        var changes: [ChangeSet] = []
        var token = start
        while true {
            let page = try store.changes(since: token, limit: 1_000)
            guard let last = page.last else { break }
            changes += page
            token = last.token
        }
        return changes
    }
    let changes = try feed(since: start)
    var replayed = before
    var ticks: [String: Int] = [:]
    var risingTicks = true
    for set in changes {
        for item in set.items {
            if item.kind == .deleted {
                replayed[item.entity, default: []].remove(item.key)
            } else {
                replayed[item.entity, default: []].insert(item.key)
            }
            if item.entity == "Tick", case .string(let id) = item.key {
                let parts = id.split(separator: "-")
                if parts.count == 2, let value = Int(parts[1]) {
                    if value != ticks[String(parts[0]), default: 0] + 1 { risingTicks = false }
                    ticks[String(parts[0])] = value
                }
            }
        }
    }
    #expect(replayed == (try keys(store)), "replaying the feed does not rebuild the keys")
    #expect(risingTicks, "the increments are not in the feed in the order of the values they wrote")
    #expect((0..<4).map { ticks["c\($0)", default: 0] } == acked, "\(ticks) \(acked)")

    // Every observer saw every commit after its token, once, in order.
    let observers = workers.flatMap(\.lines).filter { $0.hasPrefix("observer ") }
    #expect(observers.count == 4, "\(observers)")
    for line in observers {
        let parts = line.split(separator: " ").map(String.init)
        guard parts.count == 6, let from = UInt64(parts[2]), let count = Int(parts[3]), let hash = UInt64(parts[4]) else {
            Issue.record("observer line: \(line)")
            continue
        }
        // (An observer's token may be older than the test's: a token is the number below which
        // every commit is final, and a writer may have been between its number and its commit.)
        let seen = try feed(since: ChangeToken(store: start.store, sequence: from))
        var expected: UInt64 = 0xcbf2_9ce4_8422_2325
        for set in seen {
            for byte in String(set.sequence).utf8 { expected = (expected ^ UInt64(byte)) &* 0x100_0000_01b3 }
            expected = (expected ^ 0x2c) &* 0x100_0000_01b3
        }
        #expect(parts[5] == "ordered" && count == seen.count && hash == expected,
                "\(line): the feed holds \(seen.count) commits after \(from)")
    }
    print("concurrent writers\(throughPooler ? " through pgbouncer" : ""): \(changes.count) commits, "
        + "increments \(acked)")
}
#endif

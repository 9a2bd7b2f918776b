import BenchSupport
import DataStoreAPI
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore

/// The change feed's cost and the delivery latency of live queries:
/// - small transactions (one insert per `writeSync`) and a bulk insert of `n` items in one
///   `writeSync`, each with the feed on and off, next to the raw C API doing the same inserts
///   (each row the fastest of ``writeRounds`` rounds of each side, in turns: ``inTurns(_:syncing:api:raw:)``);
/// - how long after `writeSync` returns an in-process observer gets the new results.
/// With `key`, on encrypted stores (the feed's entries sealed too).
@MainActor func benchmarkFeed(n: Int, key: StoreKey? = nil) throws {
    let small = 2_000
    for engine in ["SQLite", "LMDB"] {
        let backend = engine + (key == nil ? "" : ", encrypted")
        let directory = scratch("feed-\(engine)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func open(_ name: String, feed: Bool) throws -> any DataStore {
            let store: any DataStore = engine == "SQLite"
                ? try SQLiteStore(path: "\(directory)/\(name).sqlite", schema: Workload.schema,
                                  options: SQLiteOptions(durability: .normal, key: key))
                : try LMDBStore(path: "\(directory)/\(name).lmdb", schema: Workload.schema,
                                options: LMDBOptions(durability: .normal, initialMapSize: 8 << 30, key: key))
            try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: feed)) }
            return store
        }
        let workload = Workload(count: max(n, small))
        func raw(_ name: String) -> (Int, Int, Int) -> Void {
            if engine == "SQLite" {
                let b = rawSQLite("\(directory)/\(name)", workload)
                return { b.insertAll(from: $0, count: $1, batch: $2) }
            }
            let b = rawLMDB("\(directory)/\(name).lmdb", workload)
            return { b.insertAll(from: $0, count: $1, batch: $2) }
        }
        for feed in [false, true] {
            let label = feed ? "feed on" : "feed off"
            // Each round of the small transactions writes the next `small` keys, on both sides.
            let store = try open("small-\(feed)", feed: feed)
            let rawSmall = raw("raw-small-\(feed)")
            try recordInTurns(backend, "small transactions (1 insert per writeSync), \(label)", small, operations: small,
                          api: { try APIBench(store: store, workload: workload).insertAll(from: $0 * small, count: small, batch: 1) },
                          raw: { rawSmall($0 * small, small, 1) })
            try store.close()
            if feed {
                // The same small transactions against a C loop that also writes the entry the
                // store's feed writes for each (SQLite: its table; LMDB: its key in `_ds_meta`;
                // its bytes): the feed's own cost on both sides.
                let again = try open("small-again", feed: true)
                let rawFeed: (insert: (Int, Int) -> Void, sameLastEntry: (String) -> Bool)
                if engine == "SQLite" {
                    let b = rawSQLite("\(directory)/raw-small-feed", workload)
                    rawFeed = (b.insertAllWithFeed, b.sameLastFeedEntry)
                } else {
                    let b = rawLMDB("\(directory)/raw-small-feed.lmdb", workload)
                    rawFeed = (b.insertAllWithFeed, b.sameLastFeedEntry)
                }
                let api = APIBench(store: again, workload: workload)
                try recordInTurns(backend,
                              "small transactions (1 insert per writeSync), feed on, raw C writing the feed's entry too",
                              small, operations: small,
                              api: { try api.insertAll(from: $0 * small, count: small, batch: 1) },
                              raw: { rawFeed.insert($0 * small, small) })
                try again.close()
                if key == nil {
                    let path = "\(directory)/small-again." + (engine == "SQLite" ? "sqlite" : "lmdb")
                    precondition(rawFeed.sameLastEntry(path), "the raw side's feed entry is not laid out as the store's")
                }
            }
            // Each round of the bulk insert into stores of its own, opened before the turns.
            let bulk = try (0..<writeRounds).map { try open("bulk-\(feed)-\($0)", feed: feed) }
            let rawBulk = (0..<writeRounds).map { raw("raw-bulk-\(feed)-\($0)") }
            try recordInTurns(backend, "bulk insert, one writeSync, \(label)", n, operations: n,
                          api: { try APIBench(store: bulk[$0], workload: workload).insertAll(from: 0, count: n, batch: n) },
                          raw: { rawBulk[$0](0, n, n) })
            for store in bulk { try store.close() }
        }
        // Delivery latency: commit, then wait for the observer's delivery of that commit.
        let store = try open("latency", feed: true)
        let latencies = try observerLatencies(store, commits: 500)
        try store.close()
        let sorted = latencies.sorted()
        latencyRows.append((backend, sorted[sorted.count / 2], sorted[sorted.count * 99 / 100], sorted.last ?? 0))
        FileHandle.standardError.write(Data(String(format: "%@ observer latency: median %.1f µs, p99 %.1f µs\n",
                                                   backend, sorted[sorted.count / 2] * 1e6,
                                                   sorted[sorted.count * 99 / 100] * 1e6).utf8))
    }
}

@MainActor var latencyRows: [(String, Double, Double, Double)] = []

/// In-memory stores have no C API to compare with: their rows compare the feed on with the feed
/// off, each operation timed on a fresh store, the two alternating three times (best of each).
@MainActor var memoryFeedRows: [(String, Int, Double, Double)] = []

/// With `key`, the stores encrypted.
@MainActor func benchmarkMemoryFeed(n: Int, key: StoreKey? = nil) throws {
    let small = 2_000
    let workload = Workload(count: max(n, small))
    func open(feed: Bool) throws -> any DataStore {
        let store = try InMemoryStore(schema: Workload.schema, key: key)
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: feed)) }
        return store
    }
    for (operation, count, batch) in [("small transactions (1 insert per writeSync)", small, 1),
                                      ("bulk insert, one writeSync", n, n)] {
        var best = [false: Double.infinity, true: Double.infinity]
        for _ in 0..<3 {
            for feed in [false, true] {
                let store = try open(feed: feed)
                let seconds = try time { try APIBench(store: store, workload: workload).insertAll(from: 0, count: count, batch: batch) }
                best[feed] = min(best[feed]!, seconds)
                try store.close()
            }
        }
        memoryFeedRows.append((operation + (key == nil ? "" : ", encrypted"), count, Double(count) / best[false]!, Double(count) / best[true]!))
    }
}

/// Seconds from the return of each `writeSync` to the delivery of its results to a live query
/// iterated by another task.
func observerLatencies(_ store: any DataStore, commits: Int) throws -> [Double] {
    let delivered = DeliveryClock()
    let observing = Task {
        for try await results in store.observe(FetchRequest("Item", filter: .compare("id", .less, .int(-1_000_000)))) {
            delivered.mark(results.count)
            if results.count == commits { break }
        }
    }
    delivered.waitFor(0)
    var latencies: [Double] = []
    for i in 0..<commits {
        let start = ContinuousClock.now
        try store.writeSync { w in
            try w.insert(["id": .int(Int64(-2_000_000 - i)), "name": "n", "score": 1, "ratio": 0.5,
                          "payload": .bytes([])], into: "Item")
        }
        let end = delivered.waitFor(i + 1)
        let elapsed = end - start
        latencies.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
    observing.cancel()
    return latencies
}

/// When each result count was delivered.
final class DeliveryClock: @unchecked Sendable {
    private let condition = NSCondition()
    private var seen: [Int: ContinuousClock.Instant] = [:]

    func mark(_ count: Int) {
        condition.lock()
        seen[count] = ContinuousClock.now
        condition.broadcast()
        condition.unlock()
    }

    @discardableResult
    func waitFor(_ count: Int) -> ContinuousClock.Instant {
        condition.lock()
        defer { condition.unlock() }
        while seen[count] == nil { condition.wait() }
        return seen[count]!
    }
}

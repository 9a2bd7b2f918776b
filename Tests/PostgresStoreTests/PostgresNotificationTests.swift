#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import Testing

/// A live query on PostgreSQL learns of other stores' commits from `LISTEN` / `NOTIFY`: while it
/// waits, its process runs no query (no table of the store is read in 10 s; polling every 5 ms
/// reads the counter table about 2,000 times), and each commit of another store instance, with
/// connections of its own, reaches it; the delivery latency is printed, median and p99.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func anIdleObserverOnPostgreSQLRunsNoQueryAndCommitsStillReachIt() async throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let observed = try PostgresStore(location: location, schema: Fixtures.schema, durability: .normal)
    let writer = try PostgresStore(location: location, schema: nil, durability: .normal)
    defer {
        try? observed.close()
        try? writer.close()
    }
    func storeTableScans() throws -> Int {
        let output = try runCommand("/usr/bin/psql", [
            "-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-At", "-c",
            "SELECT pg_stat_force_next_flush(); SELECT sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)) "
                + "FROM pg_stat_user_tables WHERE schemaname = '\(location.schema)'",
        ])
        return Int(output.split(separator: "\n").last.map { String($0).trimmingCharacters(in: .whitespaces) } ?? "")
            ?? -1
    }
    // The observer, on a task of its own, hands each delivery's count on.
    let (deliveries, delivered) = AsyncStream.makeStream(of: Int.self)
    let observer = Task {
        for try await results in observed.observe(FetchRequest("Item")) { delivered.yield(results.count) }
    }
    defer { observer.cancel() }
    var counts = deliveries.makeAsyncIterator()
    #expect(await counts.next() == 0)
    // The observer now waits. A PostgreSQL 15 backend that goes idle reports its statistics
    // within 10 s (PGSTAT_IDLE_INTERVAL), so the window starts after a settling pause of 11 s:
    // what the opens and the first read did is counted before it.
    try await Task.sleep(for: .seconds(11))
    let before = try storeTableScans()
    try await Task.sleep(for: .seconds(10))
    let after = try storeTableScans()
    print("scans of the store's tables while an observer waited 10 s: \(after - before)")
    #expect(before >= 0 && after - before <= 1, "the waiting observer read the store's tables \(after - before) times")

    var latencies: [Duration] = []
    let clock = ContinuousClock()
    let items = Fixtures.items(40, seed: 3)
    for (i, item) in items.enumerated() {
        let start = clock.now
        try writer.writeSync { try $0.insert(item, into: "Item") }
        var count = await counts.next()
        // Coalesced deliveries end on the final state; wait for it.
        while let seen = count, seen < i + 1 { count = await counts.next() }
        latencies.append(clock.now - start)
        #expect(count == i + 1, "delivery \(i)")
    }
    latencies.sort()
    print("PostgreSQL commit to another store's observer, with NOTIFY: median \(latencies[latencies.count / 2]), "
        + "p99 \(latencies[latencies.count * 99 / 100]), max \(latencies.last ?? .zero) over \(latencies.count)")
}
#endif

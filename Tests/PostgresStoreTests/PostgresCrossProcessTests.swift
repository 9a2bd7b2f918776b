#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import PostgresStore
import Synchronization
import Testing

/// Two writer processes on one PostgreSQL store at once, each SIGKILLed in turn
/// (``CrashRecovery/twoWriterProcesses(kind:path:open:)``, which the SQLite and LMDB tests run too).
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func twoWriterProcessesInterleaveLoseNothingAndAKilledOneLosesNoAcknowledgedCommit() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    print(try CrashRecovery.twoWriterProcesses(kind: "postgres", path: location.description) {
        try PostgresStore(location: location, schema: nil)
    })
    try PostgresStore.destroy(location)
}
#endif

#if Postgres
/// The async probe of `AsyncAccessTests` on PostgreSQL, in a process of its own.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func asyncReadsAndWritesLeaveTheCooperativePoolFreeOnPostgreSQL() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path + "/probe")
    defer { try? PostgresStore.destroy(location) }
    let output = try runCommand(CrashRecovery.tool.path, ["postgres", location.description, "async-probe"])
    #expect(output.contains("probe ran while"), "\(output)")
}
#endif

#if Postgres
/// The cross-process delivery of `SQLiteChangeFeedTests` on PostgreSQL: an observer process
/// learns of another process's commits from `NOTIFY`, and by polling when told not to use it.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func postgresCommitsReachAnObserverProcessByNotificationAndByPolling() throws {
    let dir = try TemporaryDirectory()
    let locations = ["notified", "polled"].map { PostgresTestServer.location(dir.url.path + "/" + $0) }
    defer { for location in locations { try? PostgresStore.destroy(location) } }
    let (notified, polled) = try CrossProcessFeed.notificationsAndPolling(kind: "postgres") {
        locations[$0 == "notified" ? 0 : 1].description
    }
    #expect(notified.received == 200 && notified.inOrder && notified.notified, "\(notified.output)")
    #expect(polled.received == 200 && polled.inOrder && !polled.notified, "\(polled.output)")
    print("postgres commit to another process's observer: notified: \(notified); polling: \(polled)")
}

/// The saturation probe of `AsyncAccessTests` on PostgreSQL. The server's processes share the
/// machine's cores with the probe, so its bound is 25 ms rather than 10; the same load through
/// the synchronous API delays the probe by hundreds of milliseconds or more, which the last
/// expectation checks, so the bound still tells the two apart.
@Test(.enabled(if: runsTimingTests, "runs in the timing step of Scripts/test.sh"))
func asyncCallsKeepTheCooperativePoolResponsiveUnderLoadOnPostgreSQL() throws {
    let dir = try TemporaryDirectory()
    let locations = ["async", "blocking"].map { PostgresTestServer.location(dir.url.path + "/" + $0) }
    defer { for location in locations { try? PostgresStore.destroy(location) } }
    let async = try PoolSaturation.run(kind: "postgres", path: locations[0].description, blocking: false)
    let blocking = try PoolSaturation.run(kind: "postgres", path: locations[1].description, blocking: true)
    print("postgres under load: async API: \(async); synchronous API in tasks: \(blocking)")
    #expect(async.samples > 1_000 && async.reads > 0 && async.writes > 0, "\(async.output)")
    #expect(async.p99Microseconds >= 0 && async.p99Microseconds < 25_000, "\(async.output)")
    #expect(blocking.p99Microseconds > 4 * 25_000, "\(blocking.output)")
}
#endif

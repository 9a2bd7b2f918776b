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

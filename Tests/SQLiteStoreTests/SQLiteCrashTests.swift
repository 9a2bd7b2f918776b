import DataStoreAPI
import DataStoreConformance
import Foundation
import SQLiteStore
import Testing

@Test(arguments: [5, 60, 300])
func aWriterKilledMidStreamLeavesEveryAcknowledgedCommitAndNoPartialOne(_ commits: Int) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("crash.sqlite")
    let acknowledged = try CrashRecovery.killWriter(tool: CrashRecovery.tool, kind: "sqlite", path: path, after: commits)
    #expect(acknowledged >= commits)
    let store = try SQLiteStore(path: path, schema: nil)
    try CrashRecovery.verify(store, acknowledged: acknowledged)
    try store.close()
    #expect(try run("/usr/bin/sqlite3", [path, "PRAGMA integrity_check"]) == "ok\n")
}

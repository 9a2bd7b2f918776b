import DataStoreAPI
import DataStoreConformance
import Foundation
import SQLiteStore
import Testing

@Test(arguments: [5, 60, 300])
func aWriterKilledMidStreamLeavesEveryAcknowledgedCommitAndNoPartialOne(_ commits: Int) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("crash.sqlite")
    try CrashRecovery.killAndCheck(kind: "sqlite", path: path, after: commits) { try SQLiteStore(path: path, schema: nil) }
    #expect(try runCommand("/usr/bin/sqlite3", [path, "PRAGMA integrity_check"]) == "ok\n")
}

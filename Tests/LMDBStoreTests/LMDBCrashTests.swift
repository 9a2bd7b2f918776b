import DataStoreAPI
import DataStoreConformance
import Foundation
import LMDBStore
import Testing

@Test(arguments: [5, 60, 300])
func aWriterKilledMidStreamLeavesEveryAcknowledgedCommitAndNoPartialOne(_ commits: Int) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("crash.lmdb")
    let acknowledged = try CrashRecovery.killWriter(tool: CrashRecovery.tool, kind: "lmdb", path: path, after: commits)
    #expect(acknowledged >= commits)
    let store = try LMDBStore(path: path, schema: nil)
    try CrashRecovery.verify(store, acknowledged: acknowledged)
    try store.close()
    _ = try run("/usr/bin/mdb_stat", ["-a", path])
}

import DataStoreAPI
import DataStoreConformance
import Foundation
import LMDBStore
import Testing

@Test(arguments: [5, 60, 300])
func aWriterKilledMidStreamLeavesEveryAcknowledgedCommitAndNoPartialOne(_ commits: Int) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("crash.lmdb")
    try CrashRecovery.killAndCheck(kind: "lmdb", path: path, after: commits) { try LMDBStore(path: path, schema: nil) }
    _ = try runCommand("/usr/bin/mdb_stat", ["-a", path])
}

@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
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

/// A reader process reads consistent snapshots while a writer process grows the WAL and the file.
@Test func aReaderProcessReadsWhileAnotherProcessGrowsTheWAL() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("shared.sqlite")
    let seen = try CrashRecovery.readWhileAnotherProcessGrows(kind: "sqlite", path: path, megabytes: 60)
    #expect(seen.status == 0 && seen.failures == 0 && seen.reads > 100, "reader: \(seen.output)")
    #expect(seen.items >= 60 * 100, "the reader saw the final state: \(seen.output)")
}

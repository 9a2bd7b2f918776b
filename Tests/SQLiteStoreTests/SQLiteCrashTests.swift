@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import SQLiteStore
import Testing

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"), arguments: [5, 60, 300])
func aWriterKilledMidStreamLeavesEveryAcknowledgedCommitAndNoPartialOne(_ commits: Int) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("crash.sqlite")
    try CrashRecovery.killAndCheck(kind: "sqlite", path: path, after: commits) { try SQLiteStore(path: path, schema: nil) }
    #expect(try runCommand("/usr/bin/sqlite3", [path, "PRAGMA integrity_check"]) == "ok\n")
}

/// A reader process reads consistent snapshots while a writer process grows the WAL and the file.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aReaderProcessReadsWhileAnotherProcessGrowsTheWAL() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("shared.sqlite")
    let seen = try CrashRecovery.readWhileAnotherProcessGrows(kind: "sqlite", path: path, megabytes: 60)
    #expect(seen.status == 0 && seen.failures == 0 && seen.reads > 100, "reader: \(seen.output)")
    #expect(seen.items >= 60 * 100, "the reader saw the final state: \(seen.output)")
}

/// A schema upgrade of 50,000 items killed with SIGKILL at random points: every reopen is all
/// version 1 or all version 2, and the next open finishes the migration.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aSchemaMigrationKilledAtRandomPointsIsAllOldOrAllNewAndTheNextOpenFinishesIt() throws {
    let dir = try TemporaryDirectory()
    let outcome = try SchemaUpgradeCrash.run(kind: "sqlite", directory: dir, items: 50_000, kills: 10) {
        try SQLiteStore(path: $0, schema: nil)
    }
    #expect(outcome.old + outcome.new == 10)
    #expect(outcome.oldAfterProgress >= 5, "the five kills at a progress line land inside the migration: \(outcome)")
    print("sqlite schema upgrade of 50,000 items: \(String(format: "%.2f", outcome.seconds)) s unkilled; kills: "
        + "\(outcome.oldAfterProgress) mid-migration (old), \(outcome.old - outcome.oldAfterProgress) before it began, "
        + "\(outcome.new) after its commit")
}

/// Two writer processes on one SQLite file at once, each SIGKILLed in turn.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func twoWriterProcessesInterleaveLoseNothingAndAKilledOneLosesNoAcknowledgedCommit() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("two.sqlite")
    print(try CrashRecovery.twoWriterProcesses(kind: "sqlite", path: path) { try SQLiteStore(path: path, schema: nil) })
}

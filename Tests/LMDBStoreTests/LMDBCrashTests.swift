@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import LMDBStore
import Testing

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"), arguments: [5, 60, 300])
func aWriterKilledMidStreamLeavesEveryAcknowledgedCommitAndNoPartialOne(_ commits: Int) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("crash.lmdb")
    try CrashRecovery.killAndCheck(kind: "lmdb", path: path, after: commits) { try LMDBStore(path: path, schema: nil) }
    _ = try runCommand("/usr/bin/mdb_stat", ["-a", path])
}

/// Starts `crash-writer lmdb path hold-read` and waits until it is inside its read block.
func startReader(_ path: String) throws -> Process {
    let reader = Process()
    reader.executableURL = CrashRecovery.tool
    reader.arguments = ["lmdb", path, "hold-read"]
    let pipe = Pipe()
    reader.standardOutput = pipe
    try reader.run()
    _ = pipe.fileHandleForReading.availableData
    return reader
}

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func readerSlotsOfAKilledProcessAreClearedOnOpen() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("readers.lmdb")
    _ = try CrashRecovery.killWriter(tool: CrashRecovery.tool, kind: "lmdb", path: path, after: 3)
    // A live process keeps the environment open, so LMDB does not reset the reader table when
    // the next process opens it; only mdb_reader_check clears the dead reader's slot.
    let live = try startReader(path)
    defer { kill(live.processIdentifier, SIGKILL) }
    let doomed = try startReader(path)
    defer { kill(doomed.processIdentifier, SIGKILL) }
    func readers() throws -> String { try runCommand("/usr/bin/mdb_stat", ["-r", path], allowingFailure: true) }
    let (livePID, deadPID) = (" \(live.processIdentifier) ", " \(doomed.processIdentifier) ")
    #expect(try readers().contains(deadPID) && readers().contains(livePID), "both readers hold a slot")
    kill(doomed.processIdentifier, SIGKILL)
    doomed.waitUntilExit()
    #expect(try readers().contains(deadPID), "the killed reader's slot is stale")
    let store = try LMDBStore(path: path, schema: nil)
    #expect(try store.read { try $0.count(FetchRequest("Entry")) } > 0)
    try store.close()
    let after = try readers()
    #expect(!after.contains(deadPID), "opening cleared the stale slot: \(after)")
    #expect(after.contains(livePID), "the live reader keeps its slot: \(after)")
}

/// A reader process keeps working while a writer process grows the map from 64 KiB past 100 MB
/// (before, every read failed with `busy` once another process had grown the map).
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aReaderProcessAdoptsAMapGrownByAnotherProcess() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("shared.lmdb")
    let seen = try CrashRecovery.readWhileAnotherProcessGrows(kind: "lmdb", path: path, megabytes: 110)
    #expect(seen.status == 0 && seen.failures == 0 && seen.reads > 100, "reader: \(seen.output)")
    #expect(seen.items >= 110 * 100, "the reader saw the final state: \(seen.output)")
    let store = try LMDBStore(path: path, schema: nil)
    #expect(store.mapSize > 100 << 20)
    try store.close()
}


/// A schema upgrade of 50,000 items killed with SIGKILL at random points: every reopen is all
/// version 1 or all version 2, and the next open finishes the migration.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aSchemaMigrationKilledAtRandomPointsIsAllOldOrAllNewAndTheNextOpenFinishesIt() throws {
    let dir = try TemporaryDirectory()
    let outcome = try SchemaUpgradeCrash.run(kind: "lmdb", directory: dir, items: 50_000, kills: 10) {
        try LMDBStore(path: $0, schema: nil)
    }
    #expect(outcome.old + outcome.new == 10)
    #expect(outcome.oldAfterProgress >= 5, "the five kills at a progress line land inside the migration: \(outcome)")
    print("lmdb schema upgrade of 50,000 items: \(String(format: "%.2f", outcome.seconds)) s unkilled; kills: "
        + "\(outcome.oldAfterProgress) mid-migration (old), \(outcome.old - outcome.oldAfterProgress) before it began, "
        + "\(outcome.new) after its commit")
}

/// Two writer processes on one LMDB environment at once, each SIGKILLed in turn. Their small
/// map (256 KiB) fills within the first few dozen commits, so it grows while the other process
/// waits to write: the case that found a transaction replayed over another process's commit.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func twoWriterProcessesInterleaveLoseNothingAndAKilledOneLosesNoAcknowledgedCommit() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("two.lmdb")
    print(try CrashRecovery.twoWriterProcesses(kind: "lmdb", path: path) { try LMDBStore(path: path, schema: nil) })
}

import DataStoreAPI
import DataStoreTestSupport
import Foundation
import SQLiteStore
import StoreMigration
import Testing

/// Starts the crash writer committing `count` feed transactions to a SQLite store, `pause`
/// milliseconds apart.
private func startWriter(_ path: String, count: Int, pause: Int) throws -> Process {
    let writer = Process()
    writer.executableURL = CrashRecovery.tool
    writer.arguments = ["sqlite", path, "feed-write", String(count), String(pause)]
    writer.standardOutput = FileHandle.nullDevice
    try writer.run()
    return writer
}

/// The lag that `migrate-store … --follow` printed: (median, worst) in seconds.
private func lag(in output: String) -> (median: Double, worst: Double)? {
    guard let range = output.range(of: "lag median ") else { return nil }
    let words = output[range.upperBound...].split(separator: " ")
    guard words.count >= 4, let median = Double(words[0]), let worst = Double(words[3]) else { return nil }
    return (median, worst)
}

/// A writer process keeps writing to a SQLite source during the whole copy; `copy --follow`
/// keeps the LMDB destination within a measured lag, and once the writer stops and the follow
/// is idle, `verify` finds no difference. The same after a SIGKILL of the follower and a resume
/// with `sync --follow`, which compares the stores and goes on from there; and a source
/// whose feed no longer reaches that position is caught up by a merge-join sync, reported.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func copyFollowKeepsTheDestinationInStepWithAWritingSourceAndResumesAfterSIGKILL() throws {
    let dir = try TemporaryDirectory()
    let source = dir.path("source.sqlite")
    let destination = "lmdb:" + dir.path("destination.lmdb")
    _ = try runCommand(CrashRecovery.tool.path, ["sqlite", source, "feed-write", "3000"])

    // 1. Copy and follow while the writer writes.
    let writer = try startWriter(source, count: 3_000, pause: 1)
    usleep(200_000)
    let copy = try runCLI(["copy", "--from", "sqlite:" + source, "--to", destination, "--follow", "--until-idle", "3",
                           "--progress", "none"])
    #expect(!writer.isRunning, "the writer wrote for the whole copy and follow")
    writer.waitUntilExit()
    #expect(copy.status == 0, "\(copy.errors)")
    let firstLag = try #require(lag(in: copy.output), "\(copy.output)")
    #expect(copy.output.contains("ended by idle source"))
    #expect(!copy.output.contains("caught up by a merge-join"), "the copy's own token must be followed: \(copy.output)")
    #expect(firstLag.worst < 5, "lag \(firstLag)")
    var verify = try runCLI(["verify", "--from", "sqlite:" + source, "--to", destination, "--progress", "none"])
    #expect(verify.status == 0 && verify.output.contains("every item equals"), "\(verify.output)\(verify.errors)")
    print("copy --follow with a writing source: lag median \(firstLag.median) s, worst \(firstLag.worst) s")

    // 2. A follower killed with SIGKILL while the writer writes; the resume goes on from the
    // destination's position.
    let second = try startWriter(source, count: 3_000, pause: 1)
    let follower = try startCLI(["sync", "--from", "sqlite:" + source, "--to", destination, "--follow",
                                 "--progress", "none"])
    usleep(1_500_000)
    kill(follower.process.processIdentifier, SIGKILL)
    follower.process.waitUntilExit()
    #expect(follower.process.terminationReason == .uncaughtSignal)
    let resumed = try runCLI(["sync", "--from", "sqlite:" + source, "--to", destination, "--follow", "--until-idle",
                              "3", "--progress", "none"])
    second.waitUntilExit()
    #expect(resumed.status == 0, "\(resumed.errors)")
    // The follow compares the stores first (writes made outside the package have no feed entry),
    // then follows from that snapshot's position.
    #expect(resumed.output.contains("caught up by a merge-join sync: a follow starts by comparing"),
            "\(resumed.output)")
    verify = try runCLI(["verify", "--from", "sqlite:" + source, "--to", destination, "--progress", "none"])
    #expect(verify.status == 0 && verify.output.contains("every item equals"), "\(verify.output)\(verify.errors)")
    let secondLag = try #require(lag(in: resumed.output))
    print("sync --follow resumed after SIGKILL: lag median \(secondLag.median) s, worst \(secondLag.worst) s")

    // 3. The source keeps only 20 transactions and commits 200 while nobody follows: a follow
    // told to trust the stored position (the library's `compareFirst: false`) finds that the
    // feed no longer reaches it, catches up by a merge-join sync and says so.
    let store = try SQLiteStore(path: source, schema: nil)
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 20)) }
    try store.close()
    _ = try runCommand(CrashRecovery.tool.path, ["sqlite", source, "feed-write", "200"])
    let caughtUp = try Migrator.follow(from: StoreLocation(parsing: "sqlite:" + source),
                                       to: StoreLocation(parsing: destination),
                                       options: FollowOptions(untilIdle: .milliseconds(500), compareFirst: false))
    #expect(caughtUp.catchUps.count == 1 && caughtUp.catchUps[0].hasPrefix("the source's feed no longer reaches"),
            "\(caughtUp.catchUps)")
    verify = try runCLI(["verify", "--from", "sqlite:" + source, "--to", destination, "--progress", "none"])
    #expect(verify.status == 0 && verify.output.contains("every item equals"), "\(verify.output)\(verify.errors)")
}

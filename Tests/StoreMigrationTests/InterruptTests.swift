import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// Ctrl-C (SIGINT sent to the process) ends every long operation of migrate-store within a
/// second, with exit 130 and a last line that says what to do next, and leaves every store as it
/// was or resumable.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func ctrlCEndsEveryLongOperationWithinASecondWithExit130() throws {
    let dir = try TemporaryDirectory()
    let path = dir.url.path
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 100_000, seed: 4)
    let copied = dir.location(.lmdb, "copied")
    try Migrator.copy(from: source, to: copied)
    let small = dir.location(.sqlite, "small")
    try DemoData.seed(small, items: 2_000, seed: 5)
    let customers = "\(path)/customers.json"
    #expect(try runCLI(["export", "--from", source.description, "--entity", "Customer", "--relationships", "none",
                        "-o", customers]).status == 0)
    let plan = "\(path)/plan.json"
    try #"{"versions": [{"version": 2, "steps": [{"changeType": {"entity": "Order", "attribute": "quantity", "to": "double"}}]}]}"#
        .write(toFile: plan, atomically: true, encoding: .utf8)
    let upgraded = dir.location(.sqlite, "upgraded")
    try Migrator.copy(from: source, to: upgraded)

    // (what, arguments, how long it runs before Ctrl-C when it shows no progress, what the
    // message names)
    let operations: [(String, [String], Double, String)] = [
        ("copy, checking the source", ["copy", "--from", source.description, "--to", "lmdb:\(path)/c0.lmdb"], 0.3,
         "to finish, run: migrate-store copy"),
        ("copy, copying", ["copy", "--no-check", "--from", source.description, "--to", "lmdb:\(path)/c1.lmdb"], 1,
         "--resume"),
        ("copy --follow, following", ["copy", "--from", small.description, "--to", "lmdb:\(path)/f.lmdb", "--follow"],
         4, "sync --follow"),
        ("sync --follow", ["sync", "--from", source.description, "--to", copied.description, "--follow"], 0.5,
         "sync --follow"),
        ("sync", ["sync", "--from", source.description, "--to", copied.description], 0.5, "migrate-store sync"),
        ("verify", ["verify", "--from", source.description, "--to", copied.description], 0.5, "migrate-store verify"),
        ("check", ["check", source.description], 0.3, "interrupted"),
        ("import", ["import", "--to", upgraded.description, "--entity", "Customer", customers], 0.5, "run again"),
        ("export", ["export", "--from", source.description, "--entity", "Order", "-o", "\(path)/orders.json"], 0.3,
         "nothing was exported"),
        ("copy into jsonl", ["copy", "--no-check", "--from", source.description, "--to", "jsonl:\(path)/c.jsonl.gz"],
         1, "--resume"),
        ("upgrade", ["upgrade", upgraded.description, "--plan", plan], 0.5, "unchanged"),
    ]
    for (what, arguments, delay, naming) in operations {
        let showsProgress = ["copy", "sync", "verify", "upgrade"].contains(arguments[0])
        // A copy whose message must say --resume is stopped once its first batch is written (its
        // progress line says so), not after a time: on a loaded machine it may not have begun.
        // A sync and a verify are stopped at their first progress line. (An upgrade's one line
        // comes when its step is done: it is stopped in its check of the store, after a time.)
        let waitsForABatch = naming == "--resume"
        let waitsForProgress = ["sync", "verify"].contains(arguments[0]) && !arguments.contains("--follow")
        let progress = waitsForABatch || waitsForProgress ? ["--progress", "plain"]
            : showsProgress ? ["--progress", "none"] : []
        let (process, _, errors) = try startCLI(arguments + progress)
        var seen = Data()
        if waitsForABatch || waitsForProgress {
            while !String(decoding: seen, as: UTF8.self).contains(waitsForABatch ? "copy " : "\n") {
                let chunk = errors.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen.append(chunk)
            }
        } else {
            Thread.sleep(forTimeInterval: delay)
        }
        try #require(process.isRunning, "\(what) ended before Ctrl-C: the test needs a larger store")
        let sent = ContinuousClock.now
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        let took = ContinuousClock.now - sent
        let message = String(decoding: seen + errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 130, "\(what): exit \(process.terminationStatus) \(message)")
        #expect(took < .seconds(1), "\(what): ended \(took) after Ctrl-C")
        let last = message.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("migrate-store: interrupted") && last.contains(naming), "\(what): \(message)")
        // The command the message gives finishes the job.
        if let range = last.range(of: "to finish, run: migrate-store ") {
            let again = last[range.upperBound...].split(separator: " ").map(String.init)
            let finished = try runCLI(again + ["--progress", "none"])
            #expect(finished.status == 0, "\(what): \(again) \(finished.errors)")
        }
    }
    #expect(!FileManager.default.fileExists(atPath: "\(path)/orders.json.exporting"), "the export's temporary file")
    #expect(!FileManager.default.fileExists(atPath: "\(path)/orders.json"))
    let upgradedStore = try upgraded.open(schema: nil)
    #expect(upgradedStore.schema.version == 1, "an interrupted upgrade changes nothing")
    try upgradedStore.close()
}

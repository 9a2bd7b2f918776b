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
    // The store at version 1 again, for an upgrade that finished before its Ctrl-C.
    let pristine = "\(path)/pristine.sqlite"
    try FileManager.default.copyItem(atPath: upgraded.path, toPath: pristine)

    // (what, arguments, the file it has open once it is at work, or how long it runs before
    // Ctrl-C when it runs until stopped, what the message names)
    let operations: [(String, [String], Start, String)] = [
        ("copy, checking the source", ["copy", "--from", source.description, "--to", "lmdb:\(path)/c0.lmdb"],
         .opened(source.path), "to finish, run: migrate-store copy"),
        ("copy, copying", ["copy", "--no-check", "--from", source.description, "--to", "lmdb:\(path)/c1.lmdb"],
         .progress, "--resume"),
        ("copy --follow, following", ["copy", "--from", small.description, "--to", "lmdb:\(path)/f.lmdb", "--follow"],
         .after(4), "sync --follow"),
        ("sync --follow", ["sync", "--from", source.description, "--to", copied.description, "--follow"], .after(0.5),
         "sync --follow"),
        ("sync", ["sync", "--from", source.description, "--to", copied.description], .progress, "migrate-store sync"),
        ("verify", ["verify", "--from", source.description, "--to", copied.description], .progress,
         "migrate-store verify"),
        ("check", ["check", source.description], .opened(source.path), "interrupted"),
        ("import", ["import", "--to", upgraded.description, "--entity", "Customer", customers], .opened(customers),
         "run again"),
        ("export", ["export", "--from", source.description, "--entity", "Order", "-o", "\(path)/orders.json"],
         .opened("\(path)/orders.json.exporting"), "nothing was exported"),
        ("copy into jsonl", ["copy", "--no-check", "--from", source.description, "--to", "jsonl:\(path)/c.jsonl.gz"],
         .progress, "--resume"),
        ("upgrade", ["upgrade", upgraded.description, "--plan", plan], .opened(upgraded.path), "unchanged"),
    ]
    for (what, arguments, start, naming) in operations {
        // An operation that ends by itself can end before the Ctrl-C lands, on a loaded machine
        // (a check of this store takes under a second): it then says it finished, and runs again
        // on the same input, up to three times.
        for attempt in 1...3 {
            let outcome = try interrupt(what, arguments, start, naming)
            guard case .finishedFirst(let message) = outcome else { break }
            #expect(attempt < 3, "\(what) ended before its Ctrl-C three times: \(message)")
            if arguments[0] == "export" { try? FileManager.default.removeItem(atPath: "\(path)/orders.json") }
            if arguments[0] == "upgrade" {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: upgraded.path + suffix) }
                try FileManager.default.copyItem(atPath: pristine, toPath: upgraded.path)
            }
        }
    }
    // An export over an earlier export's file: a Ctrl-C leaves that file as it was and says that
    // nothing was exported (the file's name alone does not tell the two exports apart).
    let earlier = "\(path)/earlier.json"
    for attempt in 1...3 {
        try "[]\n".write(toFile: earlier, atomically: true, encoding: .utf8)
        let outcome = try interrupt("export over an earlier file", ["export", "--from", source.description, "--entity",
                                                                    "Order", "-o", earlier],
                                    .opened(earlier + ".exporting"), "nothing was exported")
        guard case .finishedFirst(let message) = outcome else {
            #expect(try String(contentsOfFile: earlier, encoding: .utf8) == "[]\n", "the earlier export's file")
            break
        }
        #expect(attempt < 3, "export over an earlier file ended before its Ctrl-C three times: \(message)")
    }
    #expect(!FileManager.default.fileExists(atPath: "\(path)/orders.json.exporting"), "the export's temporary file")
    #expect(!FileManager.default.fileExists(atPath: "\(path)/orders.json"))
    let upgradedStore = try upgraded.open(schema: nil)
    #expect(upgradedStore.schema.version == 1, "an interrupted upgrade changes nothing")
    try upgradedStore.close()
}

/// What became of an operation sent Ctrl-C.
private enum Interrupted {
    /// It ended with exit 130, within a second, saying what to do next (checked here).
    case stopped
    /// It had finished its work when the Ctrl-C landed: exit 0, or an upgrade that says it had
    /// committed.
    case finishedFirst(String)
}

/// Starts migrate-store with `arguments`, sends Ctrl-C once it is at work (`start`), and checks
/// that it ends with exit 130 within a second, its last line naming what to do next (and that
/// line's command finishes the job).
private func interrupt(_ what: String, _ arguments: [String], _ start: Start, _ naming: String) throws -> Interrupted {
    // A copy whose message must say --resume is stopped once its first batch is written (its
    // progress line says so), a sync and a verify at their first progress line, and an
    // operation that ends by itself once it has its input open (it is then at work: a time
    // would be too long for a fast build and too short for a loaded machine). Only the
    // following ones, which run until stopped, are stopped after a time.
    let progress: [String]
    switch start {
    case .progress: progress = ["--progress", "plain"]
    case .opened, .after: progress = ["copy", "sync", "verify", "upgrade"].contains(arguments[0])
        ? ["--progress", "none"] : []
    }
    let (process, _, errors) = try startCLI(arguments + progress)
    var seen = Data()
    switch start {
    case .progress:
        let batch = naming == "--resume"
        while !String(decoding: seen, as: UTF8.self).contains(batch ? "copy " : "\n") {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
    case .opened(let file):
        waitUntil(process, hasOpen: file)
    case .after(let seconds):
        Thread.sleep(forTimeInterval: seconds)
    }
    try #require(process.isRunning, "\(what) ended before Ctrl-C: the test needs a larger store")
    let sent = ContinuousClock.now
    kill(process.processIdentifier, SIGINT)
    process.waitUntilExit()
    let took = ContinuousClock.now - sent
    let message = String(decoding: seen + errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let last = message.split(separator: "\n").last.map(String.init) ?? ""
    if case .opened = start,
       process.terminationStatus == 0 || last.contains("had committed") || last.contains("had finished") {
        return .finishedFirst(message)
    }
    #expect(process.terminationStatus == 130, "\(what): exit \(process.terminationStatus) \(message)")
    #expect(took < .seconds(1), "\(what): ended \(took) after Ctrl-C")
    #expect(last.hasPrefix("migrate-store: interrupted") && last.contains(naming), "\(what): \(message)")
    // The command the message gives finishes the job.
    if let range = last.range(of: "to finish, run: migrate-store ") {
        let again = last[range.upperBound...].split(separator: " ").map(String.init)
        let finished = try runCLI(again + ["--progress", "none"])
        #expect(finished.status == 0, "\(what): \(again) \(finished.errors)")
    }
    return .stopped
}

/// When an operation in ``ctrlCEndsEveryLongOperationWithinASecondWithExit130()`` gets its Ctrl-C.
private enum Start {
    /// At its first progress line (a copy's first batch).
    case progress
    /// Once it has this file open.
    case opened(String)
    /// After this many seconds (an operation that runs until it is stopped).
    case after(Double)
}

/// Returns once `process` has the file at `path` open (its descriptors in /proc), or has ended,
/// or after a minute.
private func waitUntil(_ process: Process, hasOpen path: String) {
    let file = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    let descriptors = "/proc/\(process.processIdentifier)/fd"
    let deadline = ContinuousClock.now + .seconds(60)
    while process.isRunning, ContinuousClock.now < deadline {
        let open = (try? FileManager.default.contentsOfDirectory(atPath: descriptors)) ?? []
        if open.contains(where: { (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(descriptors)/\($0)")) == file }) {
            return
        }
        Thread.sleep(forTimeInterval: 0.001)
    }
}

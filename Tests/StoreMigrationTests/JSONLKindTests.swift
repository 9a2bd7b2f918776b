import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// `jsonl:` as a kind of store: copy, sync, verify and inspect through it, from and to every
/// backend.

extension TemporaryDirectory {
    func jsonl(_ name: String, compressed: Bool) -> StoreLocation {
        StoreLocation(kind: .jsonl, path: url.appendingPathComponent(name + (compressed ? ".jsonl.gz" : ".jsonl")).path)
    }
}

@Test(arguments: kinds, [false, true])
func everyBackendRoundTripsThroughJSONLinesItemForItem(_ kind: StoreKind, _ compressed: Bool) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(kind, "source")
    let file = dir.jsonl("edges", compressed: compressed)
    let back = dir.location(kind, "back")
    defer { for l in [source, back] where l.kind == .memory { try? l.destroy() } }
    try writeEdgeCaseStore(source)
    let out = try Migrator.copy(from: source, to: file, options: MigrationOptions(batchSize: 37))
    #expect(out.verified && out.differences == 0)
    #expect(out.entities.map(\.itemsWritten) == [154, 5, 50])
    let original = try contents(source)
    #expect(try contents(file) == original)
    let returned = try Migrator.copy(from: file, to: back)
    #expect(returned.verified && returned.differences == 0)
    #expect(try contents(back) == original)
    #expect(try Migrator.verify(from: back, to: file).differences == 0)
    #expect(try Migrator.verify(from: file, to: source).differences == 0)
    // Doubles bit for bit (== on Value compares -0.0 and 0.0 alike).
    let ratios = { (l: StoreLocation) in
        try contents(l)["Item"]!.map { record -> UInt64? in
            if case .double(let d) = record["ratio"] { return d.bitPattern }
            return nil
        }
    }
    #expect(try ratios(back) == ratios(source))
    #expect(!FileManager.default.fileExists(atPath: file.path + ".migrating"))
}

@Test func theDemoStoresFileIsTheSameBytesFromEveryBackendAndEveryRun() throws {
    let dir = try TemporaryDirectory()
    var files: [String: Data] = [:]
    for kind in [StoreKind.sqlite, .lmdb] {
        let demo = dir.location(kind, "demo")
        try DemoData.seed(demo, items: 5_000, seed: 1)
        for run in 0..<2 {
            for compressed in [false, true] {
                let file = dir.jsonl("demo-\(kind)-\(run)", compressed: compressed)
                _ = try Migrator.copy(from: demo, to: file, options: MigrationOptions(batchSize: 700))
                files["\(kind)-\(run)-\(compressed)"] = FileManager.default.contents(atPath: file.path)
            }
        }
    }
    #expect(files.count == 8)
    for compressed in [false, true] {
        let same = Set(files.filter { $0.key.hasSuffix("\(compressed)") }.values)
        #expect(same.count == 1, "compressed \(compressed): \(same.count) different files")
    }
    #expect(try #require(files["sqlite-0-false"]).count > 500_000)
}

@Test func anInterruptedCopyIntoJSONLinesResumesAndStartsOverWhenTheSourceChanged() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try writeEdgeCaseStore(source)
    for compressed in [false, true] {
        let file = dir.jsonl("resumed", compressed: compressed)
        var batches = 0
        #expect(throws: MigrationInterrupted.self) {
            try Migrator.copy(from: source, to: file, options: MigrationOptions(batchSize: 20),
                              shouldStop: { batches += 1; return batches == 3 })
        }
        #expect(!file.exists, "nothing at the destination until the copy finishes")
        do {
            _ = try file.open(schema: nil)
            Issue.record("an unfinished JSON Lines copy opened")
        } catch let error as StoreError {
            #expect(error.code == .incompleteMigration && error.message.contains("--resume")
                && error.message.contains(source.description), "\(error)")
        }
        #expect(FileManager.default.fileExists(atPath: file.path + ".migrating"))
        do {
            _ = try Migrator.copy(from: source, to: file)
            Issue.record("a second copy over an unfinished one started")
        } catch let error as StoreError {
            #expect(error.message.contains("--resume"), "\(error)")
        }
        let resumed = try Migrator.copy(from: source, to: file, options: MigrationOptions(resume: true))
        #expect(resumed.resumed && !resumed.startedOver && resumed.differences == 0)
        #expect(resumed.entities.first?.itemsWritten == 154 - 60, "the resume wrote only what was left")
        #expect(try contents(file) == contents(source))
        #expect(throws: StoreError.self) { try Migrator.copy(from: source, to: file, options: MigrationOptions(resume: true)) }
    }
    // The source changes between the interruption and the resume: the copy starts over.
    let file = dir.jsonl("changed", compressed: false)
    var batches = 0
    #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: file, options: MigrationOptions(batchSize: 20),
                          shouldStop: { batches += 1; return batches == 2 })
    }
    let store = try source.open(schema: nil)
    try store.writeSync { w in try w.update("Item", key: .int(.min), set: ["name": "changed"]) }
    try store.close()
    let resumed = try Migrator.copy(from: source, to: file, options: MigrationOptions(resume: true))
    #expect(resumed.startedOver && resumed.differences == 0)
    #expect(try contents(file) == contents(source))
}

@Test func syncIntoJSONLinesCountsEachDifferenceAndLeavesTheSourcesSnapshot() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.lmdb, "source")
    let file = dir.jsonl("synced", compressed: true)
    try writeEdgeCaseStore(source)
    _ = try Migrator.copy(from: source, to: file)
    let store = try source.open(schema: nil)
    try store.writeSync { w in
        _ = try w.delete("Item", key: 100_000)
        try w.update("Item", key: 100_001, set: ["ratio": 0.0])
        try w.insert(["id": 5_000_000, "name": "extra"], into: "Item")
    }
    try store.close()
    let verify = try Migrator.verify(from: source, to: file)
    #expect(verify.differences == 3)
    let sync = try Migrator.sync(from: source, to: file, options: MigrationOptions(batchSize: 10))
    let item = try #require(sync.entities.first { $0.entity == "Item" })
    #expect(item.itemsWritten == 2 && item.itemsDeleted == 1)
    #expect(sync.entities.filter { $0.entity != "Item" }.allSatisfy { $0.itemsWritten == 0 && $0.itemsDeleted == 0 })
    #expect(try Migrator.verify(from: source, to: file).differences == 0)
    #expect(try contents(file) == contents(source))
    // A sync of one entity keeps the file's others as they were.
    let other = dir.location(.sqlite, "other")
    try writeEdgeCaseStore(other)
    _ = try Migrator.sync(from: other, to: file, options: MigrationOptions(entities: ["Keyed"]))
    #expect(try contents(file)["Item"] == contents(source)["Item"])
    #expect(try contents(file)["Keyed"] == contents(other)["Keyed"])
}

@Test func aJSONLinesStoreReadsLikeAnyStoreAndRefusesWrites() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    let file = dir.jsonl("read", compressed: false)
    try writeEdgeCaseStore(source)
    _ = try Migrator.copy(from: source, to: file)
    let original = try source.open(schema: nil)
    defer { try? original.close() }
    let store = try file.open(schema: nil)
    defer { try? store.close() }
    // Reads answer as the source does: gets (indexed and not), filters, sorts, pages, counts.
    let requests = [
        FetchRequest("Item", filter: Field("score") > 10, sort: [.descending("ratio")], offset: 3, limit: 40),
        FetchRequest("Item", filter: Field("label").isNull),
        FetchRequest("Keyed", sort: [.ascending("value")]),
        FetchRequest("Ident", limit: 7),
    ]
    for request in requests {
        #expect(try store.read { try $0.fetch(request) } == original.read { try $0.fetch(request) }, "\(request)")
        #expect(try store.read { try $0.count(request) } == original.read { try $0.count(request) }, "\(request)")
    }
    let keys = try original.read { try $0.fetch(FetchRequest("Item")) }.map { $0["id"] }
    for key in keys + [.int(-5), .int(99_999_999)] {
        #expect(try store.read { try $0.get("Item", key: key) } == original.read { try $0.get("Item", key: key) })
    }
    let pages = try store.read { r in
        [try r.scan("Item", after: keys[10], limit: 5), try r.scan("Item", after: keys[3], limit: 2)]
    }
    #expect(pages[0].map { $0["id"] } == Array(keys[11..<16]) && pages[1].map { $0["id"] } == Array(keys[4..<6]))
    do {
        try store.writeSync { w in try w.insert(["id": 1, "name": "x"], into: "Item") }
        Issue.record("a JSON Lines store took a write")
    } catch let error as StoreError {
        #expect(error.code == .readOnly && error.message.contains("copy"), "\(error)")
    }
    let inspect = try runCLI(["inspect", file.description])
    #expect(inspect.status == 0 && inspect.output.contains("Item: 154 items"), "\(inspect.output)")
    let input = dir.url.appendingPathComponent("items.json")
    try Data(#"[{"id": 1, "name": "x"}]"#.utf8).write(to: input)
    let imported = try runCLI(["import", "--to", file.description, "--entity", "Item", input.path])
    #expect(imported.status != 0 && imported.errors.contains("JSON Lines"), "\(imported.errors)")
}

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aCopyIntoJSONLinesKilledWithSIGKILLFinishesWithResume() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 8_000, seed: 9)
    var resumes = 0
    // Killed once the copy has written its first checkpoint, then once it has written three.
    for (n, checkpoints) in [1, 3].enumerated() {
        let destination = dir.jsonl("killed-\(n)", compressed: n == 1)
        let (process, _, _) = try startCLI(["copy", "--from", source.description, "--to", destination.description,
                                            "--batch-size", "100", "--progress", "none"])
        let checkpoint = destination.path + ".migrating.checkpoint"
        var seen: [Data] = []
        let deadline = Date().addingTimeInterval(120)
        while process.isRunning, seen.count < checkpoints, Date() < deadline {
            if let data = FileManager.default.contents(atPath: checkpoint), data != seen.last { seen.append(data) }
            usleep(1_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal, "killed while copying")
        // Each checkpoint's JSON has its keys sorted (the mark's, then its position's), not in a
        // dictionary's order, which changes from one process to the next.
        for data in seen {
            let text = String(decoding: data, as: UTF8.self)
            let keys = ["bytes", "position", "entity", "finishedEntities", "lastKey", "source"]
                .compactMap { text.range(of: "\"\($0)\":")?.lowerBound }
            #expect(keys.count >= 4 && keys == keys.sorted(), "\(text)")
        }
        // A stream with its checkpoint is resumed; one killed before its first checkpoint (or
        // before it began) holds nothing to go on from and is copied again.
        if FileManager.default.fileExists(atPath: destination.path + ".migrating.checkpoint") {
            #expect(!destination.exists)
            resumes += 1
            let resumed = try runCLI(["--from", source.description, "--to", destination.description, "--resume",
                                      "--progress", "plain"])
            #expect(resumed.status == 0, "\(resumed.errors)")
            #expect(resumed.output.contains("(resumed)") && resumed.output.contains("verified: every item"),
                    "\(resumed.output)")
        } else if !destination.exists {
            // Killed before the first checkpoint: start again.
            #expect(try runCLI(["--from", source.description, "--to", destination.description,
                                "--progress", "none"]).status == 0)
        }
        #expect(try contents(destination) == contents(source))
        #expect(try runCLI(["verify", "--from", source.description, "--to", destination.description,
                            "--progress", "none"]).status == 0)
    }
    #expect(resumes > 0, "no kill landed inside the copy")
    print("JSON Lines copies killed with SIGKILL: \(resumes) of 2 resumed from their checkpoint")
}

/// A copy checks its source, then opens it without reading it again; a file changed in between
/// (even in place, at the same size) is read again, and its damage found.
@Test func aSourceChangedAfterItsCheckIsReadAgain() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    let file = dir.jsonl("checked", compressed: false)
    try writeEdgeCaseStore(source)
    _ = try Migrator.copy(from: source, to: file)
    _ = try file.check()
    var bytes = try #require(FileManager.default.contents(atPath: file.path))
    let at = try #require(bytes.lastIndex(of: UInt8(ascii: "{")))
    bytes[at] = UInt8(ascii: "[")
    let handle = try #require(FileHandle(forWritingAtPath: file.path))
    try handle.write(contentsOf: bytes)
    try handle.close()
    let copy = dir.location(.lmdb, "copy")
    do {
        _ = try Migrator.copy(from: file, to: copy, options: MigrationOptions(checkSource: false))
        Issue.record("the changed file was not read again")
    } catch let error as StoreError {
        #expect(error.code == .corrupt && error.message.contains("line "), "\(error)")
    }
    #expect(!copy.exists, "the damage was found before anything was written")
}

/// A copy into JSON Lines killed while it verifies what it wrote leaves no file in place:
/// only a verified stream is moved there. `inspect` does not call the destination complete,
/// and `--resume` verifies the stream and then finishes it.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aCopyIntoJSONLinesKilledWhileVerifyingLeavesNoFileInPlace() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 15_000, seed: 3)
    let destination = dir.jsonl("verifying", compressed: false)
    let (process, _, errors) = try startCLI(["copy", "--from", source.description, "--to", destination.description,
                                             "--progress", "plain"])
    // Plain progress goes to standard error, a line per report: kill at the first of the verify.
    var seen = ""
    while !seen.contains("\nverify ") {
        let chunk = errors.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        seen += String(decoding: chunk, as: UTF8.self)
    }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    #expect(seen.contains("\nverify "), "the copy reached its verification: \(seen)")
    #expect(!FileManager.default.fileExists(atPath: destination.path), "nothing unverified in place")
    #expect(FileManager.default.fileExists(atPath: destination.path + ".migrating"))
    let inspect = try runCLI(["inspect", destination.description])
    #expect(!inspect.output.contains("state: complete"), "\(inspect.output)\(inspect.errors)")
    let resumed = try runCLI(["copy", "--from", source.description, "--to", destination.description, "--resume",
                              "--progress", "none"])
    #expect(resumed.status == 0, "\(resumed.errors)")
    #expect(resumed.output.contains("verified: every item"), "\(resumed.output)")
    #expect(try contents(destination) == contents(source))
}

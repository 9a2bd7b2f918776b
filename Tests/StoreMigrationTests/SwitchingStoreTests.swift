import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Synchronization
import Testing

/// The pairs of embedded backends a switching store is tested on (SQLite to PostgreSQL runs in
/// PostgresStoreTests): the old store and the new one, in `dir`.
private func pairs(_ dir: TemporaryDirectory) -> [String: SwitchCases.Pair] {
    let memory = StoreLocation(kind: .memory, path: "switch-\(dir.url.lastPathComponent)")
    return [
        "SQLite to LMDB": (StoreLocation(kind: .sqlite, path: dir.path("a.sqlite")), StoreLocation(kind: .lmdb, path: dir.path("b.lmdb"))),
        "LMDB to SQLite": (StoreLocation(kind: .lmdb, path: dir.path("a.lmdb")), StoreLocation(kind: .sqlite, path: dir.path("b.sqlite"))),
        "memory to SQLite": (memory, StoreLocation(kind: .sqlite, path: dir.path("b.sqlite"))),
        // A running app moved onto an encrypted store, and from one encrypted store to another.
        "SQLite to encrypted LMDB": (StoreLocation(kind: .sqlite, path: dir.path("a.sqlite")),
                                     StoreLocation(kind: .lmdb, path: dir.path("b.lmdb"), key: switchKey)),
        "encrypted LMDB to encrypted SQLite": (StoreLocation(kind: .lmdb, path: dir.path("a.lmdb"), key: switchKey),
                                               StoreLocation(kind: .sqlite, path: dir.path("b.sqlite"), key: switchKey2)),
    ]
}

private let switchKey = try! StoreKey(rawKey: [UInt8](repeating: 7, count: 32))
private let switchKey2 = try! StoreKey(rawKey: [UInt8](repeating: 9, count: 32))

@Test(.serialized, arguments: ["SQLite to LMDB", "LMDB to SQLite", "memory to SQLite"])
func switchingStoreCases(_ pair: String) async throws {
    try await runSwitchCases(pair)
}

/// The same cases moving a running app onto an encrypted store, and from one encrypted store to
/// another (a test of its own, so that it runs beside the others).
@Test(.serialized, arguments: ["SQLite to encrypted LMDB", "encrypted LMDB to encrypted SQLite"])
func switchingOntoEncryptedStores(_ pair: String) async throws {
    var checked = 0
    try await runSwitchCases(pair) { stores in
        // Where a case left the new store, it is encrypted: without its key it does not open.
        let keyless = StoreLocation(kind: stores.new.kind, path: stores.new.path)
        guard keyless.exists else { return }
        let refused = #expect(throws: StoreError.self) { try keyless.open(schema: nil) }
        #expect(refused?.code == .wrongKey)
        checked += 1
    }
    #expect(checked > 0)
}

private func runSwitchCases(_ pair: String, after: (SwitchCases.Pair) throws -> Void = { _ in }) async throws {
    for (name, run) in SwitchCases.all {
        let dir = try TemporaryDirectory()
        let stores = pairs(dir)[pair]!
        defer { if stores.old.kind == .memory { try? stores.old.destroy() } }
        do {
            try await run(stores)
            try after(stores)
        } catch {
            Issue.record("\(name) on \(pair): \(error)")
        }
    }
}

/// The app of `crash-writer switch` killed with SIGKILL 13 times on each pair (with the
/// PostgreSQL pair's 11 in PostgresStoreTests, 50 in all): at random moments of the copy, the
/// follow and after, then at steps of the cutover; then run to its end.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"),
      arguments: ["SQLite to LMDB", "LMDB to SQLite", "memory to SQLite"])
func aSwitchKilledAtRandomAndAtEachStepOfItsCutoverLosesNothing(_ pair: String) throws {
    let dir = try TemporaryDirectory()
    let stores = pairs(dir)[pair]!
    // One cutover per switch: the steps before its decisive record, then one after it.
    let steps = ["SQLite to LMDB": ["held", "applied", "recorded"], "LMDB to SQLite": ["held", "applied", "released"],
                 "memory to SQLite": ["held", "retired"]]
    // An in-memory old store starts over after each kill before the cutover: a smaller one, so
    // that some launches reach the cutover.
    let runs = try SwitchCrash.run(old: stores.old, new: stores.new, seed: stores.old.kind == .memory ? 6_000 : 20_000,
                                   kills: 13, steps: steps[pair]!, seedOfRandomness: UInt64(pair.utf8.count))
    print("\(pair): launches ended in \(runs.map(\.lastPhase)); cutover pauses (µs): \(SwitchCrash.pauses(runs))")
}

/// Cancel killed in the middle (right after its decision is recorded, and at random), then
/// relaunched: the switch stays cancelled, the new store is gone, nothing acknowledged is lost.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aCancelKilledInTheMiddleEndsCancelled() throws {
    let dir = try TemporaryDirectory()
    let stores = pairs(dir)["SQLite to LMDB"]!
    let runs = try SwitchCrash.run(old: stores.old, new: stores.new, kills: 4, steps: ["cancel-recorded"], then: "cancel", stepsFrom: 0)
    #expect(runs[0].lastPhase == "copying", "the first launch dies once its cancel is recorded")
    #expect(runs[1].lines.first == "phase cancelled", "the next one finds the switch cancelled")
}

/// Rollback killed in the middle (after its intent, after its decisive record, and at random),
/// then relaunched: the old store serves again with every acknowledged write.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aRollbackKilledInTheMiddleEndsRolledBack() throws {
    let dir = try TemporaryDirectory()
    let stores = pairs(dir)["LMDB to SQLite"]!
    let runs = try SwitchCrash.run(old: stores.old, new: stores.new, kills: 5,
                                   steps: ["rollback-intent", "rollback-recorded"], then: "rollback", stepsFrom: 0)
    // The first launch dies once the rollback is decided, the second goes on with it and dies
    // at its decisive record.
    #expect(runs[0].lastPhase == "switched" && runs[1].lines.first == "phase rollingBack")
    #expect(runs[2].lines.first == "phase rolledBack")
}

/// `migrate-store inspect` shows where a switch stands, in each of its stores, while the app
/// holds the switching store open.
@Test func inspectShowsASwitchInProgressAndDone() async throws {
    let dir = try TemporaryDirectory()
    let (old, new) = pairs(dir)["SQLite to LMDB"]!
    let schema = SwitchCases.schema
    let seeded = try old.open(schema: schema)
    try seeded.writeSync { try $0.insert(["id": .int(1), "title": .string("one"), "words": .int(1)], into: "Note") }
    try seeded.close()
    let store = try SwitchingStore(from: old, to: new, schema: schema, policy: SwitchingStore.Policy(cutover: .manual))
    defer { try? store.close() }
    let deadline = Date(timeIntervalSinceNow: 60)
    while store.phase != .following && Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
    func state(_ location: StoreLocation) throws -> String {
        try runCommand(migrateStore.path, ["inspect", location.description]).split(separator: "\n")
            .first { $0.hasPrefix("state: ") }.map(String.init) ?? ""
    }
    #expect(try state(old) == "state: switch from \(old) to \(new) in progress; this store serves the app")
    #expect(try state(new).hasPrefix("state: switch from \(old) to \(new) in progress (following); this store is being filled"))
    try store.switchNow(timeout: .seconds(60))
    #expect(try state(new).hasSuffix("; this store serves the app"))
    #expect(try state(old).hasSuffix("; this store is kept for a rollback until the app drops it"))
    #expect(try state(new).contains(" done at "))
}

/// A second instance of an app that opens its switching store while the first one switches is
/// refused with `busy`, naming the other process (it ran a copy of its own into the same new
/// store and died with `keyExists`); so is a second switching store of the same process. After
/// the cutover, any number open it. A relaunch shows the copy's progress from where it goes on,
/// not from 0.
@Test func aSecondInstanceDuringASwitchIsToldAnotherProcessIsSwitching() throws {
    let dir = try TemporaryDirectory()
    let (old, new) = pairs(dir)["SQLite to LMDB"]!
    let schema = SwitchCases.schema
    let seeded = try old.open(schema: schema)
    try seeded.writeSync { w in
        for id in 0..<3_000 {
            try w.insert(["id": .int(Int64(id)), "title": .string("note \(id)"), "words": .int(1)], into: "Note")
        }
    }
    try seeded.close()
    // 3,000 items at 300 a second: the copy takes 10 s, whatever else the machine runs. The test
    // waits on its own thread (the cooperative pool may be busy with the suite's other tests).
    let slow = SwitchingStore.Policy(pace: .itemsPerSecond(300), cutover: .manual, batchSize: 100)
    var first: SwitchingStore? = try SwitchingStore(from: old, to: new, schema: schema, policy: slow)
    let deadline = Date(timeIntervalSinceNow: 60)
    while (first?.progress.itemsCopied ?? 0) < 200 && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
    try #require(first?.phase == .copying, "the copy is under way")
    // Another process: the crash tests' app, which opens the same switching store.
    let other = try runCommand(CrashRecovery.tool.path, ["switch", old.description, new.description, "0"],
                               allowingFailure: true)
    #expect(other.contains("another process (pid \(getpid())) is switching \(old) to \(new)"), "\(other)")
    #expect(!other.contains("keyExists"), "\(other)")
    // This process.
    #expect(throws: StoreError.self) { _ = try SwitchingStore(from: old, to: new, schema: schema, policy: slow) }
    let copied = first?.progress.itemsCopied ?? 0
    try first?.close()
    first = nil
    // A relaunch goes on from the checkpoint, and its progress with it.
    let shown = Mutex<[Int]>([])
    let relaunched = try SwitchingStore(from: old, to: new, schema: schema, policy: slow) { progress in
        if progress.itemsCopied > 0 { shown.withLock { $0.append(progress.itemsCopied) } }
    }
    while shown.withLock({ $0.isEmpty }) && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
    let firstShown = shown.withLock { $0.first } ?? 0
    #expect(firstShown >= copied, "the relaunch first showed \(firstShown) items copied, after \(copied)")
    try relaunched.switchNow(timeout: .seconds(120))
    // Switched: a second instance opens it.
    let second = try SwitchingStore(from: old, to: new, schema: schema, policy: slow)
    #expect(second.phase == .switched)
    try second.close()
    try relaunched.close()
}

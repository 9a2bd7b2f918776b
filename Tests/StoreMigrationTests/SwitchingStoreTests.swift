import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// The pairs of embedded backends a switching store is tested on (SQLite to PostgreSQL runs in
/// PostgresStoreTests): the old store and the new one, in `dir`.
private func pairs(_ dir: TemporaryDirectory) -> [String: SwitchCases.Pair] {
    let memory = StoreLocation(kind: .memory, path: "switch-\(dir.url.lastPathComponent)")
    return [
        "SQLite to LMDB": (StoreLocation(kind: .sqlite, path: dir.path("a.sqlite")), StoreLocation(kind: .lmdb, path: dir.path("b.lmdb"))),
        "LMDB to SQLite": (StoreLocation(kind: .lmdb, path: dir.path("a.lmdb")), StoreLocation(kind: .sqlite, path: dir.path("b.sqlite"))),
        "memory to SQLite": (memory, StoreLocation(kind: .sqlite, path: dir.path("b.sqlite"))),
    ]
}

@Test(.serialized, arguments: ["SQLite to LMDB", "LMDB to SQLite", "memory to SQLite"])
func switchingStoreCases(_ pair: String) throws {
    for (name, run) in SwitchCases.all {
        let dir = try TemporaryDirectory()
        let stores = pairs(dir)[pair]!
        defer { if stores.old.kind == .memory { try? stores.old.destroy() } }
        do {
            try run(stores)
        } catch {
            Issue.record("\(name) on \(pair): \(error)")
        }
    }
}

/// The app of `crash-writer switch` killed with SIGKILL 13 times on each pair (with the
/// PostgreSQL pair's 11 in PostgresStoreTests, 50 in all), 5 of them at the cutover's steps,
/// then run to its end.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"),
      arguments: ["SQLite to LMDB", "LMDB to SQLite", "memory to SQLite"])
func aSwitchKilledAtRandomAndAtEachStepOfItsCutoverLosesNothing(_ pair: String) throws {
    let dir = try TemporaryDirectory()
    let stores = pairs(dir)[pair]!
    let runs = try SwitchCrash.run(old: stores.old, new: stores.new, kills: 13, seedOfRandomness: UInt64(pair.utf8.count))
    print("\(pair): cutover pauses (µs): \(SwitchCrash.pauses(runs))")
}

/// Cancel killed in the middle (right after its decision is recorded, and at random), then
/// relaunched: the switch stays cancelled, the new store is gone, nothing acknowledged is lost.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aCancelKilledInTheMiddleEndsCancelled() throws {
    let dir = try TemporaryDirectory()
    let stores = pairs(dir)["SQLite to LMDB"]!
    try SwitchCrash.run(old: stores.old, new: stores.new, kills: 4, steps: ["cancel-recorded", "cancel-recorded"],
                        pace: 5_000, then: "cancel")
}

/// Rollback killed in the middle (after its intent, after its decisive record, and at random),
/// then relaunched: the old store serves again with every acknowledged write.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aRollbackKilledInTheMiddleEndsRolledBack() throws {
    let dir = try TemporaryDirectory()
    let stores = pairs(dir)["LMDB to SQLite"]!
    try SwitchCrash.run(old: stores.old, new: stores.new, kills: 5, steps: ["rollback-intent", "rollback-recorded"],
                        then: "rollback")
}

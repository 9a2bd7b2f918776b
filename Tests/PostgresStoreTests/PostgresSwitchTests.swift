#if Postgres
import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import PostgresStore
@_spi(Backend) import SQLiteStore
@testable import StoreMigration
import Testing

/// A SQLite store switching to PostgreSQL: the old store in `dir`, the new one a schema of its own.
private func pair(_ dir: TemporaryDirectory) -> SwitchCases.Pair {
    let postgres = StoreLocation(kind: "postgres", path: String(PostgresTestServer.location(dir.url.path).description.dropFirst(9)))
    return (StoreLocation(kind: .sqlite, path: dir.path("a.sqlite")), postgres)
}

@Test func switchingFromSQLiteToPostgreSQL() async throws {
    for (name, run) in SwitchCases.all {
        let dir = try TemporaryDirectory()
        let stores = pair(dir)
        defer { try? stores.new.destroy() }
        do {
            try await run(stores)
        } catch {
            Issue.record("\(name): \(error)")
        }
    }
}

/// The app of `crash-writer switch` killed with SIGKILL 11 times while its store switches from
/// SQLite to PostgreSQL (the other pairs' 39 are in StoreMigrationTests). Its transactions come
/// 10 ms apart: a debug build applies them to PostgreSQL one statement per item, slower than
/// SQLite takes them without pause.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aSwitchToPostgreSQLKilledAtRandomAndAtItsCutoverLosesNothing() throws {
    let dir = try TemporaryDirectory()
    let stores = pair(dir)
    defer { try? stores.new.destroy() }
    let runs = try SwitchCrash.run(old: stores.old, new: stores.new, kills: 11, steps: ["held", "applied", "recorded"],
                                   gap: 10)
    print("SQLite to PostgreSQL: launches ended in \(runs.map(\.lastPhase)); cutover pauses (µs): "
        + "\(SwitchCrash.pauses(runs))")
}

/// A switch's copy given no batch size takes the new store's, as a migration's copy does: into
/// PostgreSQL 10,000 (1,000 first, then as many as fit in 32 MiB), into SQLite 1,000; a paced copy
/// 1,000 (its pauses come between batches); a size given is kept.
@Test func aSwitchsCopyTakesTheNewStoresBatchSizeUnlessPacedOrGivenOne() {
    #expect(SwitchingStore.Policy().copyBatchSize(into: PostgresBackend()).value == 10_000)
    #expect(SwitchingStore.Policy().copyBatchSize(into: SQLiteBackend()).value == 1_000)
    #expect(SwitchingStore.Policy(pace: .itemsPerSecond(500)).copyBatchSize(into: PostgresBackend()).value == 1_000)
    #expect(SwitchingStore.Policy(batchSize: 2_500).copyBatchSize(into: PostgresBackend()).value == 2_500)
    #expect(SwitchingStore.Policy().batchSize.value == 1_000)
}
#endif

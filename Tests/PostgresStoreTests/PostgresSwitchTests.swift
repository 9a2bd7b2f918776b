#if Postgres
import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
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
#endif

#if Postgres
import DataStoreAPI
import DataStoreTestSupport
import Foundation
import PostgresStore
import Testing

/// Sync's README examples, and export and import against each other and against a model of
/// Sync's semantics, on PostgreSQL.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"),
      arguments: (SyncJSONCases.all + SyncRoundTripCases.all).map(\.name))
func syncsJSONCasesHoldOnPostgreSQL(_ name: String) throws {
    let dir = try TemporaryDirectory()
    let run = try #require((SyncJSONCases.all + SyncRoundTripCases.all).first { $0.name == name }).run
    try run({ name, schema in
        try PostgresStore(location: PostgresTestServer.location(dir.path(name)), schema: schema, durability: .normal)
    }, dir)
}
#endif

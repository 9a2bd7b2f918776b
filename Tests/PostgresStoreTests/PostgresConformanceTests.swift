#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import Testing

let postgresBackend = ConformanceBackend(name: "PostgreSQL") { location, schema, upgrades in
    try PostgresStore(location: PostgresTestServer.location(location.path), schema: schema, upgrades: upgrades,
                      durability: .normal)
}

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"), arguments: ConformanceSuite.cases)
func postgresConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: postgresBackend)
}

/// The same suite through pgbouncer in transaction pooling mode: each transaction may run on
/// another server connection, so nothing may rest on session state.
let pooledPostgresBackend = ConformanceBackend(name: "PostgreSQL through pgbouncer") { location, schema, upgrades in
    try PostgresStore(location: PostgresTestServer.pooledLocation(location.path), schema: schema,
                      upgrades: upgrades, durability: .normal)
}

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"), arguments: ConformanceSuite.cases)
func postgresThroughPgBouncerConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: pooledPostgresBackend)
}
#endif

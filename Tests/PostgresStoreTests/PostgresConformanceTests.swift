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

/// The suite on encrypted stores: the client seals every value the server holds.
private let conformanceKey = try! StoreKey(rawKey: (0..<32).map { UInt8($0) })

let encryptedPostgresBackend = ConformanceBackend(name: "PostgreSQL, encrypted") { location, schema, upgrades in
    try PostgresStore(location: PostgresTestServer.location(location.path), schema: schema, upgrades: upgrades,
                      durability: .normal, key: conformanceKey)
}

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"), arguments: ConformanceSuite.cases)
func encryptedPostgresConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: encryptedPostgresBackend)
}
#endif

#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import Foundation
import PostgresStore
import Testing

let postgresBackend = ConformanceBackend(name: "PostgreSQL") { location, schema, migrations in
    try PostgresStore(location: PostgresTestServer.location(location.path), schema: schema, migrations: migrations,
                      durability: .normal)
}

@Test(arguments: ConformanceSuite.cases)
func postgresConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: postgresBackend)
}
#endif

@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import Foundation
import SQLiteStore
import Testing

let sqliteBackend = ConformanceBackend(name: "SQLite") { location, schema, upgrades in
    try SQLiteStore(path: location.path + ".sqlite", schema: schema, upgrades: upgrades, options: SQLiteOptions(durability: .normal))
}

@Test(arguments: ConformanceSuite.cases)
func sqliteConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: sqliteBackend)
}

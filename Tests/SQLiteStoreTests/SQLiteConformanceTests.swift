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

/// The key the encrypted run of the suite opens its stores with.
private let conformanceKey = try! StoreKey(rawKey: (0..<32).map { UInt8($0) })

let encryptedSQLiteBackend = ConformanceBackend(name: "SQLite, encrypted") { location, schema, upgrades in
    try SQLiteStore(path: location.path + ".sqlite", schema: schema, upgrades: upgrades,
                    options: SQLiteOptions(durability: .normal, key: conformanceKey))
}

@Test(arguments: ConformanceSuite.cases)
func encryptedSQLiteConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: encryptedSQLiteBackend)
}

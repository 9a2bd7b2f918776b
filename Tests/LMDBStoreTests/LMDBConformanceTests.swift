@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import Foundation
import LMDBStore
import Testing

let lmdbBackend = ConformanceBackend(name: "LMDB") { location, schema, upgrades in
    try LMDBStore(path: location.path + ".lmdb", schema: schema, upgrades: upgrades,
                  options: LMDBOptions(durability: .normal, initialMapSize: 1 << 20))
}

@Test(arguments: ConformanceSuite.cases)
func lmdbConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: lmdbBackend)
}

/// The key the encrypted run of the suite opens its stores with.
private let conformanceKey = try! StoreKey(rawKey: (0..<32).map { UInt8($0) })

let encryptedLMDBBackend = ConformanceBackend(name: "LMDB, encrypted") { location, schema, upgrades in
    try LMDBStore(path: location.path + ".lmdb", schema: schema, upgrades: upgrades,
                  options: LMDBOptions(durability: .normal, initialMapSize: 1 << 20, key: conformanceKey))
}

@Test(arguments: ConformanceSuite.cases)
func encryptedLMDBConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: encryptedLMDBBackend)
}

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

@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import Foundation
@_spi(Backend) import InMemoryStore
import Synchronization
import Testing

/// In-memory databases by location, so that "close and reopen" finds the data as a file would.
let databases = Mutex<[URL: InMemoryDatabase]>([:])

/// The in-memory backend, its databases found by location; encrypted with `key`.
private func inMemory(named name: String, key: StoreKey? = nil) -> ConformanceBackend {
    ConformanceBackend(name: name) { location, schema, upgrades in
        let database = databases.withLock { all in
            if let existing = all[location] { return existing }
            let created = InMemoryDatabase()
            all[location] = created
            return created
        }
        return try InMemoryStore(database: database, schema: schema, upgrades: upgrades, key: key)
    }
}

let inMemoryBackend = inMemory(named: "in-memory")

@Test(arguments: ConformanceSuite.cases)
func inMemoryConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: inMemoryBackend)
}

/// The key the encrypted run of the suite opens its stores with.
private let conformanceKey = try! StoreKey(rawKey: (0..<32).map { UInt8($0) })

let encryptedInMemoryBackend = inMemory(named: "in-memory, encrypted", key: conformanceKey)

@Test(arguments: ConformanceSuite.cases)
func encryptedInMemoryConformance(_ testCase: ConformanceCase) async throws {
    try await testCase.run(on: encryptedInMemoryBackend)
}

@_spi(Backend) import DataStoreAPI
import Synchronization

/// The `memory` kind: `memory:NAME` names an in-memory database of this process, which lives
/// until it is destroyed, so that a store closed and opened again by name finds its data.
@_spi(Backend) public final class InMemoryBackend: StoreBackend {
    private let databases = Mutex<[String: InMemoryDatabase]>([:])

    public init() {}

    public var kind: StoreKind { "memory" }
    public var fileExtension: String? { nil }

    public func exists(at path: String) -> Bool { databases.withLock { $0[path] != nil } }

    public func recognizes(_ path: String) -> Bool { false }

    func database(_ name: String, create: Bool) throws -> InMemoryDatabase {
        try databases.withLock { all in
            if let existing = all[name] { return existing }
            guard create else { throw StoreError(.notFound, "memory:\(name) does not exist in this process") }
            let database = InMemoryDatabase()
            all[name] = database
            return database
        }
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore
    {
        try open(at: path, schema: schema, upgrades: upgrades, durability: durability, key: nil)
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability,
                     key: StoreKey?) throws -> any DataStore {
        try InMemoryStore(database: database(path, create: schema != nil), schema: schema, upgrades: upgrades, key: key)
    }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try openSource(at: path, alreadyChecked: alreadyChecked, key: nil)
    }

    public func openSource(at path: String, alreadyChecked: Bool, key: StoreKey?) throws -> any DataStore {
        try open(at: path, schema: nil, upgrades: SchemaUpgrades(), durability: .full, key: key)
    }

    public func check(at path: String) throws -> EngineCheck {
        _ = try database(path, create: false)
        return EngineCheck("none (in memory)")
    }

    public func destroy(at path: String) throws { databases.withLock { _ = $0.removeValue(forKey: path) } }

    public func move(from path: String, to other: String) throws {
        databases.withLock { all in all[other] = all.removeValue(forKey: path) }
    }

    public func sizeOnDisk(at path: String) -> Int64 { 0 }
}

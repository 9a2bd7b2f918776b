@_spi(Backend) import DataStoreAPI
import Foundation

/// The `sqlite` kind: a store is one file, `NAME.sqlite`, with its `-wal` and `-shm` files.
@_spi(Backend) public struct SQLiteBackend: StoreBackend {
    public init() {}

    public var kind: StoreKind { "sqlite" }
    public var fileExtension: String? { "sqlite" }

    public func exists(at path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    public func recognizes(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            && !isDirectory.boolValue
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore
    {
        try open(at: path, schema: schema, upgrades: upgrades, durability: durability, key: nil)
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability,
                     key: StoreKey?) throws -> any DataStore {
        try SQLiteStore(path: path, schema: schema, upgrades: upgrades,
                        options: SQLiteOptions(durability: durability, key: key))
    }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try openSource(at: path, alreadyChecked: alreadyChecked, key: nil)
    }

    public func openSource(at path: String, alreadyChecked: Bool, key: StoreKey?) throws -> any DataStore {
        try SQLiteStore(path: path, schema: nil, options: SQLiteOptions(readOnly: true, key: key))
    }

    public func check(at path: String) throws -> EngineCheck {
        let (result, items) = try SQLiteEngine.integrityCheck(path: path)
        return EngineCheck("PRAGMA integrity_check: " + result, itemsChecked: items)
    }

    public func destroy(at path: String) throws { try SQLiteStore.destroy(at: path) }

    public func move(from path: String, to other: String) throws {
        do {
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                try FileManager.default.removeItem(atPath: path + suffix)
            }
            try FileManager.default.moveItem(atPath: path, toPath: other)
        } catch {
            throw StoreError(.io, "cannot move \(path) to \(other): \(error.localizedDescription)")
        }
    }

    /// A database whose schema table is empty: what a store's creation leaves when it is killed
    /// before the transaction that creates its tables commits.
    public func holdsNothing(at path: String) -> Bool {
        SQLiteConnection.holdsNoSchemaObject(path)
    }

    /// A hot rollback journal beside the file: a store's creation runs its first transactions
    /// (its tables, then the switch to WAL mode) in rollback mode, so that a user's database
    /// opened by mistake keeps its journal mode, and a process killed in one leaves the journal,
    /// which a connection that only reads cannot roll back. Rolled back by a connection that
    /// may write, as SQLite does on its first read.
    public func rollBackInterruptedWrite(at path: String) -> Bool {
        let journal = path + "-journal"
        guard let size = (try? FileManager.default.attributesOfItem(atPath: journal))?[.size] as? Int64, size > 0
        else { return false }
        SQLiteConnection.rollBackHotJournal(path)
        return !FileManager.default.fileExists(atPath: journal)
    }

    public func sizeOnDisk(at path: String) -> Int64 {
        [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int64) ?? 0)
        }
    }
}

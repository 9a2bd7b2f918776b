@_spi(Backend) import DataStoreAPI
import Foundation

/// The `lmdb` kind: a store is one environment directory, `NAME.lmdb`, holding `data.mdb` and
/// `lock.mdb`.
@_spi(Backend) public struct LMDBBackend: StoreBackend {
    public init() {}

    public var kind: StoreKind { "lmdb" }
    public var fileExtension: String? { "lmdb" }

    public func exists(at path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Every entry of the environment's directory but `data.mdb` and `lock.mdb`, sorted.
    public func otherFiles(at path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [])
            .filter { $0 != "data.mdb" && $0 != "lock.mdb" }.sorted()
    }

    /// An environment directory holding only `data.mdb` and `lock.mdb`, whose `data.mdb` is empty
    /// or whose newest meta page names an empty main database (no root page, no entry: no named
    /// database): what a store's creation leaves when it is killed before its first commit
    /// (liblmdb writes the meta pages when it opens the environment). The meta pages are read
    /// and checked by ``LMDBPageCheck``, not by liblmdb, which trusts what they say.
    public func holdsNothing(at path: String) -> Bool {
        guard recognizes(path), otherFiles(at: path).isEmpty,
              let size = (try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb"))?[.size] as? Int64
        else { return false }
        if size == 0 { return true }
        guard let check = try? LMDBPageCheck(path: path) else { return false }
        defer { check.close() }
        guard let main = try? check.checkMeta().main else { return false }
        return main.root == LMDBPageCheck.invalidPage && main.entries == 0 && main.depth == 0
    }

    public func recognizes(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            && isDirectory.boolValue
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore
    {
        try open(at: path, schema: schema, upgrades: upgrades, durability: durability, key: nil)
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability,
                     key: StoreKey?) throws -> any DataStore {
        try LMDBStore(path: path, schema: schema, upgrades: upgrades,
                      options: LMDBOptions(durability: durability, key: key))
    }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try openSource(at: path, alreadyChecked: alreadyChecked, key: nil)
    }

    /// Read-only, and unless just checked, with every page walked before liblmdb reads one.
    public func openSource(at path: String, alreadyChecked: Bool, key: StoreKey?) throws -> any DataStore {
        try LMDBStore(
            path: path, schema: nil, options: LMDBOptions(readOnly: true, checkPages: !alreadyChecked, key: key))
    }

    /// The page walk, then every record decoded and checked against the key it is stored under.
    public func check(at path: String) throws -> EngineCheck {
        let report = try LMDBStore.check(path: path)
        return EngineCheck(
            "page walk: \(report.pages) pages of \(report.pageSize) bytes, \(report.databases) databases, "
                + "\(report.entries) entries", itemsChecked: report.items)
    }

    public func destroy(at path: String) throws { try LMDBStore.destroy(at: path) }

    public func move(from path: String, to other: String) throws {
        do {
            try FileManager.default.moveItem(atPath: path, toPath: other)
        } catch {
            throw StoreError(.io, "cannot move \(path) to \(other): \(error.localizedDescription)")
        }
    }

    public func sizeOnDisk(at path: String) -> Int64 {
        (try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as? Int64) ?? 0
    }
}

import DataStoreAPI
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore
import Synchronization

/// The kind of a store.
public enum StoreKind: String, Sendable, Hashable, CaseIterable, Codable {
    case sqlite, lmdb, memory
}

/// Where a store lives: `KIND:PATH`.
///
/// `sqlite:app.sqlite` is a SQLite file, `lmdb:app.lmdb` an LMDB environment directory,
/// `memory:NAME` an in-memory store of this process. A bare path names what is there: a
/// directory holding `data.mdb` is LMDB, a file is SQLite. A bare kind (`sqlite`) has no path
/// and is an error.
public struct StoreLocation: Sendable, Hashable, CustomStringConvertible {
    public var kind: StoreKind
    public var path: String

    public init(kind: StoreKind, path: String) {
        self.kind = kind
        self.path = path
    }

    /// Parses `KIND:PATH` or a bare path.
    /// - Throws: `invalidArgument` naming the text for an unknown kind, a kind without a path,
    ///   or a bare path whose kind cannot be told.
    public init(parsing text: String) throws(StoreError) {
        if let colon = text.firstIndex(of: ":") {
            let kindText = String(text[..<colon])
            let path = String(text[text.index(after: colon)...])
            guard let kind = StoreKind(rawValue: kindText) else {
                throw StoreError(.invalidArgument, "unknown store kind '\(kindText)' in '\(text)'; use sqlite:PATH, "
                    + "lmdb:PATH or memory:NAME")
            }
            guard !path.isEmpty else {
                throw StoreError(.invalidArgument, "'\(text)' names no path; write \(kind.rawValue):PATH")
            }
            self.init(kind: kind, path: path)
            return
        }
        if let kind = StoreKind(rawValue: text) {
            throw StoreError(.invalidArgument, "'\(text)' names no path; write \(kind.rawValue):PATH")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: text, isDirectory: &isDirectory) else {
            throw StoreError(.invalidArgument, "'\(text)' has no kind and does not exist; write sqlite:\(text) or "
                + "lmdb:\(text)")
        }
        self.init(kind: isDirectory.boolValue ? .lmdb : .sqlite, path: text)
    }

    public var description: String { "\(kind.rawValue):\(path)" }

    /// Whether something (a store or not) is at the location.
    public var exists: Bool {
        switch kind {
        case .memory: return MemoryStores.shared.exists(path)
        case .sqlite, .lmdb: return FileManager.default.fileExists(atPath: path)
        }
    }

    /// Opens the store; with `schema == nil`, an existing store with the schema it holds.
    public func open(schema: Schema?, durability: Durability = .full,
                     acceptingIncompleteMigration: Bool = false) throws -> any DataStore {
        switch kind {
        case .sqlite:
            return try Store(engine: SQLiteEngine(path: path, schema: schema,
                                                  options: SQLiteOptions(durability: durability)),
                             acceptingIncompleteMigration: acceptingIncompleteMigration)
        case .lmdb:
            return try Store(engine: LMDBEngine(path: path, schema: schema,
                                                options: LMDBOptions(durability: durability)),
                             acceptingIncompleteMigration: acceptingIncompleteMigration)
        case .memory:
            return try Store(engine: InMemoryEngine(database: MemoryStores.shared.database(path, create: schema != nil),
                                                    schema: schema),
                             acceptingIncompleteMigration: acceptingIncompleteMigration)
        }
    }

    /// Deletes the store's files (or in-memory database).
    public func destroy() throws {
        switch kind {
        case .sqlite: try SQLiteStore.destroy(at: path)
        case .lmdb: try LMDBStore.destroy(at: path)
        case .memory: MemoryStores.shared.remove(path)
        }
    }

    /// Moves the store to `other` (same kind), replacing nothing: `other` must not exist.
    func move(to other: StoreLocation) throws {
        switch kind {
        case .memory:
            MemoryStores.shared.rename(path, to: other.path)
        case .sqlite, .lmdb:
            do {
                for suffix in kind == .sqlite ? ["-wal", "-shm"] : [] where FileManager.default.fileExists(atPath: path + suffix) {
                    try FileManager.default.removeItem(atPath: path + suffix)
                }
                try FileManager.default.moveItem(atPath: path, toPath: other.path)
            } catch {
                throw StoreError(.io, "cannot move \(path) to \(other.path): \(error.localizedDescription)")
            }
        }
    }

    /// Bytes on disk (0 for memory).
    public var sizeOnDisk: Int64 {
        let files = FileManager.default
        switch kind {
        case .memory: return 0
        case .sqlite:
            return [path, path + "-wal"].reduce(0) { total, file in
                total + ((try? files.attributesOfItem(atPath: file)[.size] as? Int64) ?? 0)
            }
        case .lmdb:
            return ((try? files.attributesOfItem(atPath: path + "/data.mdb")[.size] as? Int64) ?? 0)
        }
    }
}

/// In-memory databases by name, for `memory:NAME` locations inside one process.
public final class MemoryStores: Sendable {
    public static let shared = MemoryStores()
    private let databases = Mutex<[String: InMemoryDatabase]>([:])

    func exists(_ name: String) -> Bool { databases.withLock { $0[name] != nil } }

    func database(_ name: String, create: Bool) throws -> InMemoryDatabase {
        try databases.withLock { all in
            if let existing = all[name] { return existing }
            guard create else { throw StoreError(.notFound, "memory:\(name) does not exist in this process") }
            let database = InMemoryDatabase()
            all[name] = database
            return database
        }
    }

    func remove(_ name: String) { databases.withLock { _ = $0.removeValue(forKey: name) } }

    func rename(_ name: String, to other: String) {
        databases.withLock { all in all[other] = all.removeValue(forKey: name) }
    }
}

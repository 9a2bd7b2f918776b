@_spi(Backend) import DataStoreAPI
import Foundation

/// A Core Data (or SwiftData) store opened read-only as a ``DataStore``: see ``CoreDataMapping``
/// for what maps to what. Its model comes from the store (`Z_MODELCACHE`) unless a model file is
/// given.
///
/// ```swift
/// let notes = try CoreDataStore(ForeignSource(path: "Notes.sqlite"))
/// let all = try notes.read { try $0.fetch(FetchRequest("Note")) }
/// ```
public final class CoreDataStore: Store, ForeignStore, @unchecked Sendable {
    /// What the mapping did, in one line.
    public let summary: String
    /// What the file is: the framework version that wrote it, where the model came from, its
    /// journal and what lives only in its `-wal`.
    public let facts: [String]

    /// Opens the store, reads its model and checks every value against it.
    /// - Throws: `notFound`, `notAStore`, `schemaMismatch` (the model is not the store's), or
    ///   `invalidArgument`/`invalidValue` naming what cannot be carried.
    public init(_ source: ForeignSource) throws {
        try source.refuseKeyFile(kind: "coredata")
        let database = try ForeignDatabase(path: source.path)
        do {
            let model: CoreDataModel
            if let file = source.model {
                model = try CoreDataModel(modelFile: file)
            } else {
                model = try Self.modelCache(database)
            }
            let mapping = try CoreDataMapping.map(database, model: model, keys: source.keys)
            summary = mapping.summary + (source.model == nil ? ", model from Z_MODELCACHE" : ", model from \(source.model ?? "")")
            let version = Self.frameworkVersion(database)
            facts = ["Core Data store written by framework version " + (version.map(String.init) ?? "unknown")
                + " (NSPersistenceFrameworkVersion)",
                     "model: " + (source.model ?? "the store's Z_MODELCACHE")]
                + database.journalFacts()
            try super.init(engine: ForeignEngine(database: database, mapping: mapping, kindName: "coredata"))
        } catch {
            database.close()
            throw error
        }
    }

    static func modelCache(_ database: ForeignDatabase) throws -> CoreDataModel {
        let tables = try database.tableNames()
        guard tables.contains("Z_PRIMARYKEY") else {
            throw StoreError(.notAStore, "\(database.path) is not a Core Data store: it has no Z_PRIMARYKEY table")
        }
        guard tables.contains("Z_MODELCACHE"),
              let row = try database.rows("SELECT Z_CONTENT FROM Z_MODELCACHE LIMIT 1").first,
              case .bytes(let compressed) = row[0] else {
            let version = frameworkVersion(database).map { " (it was written by framework version \($0))" } ?? ""
            throw StoreError(.notFound, "\(database.path) keeps no model\(version): Core Data keeps one in "
                + "Z_MODELCACHE since the framework of 2016 (iOS 10, macOS 10.12); pass the app's model, "
                + "coredata:\(database.path)?model=App.xcdatamodeld")
        }
        return try CoreDataModel(modelCache: compressed, what: "the model cache of \(database.path)")
    }

    /// `NSPersistenceFrameworkVersion` of the store's metadata (`Z_METADATA.Z_PLIST`, a binary
    /// property list): the version of the Core Data framework that last wrote the store.
    static func frameworkVersion(_ database: ForeignDatabase) -> Int64? {
        guard let row = try? database.rows("SELECT Z_PLIST FROM Z_METADATA LIMIT 1").first,
              case .bytes(let plist) = row[0],
              case .dictionary(let metadata) = try? BinaryPropertyListReader.read(plist, what: "Z_METADATA")
        else { return nil }
        switch metadata["NSPersistenceFrameworkVersion"] {
        case .int(let version): return version
        case .string(let text): return Int64(text)
        default: return nil
        }
    }
}

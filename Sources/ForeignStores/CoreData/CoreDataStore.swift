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
public final class CoreDataStore: Store, @unchecked Sendable {
    /// What the mapping did, in one line.
    public let summary: String

    /// Opens the store, reads its model and checks every value against it.
    /// - Throws: `notFound`, `notAStore`, `schemaMismatch` (the model is not the store's), or
    ///   `invalidArgument`/`invalidValue` naming what cannot be carried.
    public init(_ source: ForeignSource) throws {
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
            throw StoreError(.notFound, "\(database.path) keeps no model (no Z_MODELCACHE, as stores written before "
                + "iOS 11 and macOS 10.13): pass the app's model, coredata:\(database.path)?model=App.xcdatamodeld")
        }
        return try CoreDataModel(modelCache: compressed, what: "the model cache of \(database.path)")
    }
}

@_spi(Backend) import DataStoreAPI
import Foundation
internal import CZlib

/// A JSON Lines file opened as a read-only ``DataStore``: every read works as on any store
/// (one snapshot: the file as it was when opened), and writes fail with `readOnly`.
///
/// ```swift
/// let backup = try JSONLinesStore(path: "backup.jsonl.gz")
/// let customers = try backup.read { try $0.fetch(FetchRequest("Customer")) }
/// ```
public final class JSONLinesStore: Store, @unchecked Sendable {
    /// Opens the file at `path`, reading it once to check every line; an encrypted one (written
    /// by `migrate-store copy --to-key-file`) with its `key`.
    /// - Throws: `notFound`, `notAStore`, or a one-line `corrupt` naming the damaged line;
    ///   `wrongKey` for an encrypted file opened without its key or with another.
    public init(path: String, key: StoreKey? = nil) throws {
        let (engine, _) = try SealedEngine.open(key: key, requested: nil, upgrades: SchemaUpgrades(),
                                                location: "jsonl:\(path)") { _ in try JSONLEngine(path: path) }
        try super.init(engine: engine)
    }

    /// How many item lines this store's reads decoded so far (for tests of what a read costs).
    package var linesDecoded: Int {
        let lines = ((engine as? SealedEngine)?.inner ?? engine) as? JSONLEngine
        return lines?.linesDecoded.value.load(ordering: .relaxed) ?? 0
    }
}

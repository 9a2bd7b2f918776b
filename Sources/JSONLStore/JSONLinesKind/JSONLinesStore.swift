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
    /// Opens the file at `path`, reading it once to check every line.
    /// - Throws: `notFound`, `notAStore`, or a one-line `corrupt` naming the damaged line.
    public init(path: String) throws {
        try super.init(engine: JSONLEngine(path: path))
    }

    /// How many item lines this store's reads decoded so far (for tests of what a read costs).
    package var linesDecoded: Int { (engine as? JSONLEngine)?.linesDecoded.value.load(ordering: .relaxed) ?? 0 }
}

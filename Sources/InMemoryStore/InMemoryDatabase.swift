@_spi(Backend) import DataStoreAPI
import Synchronization

/// The storage behind in-memory stores. It outlives the stores opened on it, so that closing
/// a store and opening a new one on the same database finds the data, as with a file.
public final class InMemoryDatabase: Sendable {
    let state = Mutex(MemoryState())

    public init() {}
}

/// One committed version of an in-memory database. Copying it is O(1): the tables are
/// copy-on-write, which gives every read transaction its own snapshot.
struct MemoryState: Sendable {
    var tables: [String: MemoryTable] = [:]
    /// Metadata by the UTF-8 bytes of its key (never by Swift's canonical `String` equality).
    var metadata: [[UInt8]: [UInt8]] = [:]
    /// Counts commits, for observers.
    var commits: UInt64 = 0
}

struct MemoryTable: Sendable {
    var rows: [[UInt8]: Record] = [:]
    /// For each unique index, the owner of each complete (non-null) tuple of values
    /// (``UniqueIndexRule/tuple(_:_:)``).
    var unique: [String: [[Value]: [UInt8]]] = [:]
    /// The keys in canonical order, computed at most once per committed version.
    var order = KeyOrder()

    mutating func touch() {
        order = KeyOrder()
    }

    func sortedKeys() -> [[UInt8]] {
        order.keys { rows.keys.sorted { Value.compareBytes($0, $1) < 0 } }
    }
}

/// A lazily computed, shared list of sorted keys.
///
/// `@unchecked Sendable`: `cached` is read and written only inside `lock`.
final class KeyOrder: @unchecked Sendable {
    private let lock = Mutex(())
    private var cached: [[UInt8]]?

    func keys(_ compute: () -> [[UInt8]]) -> [[UInt8]] {
        lock.withLock { _ in
            if let cached { return cached }
            let keys = compute()
            cached = keys
            return keys
        }
    }
}

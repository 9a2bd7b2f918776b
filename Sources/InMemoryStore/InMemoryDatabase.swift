@_spi(Backend) import DataStoreAPI
import HashTreeCollections
import Synchronization

/// The storage behind in-memory stores. It outlives the stores opened on it, so that closing
/// a store and opening a new one on the same database finds the data, as with a file.
public final class InMemoryDatabase: Sendable {
    let state = Mutex(MemoryState())

    public init() {}
}

/// One committed version of an in-memory database. Copying it is O(1), which gives every read
/// transaction its own snapshot, and changing a copy costs O(log n) per item: the rows and
/// unique maps are persistent hash tries (`TreeDictionary`), which copy only the path to what
/// changed and share the rest with the versions before.
struct MemoryState: Sendable {
    var tables: [String: MemoryTable] = [:]
    /// Metadata by the UTF-8 bytes of its key (never by Swift's canonical `String` equality).
    /// A persistent trie like the rows, so that a write copies only the path to what it changed.
    var metadata: TreeDictionary<[UInt8], [UInt8]> = [:]
    /// The change feed's entries by number (the store's own entry storage, so that a commit
    /// writes its entry and not the feed's state beside it), and the first and last number held:
    /// entries are always a run of consecutive numbers, appended at its end and removed from its
    /// start.
    var feed: TreeDictionary<UInt64, [UInt8]> = [:]
    var feedBounds: FeedBounds?
    /// Counts commits, for observers.
    var commits: UInt64 = 0

    /// The state with every table's key changes folded into its order, as it is published.
    func settled() -> MemoryState {
        var settled = self
        for (name, table) in tables where table.hasKeyChanges { settled.tables[name] = table.settled() }
        return settled
    }
}

/// The numbers of the first and last entries of ``MemoryState/feed``.
struct FeedBounds: Sendable {
    var first: UInt64
    var last: UInt64
}

struct MemoryTable: Sendable {
    var rows: TreeDictionary<[UInt8], Record> = [:]
    /// For each unique index, the owner of each complete (non-null) tuple of values
    /// (``UniqueIndexRule/tuple(_:_:)``).
    var unique: [String: TreeDictionary<[Value], [UInt8]>] = [:]
    /// The keys in canonical order as of the version this one was derived from, computed at
    /// most once per published version, and what was inserted and deleted since.
    private var order = KeyOrder(base: nil)
    private var inserted: Set<[UInt8]> = []
    private var deleted: Set<[UInt8]> = []

    var hasKeyChanges: Bool { !inserted.isEmpty || !deleted.isEmpty }

    /// Records that `key` was added to `rows`.
    mutating func keyInserted(_ key: [UInt8]) {
        if deleted.remove(key) == nil { inserted.insert(key) }
    }

    /// Records that `key` was removed from `rows`.
    mutating func keyDeleted(_ key: [UInt8]) {
        if inserted.remove(key) == nil { deleted.insert(key) }
    }

    /// The table to publish: its order derives from this one's, lazily.
    func settled() -> MemoryTable {
        var table = self
        table.order = KeyOrder(base: order.computed.map { ($0, inserted, deleted) })
        table.inserted = []
        table.deleted = []
        return table
    }

    func sortedKeys() -> [[UInt8]] {
        if hasKeyChanges { return settled().sortedKeys() }
        return order.keys { rows.keys.sorted { Value.compareBytes($0, $1) < 0 } }
    }
}

/// A lazily computed, shared list of sorted keys: from the previous version's list and the keys
/// inserted and deleted since (a merge, O(n + k log k)) when that list was computed, else by
/// sorting every key.
///
/// `@unchecked Sendable`: `cached` and `base` are read and written only inside `lock`.
final class KeyOrder: @unchecked Sendable {
    typealias Base = (keys: [[UInt8]], inserted: Set<[UInt8]>, deleted: Set<[UInt8]>)
    private let lock = Mutex(())
    private var cached: [[UInt8]]?
    private var base: Base?

    init(base: Base?) {
        self.base = base
    }

    /// The keys, when they were computed.
    var computed: [[UInt8]]? { lock.withLock { _ in cached } }

    func keys(_ sortAll: () -> [[UInt8]]) -> [[UInt8]] {
        lock.withLock { _ in
            if let cached { return cached }
            let keys = base.map(Self.merge) ?? sortAll()
            cached = keys
            base = nil
            return keys
        }
    }

    private static func merge(_ base: Base) -> [[UInt8]] {
        let added = base.inserted.sorted { Value.compareBytes($0, $1) < 0 }
        var merged: [[UInt8]] = []
        merged.reserveCapacity(base.keys.count + added.count - base.deleted.count)
        var next = 0
        for key in base.keys where !base.deleted.contains(key) {
            while next < added.count && Value.compareBytes(added[next], key) < 0 {
                merged.append(added[next])
                next += 1
            }
            merged.append(key)
        }
        merged.append(contentsOf: added[next...])
        return merged
    }
}

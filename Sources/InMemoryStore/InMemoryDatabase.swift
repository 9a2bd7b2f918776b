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
    var rows = RowMap()
    /// For each unique index, the owner of each complete (non-null) tuple of values
    /// (``UniqueIndexRule/tuple(_:_:)``).
    var unique: [String: TreeDictionary<[Value], [UInt8]>] = [:]
    /// For each attribute that leads an index (by its slot in the entity), the keys of the items
    /// under each of its values (``lookupValue(_:)``): what an equality, `in` or is-null on that
    /// attribute reads instead of every item. Persistent maps and sets, so that a transaction's
    /// copy of the table shares them until it changes one.
    var lookups: [TreeDictionary<Value, TreeSet<HashedBytes>>?] = []
    /// The keys in canonical order as of the version this one was derived from, computed at
    /// most once per published version, and what was inserted and deleted since.
    private var order = KeyOrder(base: nil)
    private var inserted: Set<HashedBytes> = []
    private var deleted: Set<HashedBytes> = []

    var hasKeyChanges: Bool { !inserted.isEmpty || !deleted.isEmpty }

    /// Records that `key` was added to `rows`.
    mutating func keyInserted(_ key: [UInt8]) {
        if deleted.remove(HashedBytes(key)) == nil { inserted.insert(HashedBytes(key)) }
    }

    /// Records that `key` was removed from `rows`.
    mutating func keyDeleted(_ key: [UInt8]) {
        if inserted.remove(HashedBytes(key)) == nil { deleted.insert(HashedBytes(key)) }
    }

    /// The table to publish: its order derives from this one's, lazily.
    func settled() -> MemoryTable {
        var table = self
        table.order = KeyOrder(base: order.computed.map { ($0, inserted, deleted) })
        table.inserted = []
        table.deleted = []
        return table
    }

    /// A value as ``lookups`` holds it: values a filter's equality takes for equal are equal
    /// (`Value`'s own equality tells a double's zeros apart; the filter does not).
    static func lookupValue(_ value: Value) -> Value {
        if case .double(let d) = value, d == 0 { return .double(0) }
        return value
    }

    /// The slots of the attributes that lead an index, each once.
    private static func leadingSlots(_ entity: EntitySchema) -> some Sequence<Int> {
        entity.indexes.enumerated().lazy.compactMap { position, index -> Int? in
            guard let name = index.attributes.first,
                  !entity.indexes[..<position].contains(where: { $0.attributes.first == name }) else { return nil }
            return entity.layout.slot(of: name)
        }
    }

    /// Notes in ``lookups`` that the item under `key` changed from `old` to `new` (`nil`: none).
    mutating func updateLookups(_ entity: EntitySchema, key: [UInt8], old: Record?, new: Record?) {
        for slot in Self.leadingSlots(entity) {
            let name = entity.layout.names[slot]
            let before = old.map { Self.lookupValue($0[name]) }
            let after = new.map { Self.lookupValue($0[name]) }
            if before == after { continue }
            if lookups.count <= slot { lookups += Array(repeating: nil, count: slot + 1 - lookups.count) }
            if let before {
                lookups[slot]?[before]?.remove(HashedBytes(key))
                if lookups[slot]?[before]?.isEmpty == true { lookups[slot]?[before] = nil }
            }
            if let after {
                if lookups[slot] == nil { lookups[slot] = [:] }
                lookups[slot]?[after, default: []].insert(HashedBytes(key))
            }
        }
    }

    /// The keys, in canonical order, of a superset of the items `filter` matches, read from
    /// ``lookups`` when one of its terms (or the whole filter) is an equality, `in` or is-null on
    /// an attribute that leads an index; `nil` when none is.
    func candidateKeys(_ filter: Filter, _ entity: EntitySchema) -> [[UInt8]]? {
        let terms: [Filter]
        if case .and(let all) = filter { terms = all } else { terms = [filter] }
        for term in terms {
            let name: String, values: [Value]
            switch term {
            case let .compare(attribute, .equal, value): (name, values) = (attribute, [value])
            case let .among(attribute, among): (name, values) = (attribute, among)
            case let .isNull(attribute): (name, values) = (attribute, [.null])
            default: continue
            }
            guard let slot = entity.layout.slot(of: name), Self.leadingSlots(entity).contains(slot) else { continue }
            // No map yet: no item was ever stored under the attribute's index.
            guard slot < lookups.count, let lookup = lookups[slot] else { return [] }
            var keys: [[UInt8]] = []
            for value in Set(values.map(Self.lookupValue)) {
                if let found = lookup[value] { keys.append(contentsOf: found.lazy.map(\.bytes)) }
            }
            keys.sort { Value.compareBytes($0, $1) < 0 }
            return keys
        }
        return nil
    }

    func sortedKeys() -> [[UInt8]] {
        if hasKeyChanges { return settled().sortedKeys() }
        return order.keys { rows.keys.sorted { Value.compareBytes($0, $1) < 0 } }
    }
}

/// A table's records by key: a persistent map whose keys are hashed in one call each
/// (``HashedBytes``).
struct RowMap: Sendable {
    private var map: TreeDictionary<HashedBytes, Record> = [:]

    subscript(key: [UInt8]) -> Record? {
        get { map[HashedBytes(key)] }
        set { map[HashedBytes(key)] = newValue }
    }

    mutating func removeValue(forKey key: [UInt8]) -> Record? { map.removeValue(forKey: HashedBytes(key)) }

    var count: Int { map.count }

    var values: TreeDictionary<HashedBytes, Record>.Values { map.values }

    var keys: some Collection<[UInt8]> { map.keys.lazy.map(\.bytes) }
}

/// Bytes hashed in one call (an array of bytes hashes each byte in a call of its own: a tenth of
/// an insert's instructions and of a point get's, counted with callgrind).
struct HashedBytes: Hashable, Sendable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

/// A lazily computed, shared list of sorted keys: from the previous version's list and the keys
/// inserted and deleted since (a merge, O(n + k log k)) when that list was computed, else by
/// sorting every key.
///
/// `@unchecked Sendable`: `cached` and `base` are read and written only inside `lock`.
final class KeyOrder: @unchecked Sendable {
    typealias Base = (keys: [[UInt8]], inserted: Set<HashedBytes>, deleted: Set<HashedBytes>)
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
        let added = base.inserted.map(\.bytes).sorted { Value.compareBytes($0, $1) < 0 }
        var merged: [[UInt8]] = []
        merged.reserveCapacity(base.keys.count + added.count - base.deleted.count)
        var next = 0
        for key in base.keys where !base.deleted.contains(HashedBytes(key)) {
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

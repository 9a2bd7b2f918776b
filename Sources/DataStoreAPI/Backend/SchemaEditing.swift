/// The structural changes a backend makes for a schema upgrade, inside the one write
/// transaction that migrates the store.
///
/// Everything else about a migration (which versions, which steps, checking them, converting
/// values, unique checks, the error words, the history, progress) is ``SchemaUpgrader``'s, the
/// same for every backend. A backend decides only how its storage changes: in place where its
/// engine can (SQLite's `ALTER TABLE`), or by rewriting items with ``EntityChange/newRecord(from:)``.
@_spi(Backend) public protocol SchemaEditingWriter: StorageWriter {
    /// Creates empty storage for `entity`, with its indexes.
    func createEntity(_ entity: EntitySchema) throws
    /// Removes `entity`'s storage, its items and its indexes.
    func dropEntity(_ entity: EntitySchema) throws
    /// Gives the items and indexes of `entity` to `renamed`, the same entity under a new name.
    func renameEntity(_ entity: EntitySchema, to renamed: EntitySchema) throws
    /// Changes the storage of ``EntityChange/old`` into that of ``EntityChange/new``: every item
    /// becomes ``EntityChange/newRecord(from:)`` of itself (or is deleted when that is `nil`),
    /// and the indexes of `new` hold exactly those records.
    func changeEntity(_ change: EntityChange) throws
    /// Records `schema` as the store's schema (the header), in this transaction.
    func writeSchema(_ schema: Schema) throws
}

/// The conversion of one attribute's values by a change of type: the attribute's position (the
/// same in the entity before and after) and the conversion of a value, which throws
/// `invalidValue` naming the item by its key (the second argument, called only then) when the
/// value does not convert or becomes null where the attribute is required.
@_spi(Backend) public struct AttributeConversion {
    public let position: Int
    public let convert: (Value, () -> Value) throws -> Value

    init(position: Int, _ convert: @escaping (Value, () -> Value) throws -> Value) {
        self.position = position
        self.convert = convert
    }
}

/// How one entity changes in a migration step.
@_spi(Backend) public struct EntityChange {
    /// The entity before the step.
    public let old: EntitySchema
    /// The entity after it; same name and primary key.
    public let new: EntitySchema
    /// Attributes that changed only their names: old name → new name.
    public let renamedAttributes: [String: String]
    /// Whether items change only as the schema says (renamed attributes keep their values, new
    /// ones take their default or null, removed ones go): a backend may then change its storage
    /// without visiting items. When false, every item must be rewritten through ``newRecord(from:)``.
    public let isStructural: Bool
    /// The attributes of `new` whose values the change may set otherwise than by carrying them
    /// from `old` (a conversion): none for a structural change, `nil` when any may change or items
    /// may go (a custom step, or steps merged into one pass). Decides ``unchangedIndexes``.
    public let rewrittenAttributes: Set<String>?
    /// For a change that converts one attribute's values and carries every other value as it is
    /// (a change of type, ``transform`` doing the same to whole records): that conversion, for a
    /// backend that rewrites stored values without building records. `nil` for other changes.
    public let conversion: AttributeConversion?
    private let transform: ((Record) throws -> Record?)?
    private let visited: (Int) -> Void
    /// For each attribute of `new`, the slot of `old` its value comes from, or its default.
    private let sources: [Int?]
    private let defaults: [Value]

    init(old: EntitySchema, new: EntitySchema, renamedAttributes: [String: String] = [:],
         transform: ((Record) throws -> Record?)?, conversion: AttributeConversion? = nil,
         visited: @escaping (Int) -> Void) {
        self.old = old
        self.new = new
        self.renamedAttributes = renamedAttributes
        self.transform = transform
        self.visited = visited
        isStructural = transform == nil
        self.conversion = transform == nil ? nil : conversion
        rewrittenAttributes = transform == nil ? [] : conversion.map { [new.attributes[$0.position].name] }
        let reverse = Dictionary(uniqueKeysWithValues: renamedAttributes.map { ($1, $0) })
        sources = new.attributes.map { attribute in
            old.attributes.firstIndex { $0.name == (reverse[attribute.name] ?? attribute.name) }
        }
        defaults = new.attributes.map { $0.defaultValue ?? .null }
    }

    /// The indexes of `new` that `old` does not have in the same form.
    public var addedIndexes: [Index] {
        new.indexes.filter { index in !old.indexes.contains(renamedIndex(index, back: true)) }
    }

    /// For a structural change, which a backend may make without building records: for each
    /// attribute of `new`, the position in `old` of the attribute its value is carried from, or
    /// `nil` when it takes its default (``Attribute/defaultValue``, else null).
    public var carriedFrom: [Int?] { sources }

    /// Counts items rewritten without ``newRecord(from:)`` (which counts its own), for progress.
    public func countVisited(_ items: Int) { visited(items) }

    /// The indexes of `new` whose every entry stays as it is through a rewrite of the items: `old`
    /// has them in the same form, and the change neither drops items nor sets the value of an
    /// attribute they cover (only carries it). A backend that rewrites the items may leave these
    /// indexes alone instead of building them again.
    public var unchangedIndexes: [Index] {
        guard let rewritten = rewrittenAttributes else { return [] }
        let added = Set(addedIndexes.map(\.name))
        return new.indexes.filter { index in
            !added.contains(index.name) && index.attributes.allSatisfy { !rewritten.contains($0) }
        }
    }

    /// The indexes of `old` that `new` does not have in the same form.
    public var removedIndexes: [Index] {
        old.indexes.filter { index in !new.indexes.contains(renamedIndex(index, back: false)) }
    }

    private func renamedIndex(_ index: Index, back: Bool) -> Index {
        let map = back ? Dictionary(uniqueKeysWithValues: renamedAttributes.map { ($1, $0) }) : renamedAttributes
        return Index(index.name, on: index.attributes.map { map[$0] ?? $0 }, unique: index.isUnique)
    }

    /// The new record of an old item, complete and checked against `new`; `nil` when the item
    /// goes. Each call counts as one item visited, for progress.
    /// - Throws: `invalidValue` naming the item when a value does not convert, or when a custom
    ///   step returns a record that does not fit or changes the key.
    public func newRecord(from record: Record) throws -> Record? {
        defer { visited(1) }
        guard let transform else { return try carried(record) }
        guard let result = try transform(record) else { return nil }
        return result
    }

    /// The record with each value carried to its attribute of `new`.
    private func carried(_ record: Record) throws -> Record {
        let before = record.values(in: old.layout)
        var values: [Value] = []
        values.reserveCapacity(sources.count)
        for i in 0..<sources.count {
            if let source = sources[i] { values.append(before[source]) } else { values.append(defaults[i]) }
        }
        return Record(layout: new.layout, values: values)
    }
}

extension StorageReader {
    /// The pass every backend's rewrite of an entity makes: the items of `change.old` in key
    /// order, a page of 1,000 at a time, each with its record in the new shape (`nil` when the
    /// change drops it).
    @_spi(Backend) public func forEachRewrittenPage(_ change: EntityChange,
                                                    _ body: ([(key: PrimaryKey, record: Record?)]) throws -> Void)
        throws
    {
        var after: PrimaryKey?
        while true {
            let page = try scan(change.old, after: after, limit: 1_000)
            var rewritten: [(key: PrimaryKey, record: Record?)] = []
            rewritten.reserveCapacity(page.count)
            for record in page {
                let key = try PrimaryKey(record[change.old.primaryKey])
                rewritten.append((key, try change.newRecord(from: record)))
                after = key
            }
            try body(rewritten)
            if page.count < 1_000 { break }
        }
    }
}

extension StorageEngine {
    /// A write transaction for a large change that the engine may run more than once: an engine
    /// that would otherwise keep every change in memory to survive a restart (LMDB growing its
    /// map) may instead roll back and call `body` again from the start. `body` must give the
    /// same result each time it runs.
    @_spi(Backend) public func withRestartableWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        if let restartable = self as? any RestartableWriting {
            return try restartable.restartableWrite(body)
        }
        return try withWriter(body)
    }
}

/// An engine with a cheaper form of ``StorageEngine/withRestartableWriter(_:)``.
@_spi(Backend) public protocol RestartableWriting {
    /// Runs `body` in a write transaction, rolling back and running it again when the engine
    /// must restart the transaction.
    func restartableWrite<T>(_ body: (any StorageWriter) throws -> T) throws -> T
}

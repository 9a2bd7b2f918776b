/// The values of one item, by attribute name.
///
/// Records returned by a store hold every attribute of the entity, with ``Value/null`` for
/// optional attributes that have no value; they share their entity's `RecordLayout` and keep
/// their values in an array. Records built by the app are dictionaries. Both behave the same:
/// two records are equal when they hold the same attribute names with equal values. When
/// writing, a missing optional attribute is null and a missing attribute with a default takes
/// the default.
public struct Record: Sendable, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    // One of four representations, invisible to the app:
    // - a store's record: its entity's `layout` and one value per name in `slots`;
    // - a store's compact record: its fields as the store keeps them, in a chunk of the result's
    //   records (``CompactChunk``, whose layout it is), decoded when a value is asked for;
    //   `slots` holds no storage, only the record's place in the chunk (its start and count);
    // - a small record the app built from a literal: the literal's own array of `pairs`, kept
    //   as it came (no names array built, no values copied, nothing hashed), and no slots. A
    //   name may repeat in it: the last one wins, so a lookup searches from the end, and what
    //   lists names skips any that repeats later. A write checks the names against its
    //   entity's layout (``values(inOrderOf:)``): a literal written in the schema's order
    //   matches it name for name, and is then known to hold each name once without a check
    //   of its own (a check for repeats compares every name with every other);
    // - any other record the app built: a `dictionary`, and no slots.
    // Two references in all, so that copying a record (into an array, out of a page) retains
    // two objects; the values may share their storage with other records a store returned
    // together (``RecordValues``, ``RecordArena``).
    private enum Names {
        case layout(RecordLayout)
        case compact(CompactChunkReference)
        case pairs([(String, Value)])
        case dictionary([String: Value])
    }

    private var names: Names
    private var slots: RecordValues

    /// Literals of up to this many names stay pairs; larger ones are hashed once.
    private static let maxPairs = 16

    /// A record of the given values by attribute name.
    public init(_ values: [String: Value] = [:]) {
        names = .dictionary(values)
        slots = RecordValues()
    }

    /// A compact record (``CompactArena``).
    init(compact row: CompactRow) {
        names = .compact(CompactChunkReference(chunk: row.chunk))
        slots = RecordValues(storage: nil, start: row.start, count: row.count)
    }

    /// The place of a compact record.
    var compactRow: CompactRow? {
        guard case .compact(let reference) = names else { return nil }
        return CompactRow(chunk: reference.chunk, start: Int(slots.start), count: Int(slots.length))
    }

    /// The value at `slot` of a record a store returned (``storedLayout``'s names, in order).
    @_spi(Backend) public func value(atSlot slot: Int) -> Value {
        if let row = compactRow { return row.value(at: slot) }
        return slots[slot]
    }

    /// A record with one value per name of `layout`, in order (what backends build).
    @_spi(Backend) public init(layout: RecordLayout, values: [Value]) {
        self.init(layout: layout, values: RecordValues(values))
    }

    /// A record with one value per name of `layout`, in order, keeping their storage.
    @_spi(Backend) public init(layout: RecordLayout, values: RecordValues) {
        if values.count == layout.names.count {
            names = .layout(layout)
            slots = values
        } else {
            names = .dictionary(Dictionary(zip(layout.names, values), uniquingKeysWith: { _, last in last }))
            slots = RecordValues()
        }
    }

    /// Refills the record with one value per name of `layout`: `fill` replaces the values in
    /// the buffer it is given (one per name, in order; the record's previous values, or nulls)
    /// and returns `true`, or returns `false` when it cannot read the row (the record is then
    /// left empty). The way a backend hands a stream of rows to a visitor without allocating per
    /// row: when no copy of the record is alive (the visitor kept none), the values are replaced
    /// in place; a kept copy keeps its values, and the refill takes new storage (a value type:
    /// nothing the visitor kept changes).
    ///
    /// Neither generic nor throwing, and `fill` is called once per row with the whole buffer:
    /// called across the module boundary, a function generic over its error looks up generic
    /// metadata once per row, and a closure called per value costs as much as emptying and
    /// appending to the array; the caller keeps its own error.
    @_spi(Backend) public mutating func refill(
        layout: RecordLayout, _ fill: (UnsafeMutableBufferPointer<Value>) -> Bool
    ) -> Bool {
        let count = layout.names.count
        if storedLayout !== layout || compactRow != nil || slots.count != count || !slots.isUnique() {
            names = .layout(layout)
            slots = RecordValues(repeating: .null, count: count)
        }
        let complete = slots.withUnsafeMutableBufferPointer { fill($0) }
        if !complete { self = Record() }
        return complete
    }

    public init(dictionaryLiteral elements: (String, Value)...) {
        self.init(pairs: elements)
    }

    /// A record of names and values in order, as a dictionary literal gives them (the last of
    /// a repeated name wins).
    @_spi(Backend) public init(pairs elements: [(String, Value)]) {
        slots = RecordValues()
        if elements.count <= Self.maxPairs {
            names = .pairs(elements)
        } else {
            names = .dictionary(Dictionary(elements, uniquingKeysWith: { _, last in last }))
        }
    }

    /// Where the last pair named `attribute` is (the one that counts).
    private static func lastPosition(of attribute: String, in pairs: [(String, Value)]) -> Int? {
        pairs.lastIndex { Schema.isName($0.0, attribute) }
    }

    /// Whether no pair after `position` repeats its name (by Swift's equality, as the
    /// dictionary a larger record uses: canonically equivalent names are one name).
    private static func isLast(_ position: Int, in pairs: [(String, Value)]) -> Bool {
        let name = pairs[position].0
        return !pairs[(position + 1)...].contains { Schema.isName($0.0, name) }
    }

    /// The positions of the pairs that count: each name's last.
    private static func counted(_ pairs: [(String, Value)]) -> some Collection<Int> {
        pairs.indices.lazy.filter { isLast($0, in: pairs) }
    }

    /// The values by attribute name.
    public var values: [String: Value] {
        get {
            switch names {
            case .layout(let layout): return Dictionary(zip(layout.names, slots), uniquingKeysWith: { first, _ in first })
            case .compact(let reference):
                return Dictionary(zip(reference.chunk.layout.names, compactRow.unsafelyUnwrapped.values()),
                                  uniquingKeysWith: { first, _ in first })
            case .pairs(let pairs): return Dictionary(pairs, uniquingKeysWith: { _, last in last })
            case .dictionary(let dictionary): return dictionary
            }
        }
        set {
            names = .dictionary(newValue)
            slots = RecordValues()
        }
    }

    /// How many attributes the record names.
    public var count: Int {
        switch names {
        case .layout, .compact: return slots.count
        case .pairs(let pairs): return Self.counted(pairs).count
        case .dictionary(let dictionary): return dictionary.count
        }
    }

    /// The attribute names the record holds: in schema order for records from a store, in the
    /// order given for one made from pairs, by name for one made from a dictionary (never a
    /// dictionary's own order, which changes from one process to the next).
    public var attributeNames: [String] {
        switch names {
        case .layout(let layout): return layout.names
        case .compact(let reference): return reference.chunk.layout.names
        case .pairs(let pairs): return Self.counted(pairs).map { pairs[$0].0 }
        case .dictionary(let dictionary): return dictionary.keys.sorted()
        }
    }

    /// Whether the record names the attribute (possibly with a null value).
    public func contains(_ attribute: String) -> Bool { value(ifPresent: attribute) != nil }

    /// The value of an attribute, or `nil` when the record does not name it.
    public func value(ifPresent attribute: String) -> Value? {
        switch names {
        case .layout(let layout): return layout.slot(of: attribute).map { slots[$0] }
        case .compact(let reference): return reference.chunk.layout.slot(of: attribute).map { value(atSlot: $0) }
        case .pairs(let pairs): return Self.lastPosition(of: attribute, in: pairs).map { pairs[$0].1 }
        case .dictionary(let dictionary): return Self.value(of: attribute, in: dictionary)
        }
    }

    /// The value of `name` in a dictionary whose key is the same name byte for byte.
    static func value(of name: String, in dictionary: [String: Value]) -> Value? {
        guard let index = dictionary.index(forKey: name), Schema.isName(dictionary[index].key, name) else { return nil }
        return dictionary[index].value
    }

    /// The value of an attribute, looked for first at `position`: what a schema asks for when
    /// it reads a record in its attributes' order (a store's records and literals written in
    /// that order answer without a lookup).
    @_spi(Backend) public func value(ifPresent attribute: String, at position: Int) -> Value? {
        switch names {
        case .layout(let layout):
            if position < slots.count && Schema.isName(layout.names[position], attribute) { return slots[position] }
            return layout.slot(of: attribute).map { slots[$0] }
        case .compact(let reference):
            // The row made once from the reference in hand (``value(atSlot:)`` copied the
            // record's names again, a retain and a release of its chunk per value).
            let row = CompactRow(chunk: reference.chunk, start: Int(slots.start), count: Int(slots.length))
            let layout = row.layout
            if position < slots.count && Schema.isName(layout.names[position], attribute) { return row.value(at: position) }
            return layout.slot(of: attribute).map { row.value(at: $0) }
        case .pairs(let pairs):
            if position < pairs.count && Schema.isName(pairs[position].0, attribute) && Self.isLast(position, in: pairs) {
                return pairs[position].1
            }
            return Self.lastPosition(of: attribute, in: pairs).map { pairs[$0].1 }
        case .dictionary(let dictionary):
            return Self.value(of: attribute, in: dictionary)
        }
    }

    /// The values in the order of `layout` (null for names the record lacks).
    @_spi(Backend) public func values(in layout: RecordLayout) -> RecordValues {
        if let values = values(inOrderOf: layout) { return values }
        // Straight into the record's storage: no array built first and copied.
        let names = layout.names
        return RecordValues(names.indices.lazy.map { value(ifPresent: names[$0], at: $0) ?? .null })
    }

    /// The values by position, when the record names exactly the names of `layout`, in that
    /// order: a store's record of that layout, or a literal written in the schema's order (the
    /// common way to build one). Its values themselves, for a write to keep without copying.
    @_spi(Backend) public func values(inOrderOf layout: RecordLayout) -> RecordValues? {
        switch names {
        case .layout(let own): return own == layout ? slots : nil
        case .compact(let reference): return reference.chunk.layout == layout ? compactRow.unsafelyUnwrapped.values() : nil
        case .pairs(let pairs):
            // Names equal to the layout's, in order, are each there once (a layout's names are).
            guard Self.pairs(pairs, areNamed: layout.names) else { return nil }
            return RecordValues(pairs.lazy.map(\.1))
        case .dictionary: return nil
        }
    }

    /// Writes the record's values into `fields` as a compact record's fields, in the order of
    /// `layout`, and returns `true`, when the record names exactly the names of `layout` in that
    /// order (a literal written in the schema's order, or a record a store returned of that
    /// layout that holds values); returns `false`, writing nothing, for any other record. What a
    /// store that takes an insert's values without a normalized record (SQLite) checks and binds.
    @_spi(Backend) public func appendValues(inOrderOf layout: RecordLayout, to fields: inout StoredFieldBuffer) throws -> Bool {
        switch names {
        case .layout(let own):
            guard own == layout else { return false }
            try slots.withUnsafeBufferPointer { values in
                for value in values { try fields.append(value) }
            }
            return true
        case .pairs(let pairs):
            guard pairs.count == layout.names.count else { return false }
            // Each name and value read where the array keeps it (see pairs(_:areNamed:)).
            return try pairs.withUnsafeBufferPointer { pairs in
                guard let base = pairs.baseAddress else { return true }
                let raw = UnsafeRawPointer(base)
                guard Self.pairs(raw, count: pairs.count, areNamed: layout.names) else { return false }
                let stride = MemoryLayout<(String, Value)>.stride
                let valueOffset = Self.pairValueOffset
                for position in 0..<pairs.count {
                    try fields.append(raw.advanced(by: position * stride + valueOffset).assumingMemoryBound(to: Value.self).pointee)
                }
                return true
            }
        case .compact, .dictionary:
            return false
        }
    }

    /// Where a literal's pair keeps its value, from the pair's start.
    private static let pairValueOffset = MemoryLayout<(String, Value)>.offset(of: \(String, Value).1)!

    /// Whether the literal's names are `names`, in that order: each name read where the array
    /// keeps it (memory bound to a pair is bound to its name and value). Iterating the array, or
    /// a pointer to its pairs, copied each pair out: its name retained and released, its value
    /// copied and destroyed.
    @inline(__always)
    private static func pairs(_ pairs: [(String, Value)], areNamed names: [String]) -> Bool {
        guard pairs.count == names.count else { return false }
        return pairs.withUnsafeBufferPointer { Self.pairs(UnsafeRawPointer($0.baseAddress), count: $0.count, areNamed: names) }
    }

    /// ``pairs(_:areNamed:)`` of the `count` pairs at `raw`, as many as `names`.
    @inline(__always)
    private static func pairs(_ raw: UnsafeRawPointer?, count: Int, areNamed names: [String]) -> Bool {
        guard let raw else { return true }
        let stride = MemoryLayout<(String, Value)>.stride
        for position in 0..<count
            where !Schema.isName(raw.advanced(by: position * stride).assumingMemoryBound(to: String.self).pointee,
                                 names[position]) { return false }
        return true
    }

    /// The values of a record a store returned of `layout` that holds them as values (not a
    /// compact one): its storage itself.
    func heldValues(of layout: RecordLayout) -> RecordValues? {
        guard case .layout(let own) = names, own == layout else { return nil }
        return slots
    }

    /// Calls `body` with each field of a compact record of `layout`, in order, as the store keeps
    /// it (a string's or bytes' bytes in place, valid inside `body`), and returns `true`; returns
    /// `false`, calling nothing, for any other record. For a consumer that writes values out
    /// (JSON Lines) without building them.
    @_spi(Backend) public func forEachStoredField(of layout: RecordLayout, _ body: (Int, RowField) -> Void) -> Bool {
        guard let row = compactRow, row.layout == layout else { return false }
        row.forEachField(body)
        return true
    }

    /// The layout of a record a store returned (`nil` for one the app built).
    @_spi(Backend) public var storedLayout: RecordLayout? {
        switch names {
        case .layout(let layout): return layout
        case .compact(let reference): return reference.chunk.layout
        case .pairs, .dictionary: return nil
        }
    }


    /// The value of an attribute; ``Value/null`` when absent.
    public subscript(attribute: String) -> Value {
        get { value(ifPresent: attribute) ?? .null }
        set {
            switch names {
            case .layout(let layout):
                if let slot = layout.slot(of: attribute) {
                    slots[slot] = newValue
                    return
                }
            case .compact(let reference):
                // A change decodes the record into values of its own first.
                let layout = reference.chunk.layout
                if let slot = layout.slot(of: attribute) {
                    var values = compactRow.unsafelyUnwrapped.values()
                    values[slot] = newValue
                    names = .layout(layout)
                    slots = values
                    return
                }
            case .pairs(var pairs):
                let position = Self.lastPosition(of: attribute, in: pairs)
                if position != nil || pairs.count < Self.maxPairs {
                    names = .dictionary([:])  // `pairs` is then the only reference: changed in place
                    if let position { pairs[position].1 = newValue } else { pairs.append((attribute, newValue)) }
                    names = .pairs(pairs)
                    return
                }
            case .dictionary(var dictionary):
                names = .dictionary([:])  // likewise
                dictionary[attribute] = newValue
                names = .dictionary(dictionary)
                return
            }
            var dictionary = values
            dictionary[attribute] = newValue
            names = .dictionary(dictionary)
            slots = RecordValues()
        }
    }

    private func forEachPair(_ body: (String, Value) -> Void) {
        switch names {
        case .layout(let layout): for (name, value) in zip(layout.names, slots) { body(name, value) }
        case .compact(let reference):
            let row = compactRow.unsafelyUnwrapped
            for (slot, name) in reference.chunk.layout.names.enumerated() { body(name, row.value(at: slot)) }
        case .pairs(let pairs):
            for position in Self.counted(pairs) { body(pairs[position].0, pairs[position].1) }
        case .dictionary(let dictionary): for (name, value) in dictionary { body(name, value) }
        }
    }

    public var description: String {
        var pairs: [(String, Value)] = []
        forEachPair { pairs.append(($0, $1)) }
        return "{" + pairs.sorted { $0.0 < $1.0 }.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + "}"
    }
}

extension Record: Hashable {
    public static func == (lhs: Record, rhs: Record) -> Bool {
        // Two compact records (a verify's pair, one from each store): their chunks' layouts
        // compared where the chunks keep them, then their fields byte for byte. Through
        // `storedLayout` and `compactRow`, each part was copied out, three retains and four
        // releases a pair.
        if case .compact(let a) = lhs.names, case .compact(let b) = rhs.names {
            let (x, y) = (CompactRow(chunk: a.chunk, start: Int(lhs.slots.start), count: Int(lhs.slots.length)),
                          CompactRow(chunk: b.chunk, start: Int(rhs.slots.start), count: Int(rhs.slots.length)))
            if x.chunk === y.chunk || CompactRow.sameLayout(x, y) {
                return CompactRow.sameFields(x, y) || (0..<x.count).allSatisfy { x.value(at: $0) == y.value(at: $0) }
            }
        }
        if let a = lhs.storedLayout, let b = rhs.storedLayout, a == b {
            // (Two compact records of equal layouts were compared above.)
            switch (lhs.compactRow, rhs.compactRow) {
            case (nil, nil): return RecordValues.equalElements(lhs.slots, rhs.slots)
            default: return (0..<lhs.slots.count).allSatisfy { lhs.value(atSlot: $0) == rhs.value(atSlot: $0) }
            }
        }
        guard lhs.count == rhs.count else { return false }
        var equal = true
        lhs.forEachPair { name, value in
            if equal, rhs.value(ifPresent: name) != value { equal = false }
        }
        return equal
    }

    /// Order-independent, so that both representations of the same values hash alike.
    public func hash(into hasher: inout Hasher) {
        var sum: UInt = 0
        forEachPair { name, value in
            var pair = Hasher()
            pair.combine(name)
            pair.combine(value)
            sum &+= UInt(bitPattern: pair.finalize())
        }
        hasher.combine(count)
        hasher.combine(sum)
    }
}

/// The values of one item, by attribute name.
///
/// Records returned by a store hold every attribute of the entity, with ``Value/null`` for
/// optional attributes that have no value; they share their entity's ``RecordLayout`` and keep
/// their values in an array. Records built by the app are dictionaries. Both behave the same:
/// two records are equal when they hold the same attribute names with equal values. When
/// writing, a missing optional attribute is null and a missing attribute with a default takes
/// the default.
public struct Record: Sendable, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    // One of three representations, invisible to the app:
    // - a store's record: `layout` and one value per name in `slots`;
    // - a small record the app built from a literal: its names in `names` and its values in
    //   `slots`, in the literal's order, names unique (no hashing: a lookup compares a few
    //   names, and ``value(ifPresent:at:)`` first tries the position the schema expects);
    // - any other record the app built: `dictionary`.
    private var layout: RecordLayout?
    private var slots: [Value] = []
    private var names: [String] = []
    private var dictionary: [String: Value] = [:]

    /// Literals of up to this many names stay pairs; larger ones are hashed once.
    private static let maxPairs = 16

    /// A record of the given values by attribute name.
    public init(_ values: [String: Value] = [:]) {
        dictionary = values
    }

    /// A record with one value per name of `layout`, in order (what backends build).
    @_spi(Backend) public init(layout: RecordLayout, values: [Value]) {
        if values.count == layout.names.count {
            self.layout = layout
            slots = values
        } else {
            dictionary = Dictionary(zip(layout.names, values), uniquingKeysWith: { _, last in last })
        }
    }

    /// Refills the record with one value per name of `layout`, in order, which `body` appends
    /// to the emptied array it is given: the way a backend hands a stream of rows to a visitor
    /// without allocating per row. The values' storage is reused when no copy of the record is
    /// alive (the visitor kept none); a kept copy keeps its values, and the refill takes new
    /// storage (a value type: nothing the visitor kept changes).
    @_spi(Backend) public mutating func refill<E: Error>(
        layout: RecordLayout, _ body: (inout [Value]) throws(E) -> Void
    ) throws(E) {
        if self.layout !== layout {
            self.layout = layout
            names = []
            dictionary = [:]
        }
        slots.removeAll(keepingCapacity: true)
        slots.reserveCapacity(layout.names.count)
        do {
            try body(&slots)
        } catch {
            self = Record()
            throw error
        }
        if slots.count != layout.names.count { self = Record(layout: layout, values: slots) }
    }

    public init(dictionaryLiteral elements: (String, Value)...) {
        self.init(pairs: elements)
    }

    /// A record of names and values in order, as a dictionary literal gives them (the last of
    /// a repeated name wins).
    @_spi(Backend) public init(pairs elements: [(String, Value)]) {
        if elements.count <= Self.maxPairs {
            names.reserveCapacity(elements.count)
            slots.reserveCapacity(elements.count)
            for (name, value) in elements {
                names.append(name)
                slots.append(value)
            }
            if Self.namesAreUnique(names) { return }
            names = []
            slots = []
        }
        dictionary = Dictionary(elements, uniquingKeysWith: { _, last in last })
    }

    private static func namesAreUnique(_ names: [String]) -> Bool {
        // By Swift's equality, as the dictionary a larger record uses (canonically equivalent
        // names are one name), so no comparison of lengths first.
        for i in names.indices {
            for j in 0..<i where names[j] == names[i] { return false }
        }
        return true
    }

    /// The values by attribute name.
    public var values: [String: Value] {
        get {
            if let layout { return Dictionary(zip(layout.names, slots), uniquingKeysWith: { first, _ in first }) }
            if !names.isEmpty { return Dictionary(zip(names, slots), uniquingKeysWith: { first, _ in first }) }
            return dictionary
        }
        set {
            layout = nil
            slots = []
            names = []
            dictionary = newValue
        }
    }

    /// How many attributes the record names.
    public var count: Int { layout == nil && names.isEmpty ? dictionary.count : slots.count }

    /// The attribute names the record holds (in schema order for records from a store).
    public var attributeNames: [String] {
        if let layout { return layout.names }
        return names.isEmpty ? Array(dictionary.keys) : names
    }

    /// Whether the record names the attribute (possibly with a null value).
    public func contains(_ attribute: String) -> Bool { value(ifPresent: attribute) != nil }

    /// The value of an attribute, or `nil` when the record does not name it.
    public func value(ifPresent attribute: String) -> Value? {
        if let layout { return layout.slot(of: attribute).map { slots[$0] } }
        if !names.isEmpty { return names.firstIndex(of: attribute).map { slots[$0] } }
        return dictionary[attribute]
    }

    /// The value of an attribute, looked for first at `position`: what a schema asks for when
    /// it reads a record in its attributes' order (a store's records and literals written in
    /// that order answer without a lookup).
    @_spi(Backend) public func value(ifPresent attribute: String, at position: Int) -> Value? {
        if let layout {
            if position < slots.count && layout.names[position] == attribute { return slots[position] }
            return layout.slot(of: attribute).map { slots[$0] }
        }
        if position < names.count && names[position] == attribute { return slots[position] }
        return value(ifPresent: attribute)
    }

    /// The values in the order of `layout` (null for names the record lacks).
    @_spi(Backend) public func values(in layout: RecordLayout) -> [Value] {
        if self.layout === layout { return slots }
        return layout.names.enumerated().map { value(ifPresent: $1, at: $0) ?? .null }
    }

    /// The layout of a record a store returned (`nil` for one the app built).
    @_spi(Backend) public var storedLayout: RecordLayout? { layout }

    /// The values by position, when the record has exactly `layout` (what a store returns).
    @_spi(Backend) public func values(ifLayout layout: RecordLayout) -> [Value]? {
        self.layout === layout ? slots : nil
    }

    /// The value of an attribute; ``Value/null`` when absent.
    public subscript(attribute: String) -> Value {
        get { value(ifPresent: attribute) ?? .null }
        set {
            if let layout {
                if let slot = layout.slot(of: attribute) {
                    slots[slot] = newValue
                    return
                }
                dictionary = values
                self.layout = nil
                slots = []
            } else if !names.isEmpty {
                if let index = names.firstIndex(of: attribute) {
                    slots[index] = newValue
                    return
                }
                if names.count < Self.maxPairs {
                    names.append(attribute)
                    slots.append(newValue)
                    return
                }
                dictionary = values
                names = []
                slots = []
            }
            dictionary[attribute] = newValue
        }
    }

    private func forEachPair(_ body: (String, Value) -> Void) {
        if let layout {
            for (name, value) in zip(layout.names, slots) { body(name, value) }
        } else if !names.isEmpty {
            for (name, value) in zip(names, slots) { body(name, value) }
        } else {
            for (name, value) in dictionary { body(name, value) }
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
        if let a = lhs.layout, let b = rhs.layout, a == b { return Value.equalElements(lhs.slots, rhs.slots) }
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

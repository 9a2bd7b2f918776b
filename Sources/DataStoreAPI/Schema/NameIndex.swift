/// Values found by a schema name as ``Schema/isName(_:_:)`` compares names (byte for byte for the
/// ASCII names a schema holds; for others, equal byte counts and Swift's `==`): the entities of a
/// schema, a backend's statements or databases by entity.
///
/// A few names are compared one by one, as most schemas have (a short string compares with
/// one of its own words at once); more go through a dictionary. Finding a name in a dictionary
/// hashes it, about 300 instructions: a one-insert SQLite write found its entity that way three
/// times, an LMDB one three or four times (callgrind, `profile-store sqlite small`).
/// Changes (a schema step's) are rare and rebuild what they must.
@_spi(Backend) public struct NameIndex<Value> {
    @usableFromInline private(set) var names: [String] = []
    @usableFromInline private(set) var values: [Value] = []
    /// Positions by name, once there are more than ``linearCount`` names.
    @usableFromInline private(set) var positions: [String: Int]?
    private static var linearCount: Int { 8 }

    @inlinable public init() {}

    /// The pairs' values by their names; of two pairs with the same name, the first.
    public init(_ pairs: some Sequence<(String, Value)>) {
        for (name, value) in pairs where position(of: name) == nil { append(name, value) }
    }

    /// Where `name` is, byte for byte.
    @inlinable
    func position(of name: String) -> Int? {
        if let positions {
            guard let position = positions[name] else { return nil }
            if Schema.isName(names[position], name) { return position }
            // A canonically equivalent name (which the dictionary takes for the same) was found:
            // the names are compared one by one.
        }
        for position in names.indices where Schema.isName(names[position], name) { return position }
        return nil
    }

    private mutating func append(_ name: String, _ value: Value) {
        names.append(name)
        values.append(value)
        if positions != nil {
            positions?[name] = names.count - 1
        } else {
            positions = Self.positions(names)
        }
    }

    /// The names' positions by name when there are more than ``linearCount``, else `nil`.
    private static func positions(_ names: [String]) -> [String: Int]? {
        guard names.count > linearCount else { return nil }
        return Dictionary(names.indices.map { (names[$0], $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The value of the name that is `name` (``Schema/isName(_:_:)``: a canonically equivalent
    /// name of another length, which Swift's `==` takes for the same, is another); set to `nil`
    /// to remove it. Inlinable, so
    /// that a backend's lookup is specialized for its value type.
    @inlinable
    public subscript(name: String) -> Value? {
        get { position(of: name).map { values[$0] } }
        set { set(newValue, for: name) }
    }

    /// The value of `name`, or `defaultValue` to read and change when there is none.
    public subscript(name: String, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[name] ?? defaultValue() }
        set { set(newValue, for: name) }
    }

    @usableFromInline
    mutating func set(_ value: Value?, for name: String) {
        let found = position(of: name)
        switch (found, value) {
        case (let position?, let value?): values[position] = value
        case (nil, let value?): append(name, value)
        case (let position?, nil):
            names.remove(at: position)
            values.remove(at: position)
            positions = Self.positions(names)
        case (nil, nil): break
        }
    }

    /// Removes the value of `name`; returns it.
    @discardableResult
    public mutating func removeValue(forKey name: String) -> Value? {
        let value = self[name]
        set(nil, for: name)
        return value
    }

    public var isEmpty: Bool { names.isEmpty }
    public var count: Int { names.count }
}

extension NameIndex: Sequence {
    /// The names and values, in the order they were added.
    public func makeIterator() -> some IteratorProtocol<(name: String, value: Value)> {
        zip(names, values).lazy.map { (name: $0, value: $1) }.makeIterator()
    }
}

extension NameIndex: ExpressibleByDictionaryLiteral {
    /// (An empty literal, which a transaction's caches start from, makes nothing: it does not
    /// go through ``init(_:)``, generic over its sequence, whose metadata is looked up at run
    /// time.)
    @inlinable
    public init(dictionaryLiteral pairs: (String, Value)...) {
        self.init()
        for (name, value) in pairs where position(of: name) == nil { set(value, for: name) }
    }
}

extension NameIndex: Sendable where Value: Sendable {}

/// The attribute names of an entity in schema order, shared by every record a store returns
/// for that entity, so that such a record is an array of values rather than a dictionary.
@_spi(Backend) public final class RecordLayout: Sendable, Hashable {
    /// The attribute names, in schema order.
    public let names: [String]
    let slots: [String: Int]

    /// A layout of `names`, in order.
    public init(_ names: [String]) {
        self.names = names
        slots = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The position of an attribute, if the layout has it: a short layout compares names (by
    /// Swift's equality, as the dictionary does; cheaper than hashing the name), a longer one
    /// hashes.
    public func slot(of name: String) -> Int? {
        guard names.count <= 8 else { return slots[name] }
        return names.firstIndex(of: name)
    }

    public static func == (lhs: RecordLayout, rhs: RecordLayout) -> Bool {
        lhs === rhs || lhs.names == rhs.names
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(names)
    }
}

/// The values of one item, by attribute name.
///
/// Records returned by a store hold every attribute of the entity, with ``Value/null`` for
/// optional attributes that have no value. When writing, a missing optional attribute is null
/// and a missing attribute with a default takes the default.
public struct Record: Sendable, Hashable, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    public var values: [String: Value]

    public init(_ values: [String: Value] = [:]) {
        self.values = values
    }

    public init(dictionaryLiteral elements: (String, Value)...) {
        values = Dictionary(elements, uniquingKeysWith: { _, last in last })
    }

    /// The value of an attribute; ``Value/null`` when absent.
    public subscript(attribute: String) -> Value {
        get { values[attribute] ?? .null }
        set { values[attribute] = newValue }
    }

    public var description: String {
        "{" + values.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
    }
}



/// An attribute of an entity: a name, a type, whether it may be null, and an optional default.
public struct Attribute: Sendable, Hashable, Codable {
    /// The attribute's name (see ``Limits/maxNameLength``).
    public var name: String
    /// The type of its non-null values.
    public var type: ValueType
    /// Whether it may hold ``Value/null``.
    public var isOptional: Bool
    /// The value a write takes when the record does not name the attribute.
    public var defaultValue: Value?

    /// An attribute; `default` is the value a write takes when the record does not name it.
    public init(_ name: String, _ type: ValueType, optional: Bool = false, default defaultValue: Value? = nil) {
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
    }
}

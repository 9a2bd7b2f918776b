/// The type of an attribute.
public enum ValueType: String, Sendable, Hashable, Codable, CaseIterable {
    /// `Value.bool`.
    case bool
    /// `Value.int`; may be a primary key.
    case int
    /// `Value.double`.
    case double
    /// `Value.string`; may be a primary key (up to 255 UTF-8 bytes).
    case string
    /// `Value.bytes`.
    case bytes
    /// `Value.date`.
    case date
    /// `Value.uuid`; may be a primary key.
    case uuid

    /// Whether a primary key may have this type (`int`, `string` or `uuid`).
    public var canBePrimaryKey: Bool {
        self == .int || self == .string || self == .uuid
    }

    var rank: Int {
        switch self {
        case .bool: return 1
        case .int: return 2
        case .double: return 3
        case .string: return 4
        case .bytes: return 5
        case .date: return 6
        case .uuid: return 7
        }
    }
}

/// A whole number that is at least 1: a batch size, a page size, a pace.
///
/// Options that count things take this type, so that a batch of 0 items cannot be asked for:
/// a literal converts directly (`batchSize: 500`), and a number read at run time goes through
/// ``init(_:naming:)``, which throws a clear error rather than being clamped.
///
/// ```swift
/// let options = MigrationOptions(batchSize: try PositiveInt(size, naming: "batch size"))
/// ```
public struct PositiveInt: Sendable, Hashable, Comparable, Codable, ExpressibleByIntegerLiteral,
    CustomStringConvertible
{
    /// The number, at least 1.
    public let value: Int

    /// The number `value`.
    /// - Throws: `invalidArgument` naming `name` when `value` is less than 1.
    public init(_ value: Int, naming name: String = "the number") throws(StoreError) {
        guard value >= 1 else {
            throw StoreError(.invalidArgument, "\(name) must be at least 1 (it is \(value))")
        }
        self.value = value
    }

    /// A literal: a literal less than 1 is a programming error and stops the program.
    public init(integerLiteral value: Int) {
        precondition(value >= 1, "a PositiveInt literal must be at least 1 (it is \(value))")
        self.value = value
    }

    public init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer().decode(Int.self)
        try self.init(value)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }

    public static func < (lhs: PositiveInt, rhs: PositiveInt) -> Bool { lhs.value < rhs.value }

    public var description: String { String(value) }
}

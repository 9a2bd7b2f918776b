@_spi(Backend) import DataStoreAPI
import Foundation

/// Decodes the lines ``JSONLineCodec/encode(_:of:)`` writes, which are nearly all the lines an
/// import reads, straight from their bytes into each attribute's type, in schema order: no JSON
/// tree, no string made for a name. A line in any other shape (whitespace, fields in another
/// order, escapes in a string, a value of the wrong type, damage) returns `nil`, and the general
/// parser decodes it, or names what is wrong with it; so both give the same items and the same
/// errors.
struct CanonicalLineDecoder {
    private struct Pattern {
        let entity: EntitySchema
        let name: [UInt8]
        /// `"name":` for each attribute, the first one preceded by nothing, the others by `,`.
        let keys: [[UInt8]]
    }

    private let patterns: [Pattern]
    private static let head = Array(#"{"entity":""#.utf8)
    private static let item = Array(#"","item":{"#.utf8)
    private static let end = Array("}}".utf8)
    private static let null = Array("null".utf8)
    private static let `true` = Array("true".utf8)
    private static let `false` = Array("false".utf8)
    private static let infinity = Array(#""Infinity""#.utf8)
    private static let minusInfinity = Array(#""-Infinity""#.utf8)

    init(schema: Schema) {
        patterns = schema.entities.map { entity in
            Pattern(entity: entity, name: Array(entity.name.utf8),
                    keys: entity.attributes.enumerated().map { i, attribute in
                        (i == 0 ? [] : [UInt8(ascii: ",")]) + Array("\"\(attribute.name)\":".utf8)
                    })
        }
    }

    func decode(_ line: [UInt8]) -> (entity: EntitySchema, record: Record)? {
        line.withUnsafeBufferPointer { bytes in
            var cursor = Cursor(bytes: bytes)
            guard cursor.skip(Self.head), let pattern = entityPattern(&cursor), cursor.skip(Self.item) else { return nil }
            let attributes = pattern.entity.attributes
            var values: [Value] = []
            values.reserveCapacity(attributes.count)
            for (attribute, key) in zip(attributes, pattern.keys) {
                guard cursor.skip(key), let value = cursor.value(attribute.type) else { return nil }
                values.append(value)
            }
            guard cursor.skip(Self.end), cursor.atEnd else { return nil }
            return (pattern.entity, Record(layout: pattern.entity.layout, values: values))
        }
    }

    /// The entity whose name comes next, up to its closing quote (left for `item` to skip).
    private func entityPattern(_ cursor: inout Cursor) -> Pattern? {
        for pattern in patterns where cursor.startsWith(pattern.name) {
            let after = cursor.position + pattern.name.count
            if after < cursor.bytes.count, cursor.bytes[after] == UInt8(ascii: "\"") {
                cursor.position = after
                return pattern
            }
        }
        return nil
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        var atEnd: Bool { position == bytes.count }

        func startsWith(_ literal: [UInt8]) -> Bool {
            guard bytes.count - position >= literal.count else { return false }
            for (i, byte) in literal.enumerated() where bytes[position + i] != byte { return false }
            return true
        }

        mutating func skip(_ literal: [UInt8]) -> Bool {
            guard startsWith(literal) else { return false }
            position += literal.count
            return true
        }

        /// The value of an attribute of `type`, as the general path converts the same JSON.
        mutating func value(_ type: ValueType) -> Value? {
            guard position < bytes.count else { return nil }
            if bytes[position] == UInt8(ascii: "n") { return skip(CanonicalLineDecoder.null) ? .null : nil }
            switch type {
            case .int:
                return integer().map(Value.int)
            case .double:
                if bytes[position] == UInt8(ascii: "\"") {
                    if skip(CanonicalLineDecoder.infinity) { return .double(.infinity) }
                    return skip(CanonicalLineDecoder.minusInfinity) ? .double(-.infinity) : nil
                }
                guard let text = number(), let d = Double(text), d.isFinite else { return nil }
                return .double(d)
            case .bool:
                if skip(CanonicalLineDecoder.true) { return .bool(true) }
                return skip(CanonicalLineDecoder.false) ? .bool(false) : nil
            case .string:
                return string().map(Value.string)
            case .bytes:
                // Base64 is ASCII: decoded from the bytes, with the options the general path uses.
                guard let text = stringBytes(), text.ascii,
                    let data = Data(base64Encoded: Data(UnsafeRawBufferPointer(text.bytes)))
                else { return nil }
                return .bytes(Array(data))
            case .date:
                if bytes[position] == UInt8(ascii: "\"") {
                    return string().flatMap(ValueConversion.parseISO8601Text).map(Value.date)
                }
                return integer().map { .date(Timestamp(microsecondsSinceEpoch: $0)) }
            case .uuid:
                return string().flatMap { UUID(uuidString: $0) }.map(Value.uuid)
            }
        }

        /// A JSON integer (`-?(0|[1-9][0-9]*)`) that fits an Int64 and is not the start of a
        /// fraction or exponent.
        private mutating func integer() -> Int64? {
            var i = position
            let negative = i < bytes.count && bytes[i] == UInt8(ascii: "-")
            if negative { i += 1 }
            let first = i
            var n: Int64 = 0
            while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") {
                let digit = Int64(bytes[i] - UInt8(ascii: "0"))
                let (times, o1) = n.multipliedReportingOverflow(by: 10)
                // Accumulated negatively, so that Int64.min fits.
                let (next, o2) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
                guard !o1, !o2 else { return nil }
                n = next
                i += 1
            }
            guard i > first, !(bytes[first] == UInt8(ascii: "0") && i - first > 1) else { return nil }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") || bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                return nil
            }
            position = i
            return n
        }

        /// The text of a JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
        private mutating func number() -> String? {
            var i = position
            func digits() -> Int {
                let start = i
                while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i += 1 }
                return i - start
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
            let integral = i
            let count = digits()
            guard count > 0, !(bytes[integral] == UInt8(ascii: "0") && count > 1) else { return nil }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                i += 1
                guard digits() > 0 else { return nil }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                i += 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
                guard digits() > 0 else { return nil }
            }
            defer { position = i }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[position..<i]), as: UTF8.self)
        }

        /// A string without escapes or control characters, of valid UTF-8.
        private mutating func string() -> String? {
            guard let text = stringBytes() else { return nil }
            // ASCII is valid UTF-8 as it is; anything else is checked.
            return text.ascii ? String(decoding: text.bytes, as: UTF8.self) : String(validating: text.bytes, as: UTF8.self)
        }

        /// The bytes between the quotes of a string without escapes or control characters, and
        /// whether they are all ASCII.
        private mutating func stringBytes() -> (bytes: UnsafeBufferPointer<UInt8>, ascii: Bool)? {
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { return nil }
            var i = position + 1
            var high: UInt8 = 0
            while i < bytes.count, bytes[i] != UInt8(ascii: "\"") {
                guard bytes[i] != UInt8(ascii: "\\"), bytes[i] >= 0x20 else { return nil }
                high |= bytes[i]
                i += 1
            }
            guard i < bytes.count else { return nil }
            defer { position = i + 1 }
            return (UnsafeBufferPointer(rebasing: bytes[position + 1..<i]), high < 0x80)
        }
    }
}

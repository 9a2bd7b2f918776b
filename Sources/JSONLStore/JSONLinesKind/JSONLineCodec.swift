@_spi(Backend) import DataStoreAPI
import Foundation

/// The lossless JSON form of items, one per line: `{"entity":"E","item":{"a":1,...}}`, with the
/// attributes in schema order, so the same item always gives the same bytes.
///
/// Values are typed by the schema, so each has one JSON form: ints as JSON integers (all of
/// Int64), doubles as the shortest decimal that reads back to the same bits (`-0.0`, subnormals,
/// the largest finite values) and infinities as the strings `"Infinity"` / `"-Infinity"`,
/// strings as JSON strings that keep every scalar (NUL included) unnormalized, bytes as base64,
/// dates as ISO 8601 with microseconds (years 1 to 9999; other dates as integer microseconds
/// since 1970), uuids as lowercase text, and null as `null` (never confused with `""`).
public enum JSONLineCodec {
    /// One item's line, without the newline.
    public static func encode(_ record: Record, of entity: EntitySchema) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + entity.attributes.count * 16)
        out += Array(#"{"entity":"#.utf8)
        appendString(entity.name, to: &out)
        out += Array(#","item":"#.utf8)
        appendItem(record, of: entity, to: &out)
        out.append(0x7D)
        return out
    }

    /// The item's object: every attribute in schema order.
    static func appendItem(_ record: Record, of entity: EntitySchema, to out: inout [UInt8]) {
        out.append(0x7B)
        // A compact record's fields are written as they are kept: no value built.
        let attributes = entity.attributes
        let written = record.forEachStoredField(of: entity.layout) { slot, field in
            if slot > 0 { out.append(0x2C) }
            appendString(attributes[slot].name, to: &out)
            out.append(0x3A)
            appendField(field, to: &out)
        }
        if written {
            out.append(0x7D)
            return
        }
        for (i, attribute) in entity.attributes.enumerated() {
            if i > 0 { out.append(0x2C) }
            appendString(attribute.name, to: &out)
            out.append(0x3A)
            appendValue(record[attribute.name], to: &out)
        }
        out.append(0x7D)
    }

    /// Parses one line's JSON document.
    static func parse(_ line: some Collection<UInt8>, _ fail: (String) -> StoreError) throws -> JSON {
        var parser = JSONParser(Array(line))
        do {
            return try parser.parseDocument()
        } catch let error as JSONParser.Failure {
            throw fail("not valid JSON: \(error.message) at byte \(error.offset + 1)")
        }
    }

    /// The item an object of every attribute's value describes.
    static func item(_ values: [(key: String, value: JSON)], of entity: EntitySchema,
                     _ fail: (String) -> StoreError) throws -> Record {
        var record = Record()
        var seen = Set<String>()
        for (name, json) in values {
            guard let attribute = entity.attributes.first(where: { $0.name == name }) else {
                throw fail("'\(entity.name)' has no attribute '\(name)'")
            }
            guard seen.insert(name).inserted else { throw fail("attribute '\(name)' appears twice") }
            guard let value = value(json, as: attribute.type) else {
                throw fail("'\(entity.name).\(name)' holds \(json.summary), not a \(attribute.type)")
            }
            record[name] = value
        }
        for attribute in entity.attributes where !seen.contains(attribute.name) {
            throw fail("'\(entity.name)' item lacks attribute '\(attribute.name)'")
        }
        return record
    }

    /// Decodes a line written by ``encode(_:of:)``.
    /// - Throws: `corrupt` naming the line and what is wrong with it: bad JSON, an unknown entity
    ///   or attribute, a value of the wrong type, a missing attribute.
    public static func decode(_ line: some Collection<UInt8>, schema: Schema, lineNumber: Int) throws
        -> (entity: EntitySchema, record: Record)
    {
        func fail(_ what: String) -> StoreError { StoreError(.corrupt, "line \(lineNumber): \(what)") }
        let top = try parse(line, fail)
        guard case .object(let fields) = top, fields.count == 2,
            case .string(let entityName)? = fields.first(where: { $0.key == "entity" })?.value,
            case .object(let values)? = fields.first(where: { $0.key == "item" })?.value
        else { throw fail(#"expected {"entity":"NAME","item":{...}}"#) }
        guard let entity = schema.entity(named: entityName) else {
            throw fail("unknown entity '\(entityName)'")
        }
        let record = try item(values, of: entity, fail)
        return (entity, record)
    }

    // MARK: Values

    static func appendValue(_ value: Value, to out: inout [UInt8]) {
        switch value {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .int(let i): out += Array(String(i).utf8)
        case .double(let d):
            if d.isInfinite {
                appendString(d < 0 ? "-Infinity" : "Infinity", to: &out)
            } else {
                out += Array("\(d)".utf8)
            }
        case .string(let s): appendString(s, to: &out)
        case .bytes(let b): appendString(Data(b).base64EncodedString(), to: &out)
        case .date(let t): appendDate(t, to: &out)
        case .uuid(let u): appendString(u.uuidString.lowercased(), to: &out)
        }
    }

    /// ``appendValue(_:to:)`` of a field read in place: the same text, strings' and bytes'
    /// bytes read where they lie.
    static func appendField(_ field: RowField, to out: inout [UInt8]) {
        switch field.type {
        case .string: appendUTF8(field.bytes, to: &out)
        case .bytes: appendString(Data(field.bytes).base64EncodedString(), to: &out)
        case .int, .double, .date, .bool, .uuid, nil: appendValue(field.value, to: &out)
        }
    }

    /// A date in years 1 to 9999 as its ISO 8601 text (which reads back exactly), any other as
    /// integer microseconds since 1970.
    static func appendDate(_ t: Timestamp, to out: inout [UInt8]) {
        let start = out.count
        out.append(0x22)
        ValueConversion.appendISO8601(t, to: &out)
        // By index: a slice of `out` kept across the append below would copy the whole buffer.
        let year = start + 1
        let fourDigitYear = out.count >= year + 5 && out[year + 4] == UInt8(ascii: "-")
            && (year..<year + 4).allSatisfy { out[$0] >= 0x30 && out[$0] <= 0x39 }
            && !(year..<year + 4).allSatisfy { out[$0] == 0x30 }
        if fourDigitYear {
            out.append(0x22)
        } else {
            out.removeSubrange(start...)
            out += Array(String(t.microsecondsSinceEpoch).utf8)
        }
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\u00XX`, everything else as
    /// its UTF-8 bytes.
    static func appendString(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { appendUTF8(UnsafeRawBufferPointer($0), to: &out) }
    }

    /// ``appendString(_:to:)`` of a string's UTF-8 bytes.
    static func appendUTF8(_ utf8: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(0x22)
        for byte in utf8 {
            switch byte {
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0x0A: out += [0x5C, 0x6E]
            case 0x0D: out += [0x5C, 0x72]
            case 0x09: out += [0x5C, 0x74]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += [0x5C, 0x75, 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }

    static func value(_ json: JSON, as type: ValueType) -> Value? {
        switch (json, type) {
        case (.null, _): return .null
        case (.bool(let b), .bool): return .bool(b)
        case (.number(let text), .int): return Int64(text).map(Value.int)
        case (.number(let text), .double):
            guard let d = Double(text), d.isFinite else { return nil }
            return .double(d)
        case (.string("Infinity"), .double): return .double(.infinity)
        case (.string("-Infinity"), .double): return .double(-.infinity)
        case (.string(let s), .string): return .string(s)
        case (.string(let s), .bytes):
            return Data(base64Encoded: s).map { .bytes(Array($0)) }
        case (.string(let s), .date): return ValueConversion.parseISO8601Text(s).map(Value.date)
        case (.number(let text), .date): return Int64(text).map { .date(Timestamp(microsecondsSinceEpoch: $0)) }
        case (.string(let s), .uuid): return UUID(uuidString: s).map(Value.uuid)
        default: return nil
        }
    }
}

/// A parsed JSON value; numbers keep their text, so that Int64 and doubles convert exactly.
indirect enum JSON: Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSON])
    case object([(key: String, value: JSON)])

    static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)), let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// A short description for error messages.
    var summary: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return "\(b)"
        case .number(let n): return "the number \(n.prefix(40))"
        case .string(let s): return "the string \"\(s.prefix(40))\""
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// A strict RFC 8259 parser for one document: no trailing commas, no comments, strings of valid
/// UTF-8, nesting at most 64 deep.
struct JSONParser {
    struct Failure: Error {
        var message: String
        var offset: Int
    }

    let bytes: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws -> JSON {
        let value = try parseValue(depth: 0)
        skipSpace()
        guard i == bytes.count else { throw Failure(message: "unexpected text after the value", offset: i) }
        return value
    }

    private mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
    }

    private mutating func expect(_ literal: String, _ value: JSON) throws -> JSON {
        let utf8 = Array(literal.utf8)
        guard bytes.count - i >= utf8.count, Array(bytes[i..<i + utf8.count]) == utf8 else {
            throw Failure(message: "unexpected character", offset: i)
        }
        i += utf8.count
        return value
    }

    private mutating func parseValue(depth: Int) throws -> JSON {
        guard depth < 64 else { throw Failure(message: "nested more than 64 deep", offset: i) }
        skipSpace()
        guard i < bytes.count else { throw Failure(message: "unexpected end", offset: i) }
        switch bytes[i] {
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "["):
            i += 1
            var items: [JSON] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                items.append(try parseValue(depth: depth + 1))
                skipSpace()
                guard i < bytes.count else { throw Failure(message: "unterminated array", offset: i) }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                throw Failure(message: "expected , or ]", offset: i)
            }
        case UInt8(ascii: "{"):
            i += 1
            var fields: [(key: String, value: JSON)] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(fields) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
                    throw Failure(message: "expected a field name", offset: i)
                }
                let key = try parseString()
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw Failure(message: "expected :", offset: i) }
                i += 1
                fields.append((key, try parseValue(depth: depth + 1)))
                skipSpace()
                guard i < bytes.count else { throw Failure(message: "unterminated object", offset: i) }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(fields) }
                throw Failure(message: "expected , or }", offset: i)
            }
        default:
            return .number(try parseNumber())
        }
    }

    /// Checks one document as ``parseDocument()`` does, with the same errors, without building
    /// its values: an import's first pass over its input.
    mutating func validateDocument() throws {
        try skipValue(depth: 0)
        skipSpace()
        guard i == bytes.count else { throw Failure(message: "unexpected text after the value", offset: i) }
    }

    private mutating func skipValue(depth: Int) throws {
        guard depth < 64 else { throw Failure(message: "nested more than 64 deep", offset: i) }
        skipSpace()
        guard i < bytes.count else { throw Failure(message: "unexpected end", offset: i) }
        switch bytes[i] {
        case UInt8(ascii: "n"): _ = try expect("null", .null)
        case UInt8(ascii: "t"): _ = try expect("true", .bool(true))
        case UInt8(ascii: "f"): _ = try expect("false", .bool(false))
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "["):
            i += 1
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return }
            while true {
                try skipValue(depth: depth + 1)
                skipSpace()
                guard i < bytes.count else { throw Failure(message: "unterminated array", offset: i) }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return }
                throw Failure(message: "expected , or ]", offset: i)
            }
        case UInt8(ascii: "{"):
            i += 1
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
                    throw Failure(message: "expected a field name", offset: i)
                }
                try skipString()
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw Failure(message: "expected :", offset: i) }
                i += 1
                try skipValue(depth: depth + 1)
                skipSpace()
                guard i < bytes.count else { throw Failure(message: "unterminated object", offset: i) }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return }
                throw Failure(message: "expected , or }", offset: i)
            }
        default:
            _ = try scanNumber()
        }
    }

    /// Skips a string of ASCII without escapes; any other string goes through ``parseString()``,
    /// which checks its escapes and its UTF-8.
    private mutating func skipString() throws {
        let start = i
        var j = i + 1
        while j < bytes.count {
            let byte = bytes[j]
            if byte == 0x22 {
                i = j + 1
                return
            }
            if byte == 0x5C || byte >= 0x80 || byte < 0x20 { break }
            j += 1
        }
        i = start
        _ = try parseString()
    }

    private mutating func parseNumber() throws -> String {
        String(decoding: bytes[try scanNumber()], as: UTF8.self)
    }

    /// The bytes of the number at the current position.
    private mutating func scanNumber() throws -> Range<Int> {
        let start = i
        func digits() -> Int {
            let from = i
            while i < bytes.count, bytes[i] >= 0x30 && bytes[i] <= 0x39 { i += 1 }
            return i - from
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        let intStart = i
        guard digits() > 0 else { throw Failure(message: "unexpected character", offset: start) }
        if bytes[intStart] == 0x30 && i - intStart > 1 { throw Failure(message: "leading zero", offset: start) }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { throw Failure(message: "digits expected after .", offset: i) }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw Failure(message: "digits expected in the exponent", offset: i) }
        }
        return start..<i
    }

    private mutating func parseString() throws -> String {
        let start = i
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw Failure(message: "unterminated string", offset: start) }
            let byte = bytes[i]
            switch byte {
            case 0x22:
                i += 1
                guard let text = String(validating: out, as: UTF8.self) else {
                    throw Failure(message: "string is not valid UTF-8", offset: start)
                }
                return text
            case 0x5C:
                guard i + 1 < bytes.count else { throw Failure(message: "unterminated escape", offset: i) }
                let escaped = bytes[i + 1]
                i += 2
                switch escaped {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard i + 1 < bytes.count, bytes[i] == 0x5C, bytes[i + 1] == UInt8(ascii: "u") else {
                            throw Failure(message: "lone surrogate", offset: i)
                        }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw Failure(message: "lone surrogate", offset: i) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw Failure(message: "lone surrogate", offset: i)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw Failure(message: "bad \\u escape", offset: i) }
                    out += Array(String(Character(unicode)).utf8)
                default: throw Failure(message: "bad escape", offset: i - 1)
                }
            case 0..<0x20: throw Failure(message: "control character in a string", offset: i)
            default:
                out.append(byte)
                i += 1
            }
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard bytes.count - i >= 4 else { throw Failure(message: "bad \\u escape", offset: i) }
        var value: UInt32 = 0
        for byte in bytes[i..<i + 4] {
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: throw Failure(message: "bad \\u escape", offset: i)
            }
            value = value << 4 | UInt32(digit)
        }
        i += 4
        return value
    }
}

/// The elements of a JSON array of scalars, read from its UTF-8 text: what
/// ``Filter/hasElement(_:_:)`` compares, the same on every backend (SQLite calls it through a
/// function of its connections; PostgreSQL evaluates that filter with it after its scan).
///
/// Strings are decoded (escapes, surrogate pairs), numbers read as `Int64` when they are an
/// integer literal that fits and as `Double` otherwise, `true`/`false` as bools, `null` as null.
/// Text that is not such an array (not JSON, an object, an element that is an array or object,
/// text after the array) has no elements. An element holding U+0000 (written `\u0000`) is an
/// element like any other: what is decided is decided on the decoded elements, never on the text
/// (`"\\u0000"` is the six characters backslash, u, 0, 0, 0, 0).
@_spi(Backend) public enum JSONScalarArray {
    /// The elements, or nil when `bytes` is not the text of an array of scalars.
    public static func elements(_ bytes: UnsafeBufferPointer<UInt8>) -> [Value]? {
        var reader = Reader(bytes: bytes)
        return reader.array()
    }

    /// The elements of `bytes` (an array's copy).
    static func elements(_ bytes: [UInt8]) -> [Value]? {
        bytes.withUnsafeBufferPointer { elements($0) }
    }

    /// Whether the array text `bytes` holds an element equal to `element`.
    public static func holds(_ bytes: UnsafeBufferPointer<UInt8>, _ element: Value) -> Bool {
        guard let elements = elements(bytes) else { return false }
        return elements.contains { equal($0, element) }
    }

    /// Whether two scalars are equal as `Array.contains` compares decoded elements: numbers by
    /// value (an integer and a double too; `-0.0` equals `0.0`), strings byte for byte.
    public static func equal(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.int(x), .int(y)): return x == y
        case let (.int(x), .double(y)), let (.double(y), .int(x)): return Double(x) == y
        case let (.double(x), .double(y)): return x == y
        case let (.string(x), .string(y)): return x.utf8.elementsEqual(y.utf8)
        default: return false
        }
    }

    /// The JSON text of a scalar (null, bool, int, finite double or string), as
    /// ``elements(_:)-(UnsafeBufferPointer<UInt8>)`` reads it back.
    public static func text(of scalar: Value) -> String {
        switch scalar {
        case .bool(let value): return value ? "true" : "false"
        case .int(let value): return String(value)
        case .double(let value) where value.isFinite: return "\(value)"
        case .string(let value):
            var text = "\""
            for scalar in value.unicodeScalars {
                switch scalar {
                case "\"": text += "\\\""
                case "\\": text += "\\\\"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: text.unicodeScalars.append(scalar)
                }
            }
            return text + "\""
        default: return "null"
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        mutating func array() -> [Value]? {
            skipSpace()
            guard take(0x5B) else { return nil }
            var elements: [Value] = []
            skipSpace()
            if take(0x5D) { return end() ? elements : nil }
            while true {
                skipSpace()
                guard let element = scalar() else { return nil }
                elements.append(element)
                skipSpace()
                if take(0x2C) { continue }
                guard take(0x5D) else { return nil }
                return end() ? elements : nil
            }
        }

        mutating func end() -> Bool {
            skipSpace()
            return position == bytes.count
        }

        mutating func skipSpace() {
            while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard position + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[position + offset] != word.utf8Start[offset] { return false }
            position += count
            return true
        }

        mutating func scalar() -> Value? {
            guard position < bytes.count else { return nil }
            switch bytes[position] {
            case 0x22: return string()
            case 0x74: return literal("true") ? .bool(true) : nil
            case 0x66: return literal("false") ? .bool(false) : nil
            case 0x6E: return literal("null") ? .null : nil
            case 0x2D, 0x30...0x39: return number()
            default: return nil
            }
        }

        mutating func digits() -> Int {
            let start = position
            while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 { position += 1 }
            return position - start
        }

        mutating func number() -> Value? {
            let start = position
            _ = take(0x2D)
            let whole = position
            let count = digits()
            guard count > 0, count == 1 || bytes[whole] != 0x30 else { return nil }
            var integral = true
            if take(0x2E) {
                integral = false
                guard digits() > 0 else { return nil }
            }
            if position < bytes.count, bytes[position] == 0x65 || bytes[position] == 0x45 {
                position += 1
                integral = false
                if position < bytes.count, bytes[position] == 0x2B || bytes[position] == 0x2D { position += 1 }
                guard digits() > 0 else { return nil }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
            if integral, let value = Int64(text) { return .int(value) }
            return Double(text).map { .double($0) }
        }

        mutating func hex4() -> UInt32? {
            guard position + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[position]
                let digit: UInt32
                switch byte {
                case 0x30...0x39: digit = UInt32(byte - 0x30)
                case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
                default: return nil
                }
                value = value << 4 | digit
                position += 1
            }
            return value
        }

        mutating func string() -> Value? {
            position += 1
            var decoded: [UInt8] = []
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                switch byte {
                case 0x22:
                    // The text came from a String (valid UTF-8), escapes make valid scalars.
                    return .string(String(decoding: decoded, as: UTF8.self))
                case 0x5C:
                    guard position < bytes.count else { return nil }
                    let escape = bytes[position]
                    position += 1
                    switch escape {
                    case 0x22, 0x5C, 0x2F: decoded.append(escape)
                    case 0x62: decoded.append(0x08)
                    case 0x66: decoded.append(0x0C)
                    case 0x6E: decoded.append(0x0A)
                    case 0x72: decoded.append(0x0D)
                    case 0x74: decoded.append(0x09)
                    case 0x75:
                        guard var code = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(code) {
                            guard take(0x5C), take(0x75), let low = hex4(), (0xDC00..<0xE000).contains(low) else {
                                return nil
                            }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(code) {
                            return nil
                        }
                        guard let scalar = Unicode.Scalar(code) else { return nil }
                        decoded.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default: return nil
                    }
                case 0x00..<0x20:
                    return nil
                default:
                    decoded.append(byte)
                }
            }
            return nil
        }
    }
}

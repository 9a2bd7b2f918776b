@_spi(Backend) import DataStoreAPI
import Foundation

/// The values of a Realm file's leaves: one leaf of a column (or of a collection's B+tree) read
/// as this toolkit's values, collections and `Mixed` as JSON text.
///
/// - A list or set of values is a JSON array in its stored order (Realm keeps a set sorted), a
///   dictionary a JSON object with its keys sorted by their bytes; their elements as typed
///   models hold arrays: numbers, strings, booleans, null, dates in ISO 8601 with microseconds,
///   data in base64, UUIDs and ObjectIds as text, Decimal128 as decimal text.
/// - A `Mixed` (`AnyRealmValue`) is its JSON value, in Extended JSON where JSON has no type of
///   its own: `{"$date": "…"}`, `{"$binary": "…"}`, `{"$uuid": "…"}`, `{"$oid": "…"}`,
///   `{"$numberDecimal": "…"}`, so that a string is never read back as a date; a list or
///   dictionary in a `Mixed` (format 24) is a JSON array or object; a link
///   `{"$link": {"class": "Dog", "key": 7}}`. A dictionary of links holds its targets' keys.
enum RealmValues {
    /// Resolves a link (the target's table key and object key) to the target's class and key.
    typealias Links = (Int64, Int64) throws -> Item

    /// A value of a leaf, before it is stored: a scalar, or the parts of a JSON value.
    indirect enum Item: Equatable {
        case value(Value)
        case decimal(String)
        case objectId(String)
        case array([Item])
        case object([(String, Item)])
        case typed(String, String)
        /// A link in a `Mixed` or a dictionary: the target's class and key.
        case link(String, Value)

        static func == (a: Item, b: Item) -> Bool { a.json(tagged: true) == b.json(tagged: true) }

        /// JSON text; `tagged` writes the types JSON lacks in Extended JSON (for `Mixed`).
        func json(tagged: Bool) -> String {
            func tag(_ name: String, _ text: String) -> String {
                tagged ? "{\(RealmValues.quoted("$" + name)):\(RealmValues.quoted(text))}" : RealmValues.quoted(text)
            }
            switch self {
            case .value(let value):
                switch value {
                case .null: return "null"
                case .bool(let b): return b ? "true" : "false"
                case .int(let i): return String(i)
                case .double(let d):
                    if d.isNaN { return tag("numberDouble", "NaN") }
                    if d.isInfinite { return tag("numberDouble", d < 0 ? "-Infinity" : "Infinity") }
                    return "\(d)"
                case .string(let s): return RealmValues.quoted(s)
                case .bytes(let b): return tag("binary", Data(b).base64EncodedString())
                case .date(let t): return tag("date", ValueConversion.iso8601Text(t))
                case .uuid(let u): return tag("uuid", tagged ? u.uuidString.lowercased() : u.uuidString)
                }
            case .decimal(let text): return tag("numberDecimal", text)
            case .objectId(let hex): return tag("oid", hex)
            case .typed(let name, let text): return tag(name, text)
            case .link(let target, let key):
                let keyJSON = Item.value(key).json(tagged: tagged)
                return tagged ? "{\"$link\":{\"class\":\(RealmValues.quoted(target)),\"key\":\(keyJSON)}}" : keyJSON
            case .array(let items): return "[" + items.map { $0.json(tagged: tagged) }.joined(separator: ",") + "]"
            case .object(let pairs):
                return "{" + pairs.map { RealmValues.quoted($0.0) + ":" + $0.1.json(tagged: tagged) }
                    .joined(separator: ",") + "}"
            }
        }
    }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20: out += String(format: "\\u%04x", c.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// The values of one leaf of scalars of `type` (a column's, or a collection's).
    static func leaf(_ type: RealmModel.ColumnType, nullable: Bool, ref: Int, file: RealmFile,
                     format: Int, label: String, links: Links? = nil) throws -> [Item] {
        switch type {
        case .int:
            let ints = try file.ints(ref, label)
            guard nullable else { return ints.map { .value(.int($0)) } }
            guard let null = ints.first else { throw file.damaged("\(label) are missing their null marker") }
            return ints.dropFirst().map { $0 == null ? .value(.null) : .value(.int($0)) }
        case .bool:
            return try file.ints(ref, label).map { $0 == 3 ? .value(.null) : .value(.bool($0 != 0)) }
        case .float, .double:
            let node = try file.node(ref, label)
            let size = type == .float ? 4 : 8
            guard node.widthType == 1, node.width == size || node.count == 0 else {
                throw file.damaged("\(label) at offset \(ref) are not \(size)-byte numbers")
            }
            return (0..<node.count).map { i -> Item in
                var bits: UInt64 = 0
                for k in (0..<size).reversed() { bits = bits << 8 | UInt64(file.bytes[node.payload + i * size + k]) }
                if size == 4 {
                    return bits == 0x7FC0_00AA ? .value(.null) : .value(.double(Double(Float(bitPattern: UInt32(bits)))))
                }
                return bits == 0x7FF8_0000_0000_00AA ? .value(.null) : .value(.double(Double(bitPattern: bits)))
            }
        case .string:
            return try file.byteStrings(ref, isString: true, label).map { bytes -> Item in
                guard let bytes else { return .value(.null) }
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    throw file.damaged("\(label) hold text that is not UTF-8")
                }
                return .value(.string(text))
            }
        case .binary:
            return try file.byteStrings(ref, isString: false, label).map { $0.map { .value(.bytes($0)) } ?? .value(.null) }
        case .timestamp:
            let pair = try file.node(ref, label)
            let seconds = try file.ints(try file.ref(pair, 0, label), label)
            let nanoseconds = try file.ints(try file.ref(pair, 1, label), label)
            guard let null = seconds.first, nanoseconds.count == seconds.count - 1 else {
                throw file.damaged("\(label) hold \(max(0, seconds.count - 1)) seconds and \(nanoseconds.count) "
                    + "nanoseconds")
            }
            return try zip(seconds.dropFirst(), nanoseconds).map { second, nano -> Item in
                if second == null { return .value(.null) }
                return .value(.date(try timestamp(second, nano, file: file, label: label)))
            }
        case .objectId:
            return try file.fixedBytes(ref, size: 12, label).map { bytes -> Item in
                bytes.map { .objectId(hex($0)) } ?? .value(.null)
            }
        case .uuid:
            return try file.fixedBytes(ref, size: 16, label).map { bytes -> Item in
                bytes.map { .value(.uuid(uuid($0))) } ?? .value(.null)
            }
        case .decimal:
            return try decimals(ref, file: file, format: format, label: label)
        case .mixed:
            return try mixed(ref, file: file, format: format, label: label, depth: 0, links: links)
        case .link, .linkList, .backlink, .typedLink:
            throw file.damaged("\(label) are links where values belong")
        }
    }

    static func timestamp(_ seconds: Int64, _ nanoseconds: Int64, file: RealmFile, label: String) throws -> Timestamp {
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
        let (micros, past) = scaled.addingReportingOverflow(nanoseconds / 1_000)
        guard !overflow, !past, nanoseconds > -1_000_000_000, nanoseconds < 1_000_000_000 else {
            throw file.damaged("\(label) hold the date \(seconds) s \(nanoseconds) ns, out of range")
        }
        return Timestamp(microsecondsSinceEpoch: micros)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes { out += [digits[Int(byte >> 4)], digits[Int(byte & 15)]] }
        return String(decoding: out, as: UTF8.self)
    }

    static func uuid(_ b: [UInt8]) -> UUID {
        UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    // MARK: Decimal128

    /// The values of a Decimal128 leaf: 16 bytes each (BID128), or, from format 24, 4, 8 or 16
    /// bytes as the leaf's width says (BID32, BID64, BID128), width 0 all null (or all 0 with
    /// the context flag).
    static func decimals(_ ref: Int, file: RealmFile, format: Int, label: String) throws -> [Item] {
        let node = try file.node(ref, label)
        guard node.widthType == 1 else { throw file.damaged("\(label) at offset \(ref) are not decimals") }
        if node.width == 0 { return Array(repeating: node.context ? .decimal("0") : .value(.null), count: node.count) }
        guard [4, 8, 16].contains(node.width) else {
            throw file.damaged("\(label) at offset \(ref) are decimals of \(node.width) bytes")
        }
        return (0..<node.count).map { i -> Item in
            let start = node.payload + i * node.width
            func word(_ offset: Int, _ size: Int) -> UInt64 {
                var value: UInt64 = 0
                for k in (0..<size).reversed() { value = value << 8 | UInt64(file.bytes[start + offset + k]) }
                return value
            }
            switch node.width {
            case 16: return decimal128(low: word(0, 8), high: word(8, 8))
            case 8: return decimalSmall(word(0, 8), bits: 64)
            default: return decimalSmall(word(0, 4), bits: 32)
            }
        }
    }

    /// A BID128 value as decimal text (`-1.25`, `3E+40`), or null, NaN, ±Infinity.
    static func decimal128(low: UInt64, high: UInt64) -> Item {
        if low == 0xAA, high == 0x7C00_0000_0000_0000 { return .value(.null) }
        let negative = high >> 63 == 1
        if high & 0x7C00_0000_0000_0000 == 0x7C00_0000_0000_0000 { return .decimal("NaN") }
        if high & 0x7800_0000_0000_0000 == 0x7800_0000_0000_0000 { return .decimal(negative ? "-Infinity" : "Infinity") }
        // The form whose coefficient would not fit (its top bits 11) is not canonical: zero.
        guard (high >> 61) & 3 != 3 else { return .decimal(negative ? "-0" : "0") }
        let exponent = Int((high >> 49) & 0x3FFF) - 6176
        let coefficient = (high & ((1 << 49) - 1), low)
        return .decimal(decimalText(negative: negative, digits: decimalDigits(coefficient), exponent: exponent))
    }

    static func decimalSmall(_ value: UInt64, bits: Int) -> Item {
        if bits == 32 ? value == 0x7C00_00AA : value == 0x7C00_0000_0000_00AA { return .value(.null) }
        let negative = value >> UInt64(bits - 1) & 1 == 1
        if (value >> UInt64(bits - 6)) & 0x1F == 0x1F { return .decimal("NaN") }
        if (value >> UInt64(bits - 5)) & 0xF == 0xF { return .decimal(negative ? "-Infinity" : "Infinity") }
        let (exponentBits, bias, coefficientBits) = bits == 32 ? (8, 101, 23) : (10, 398, 53)
        let exponent: Int
        let coefficient: UInt64
        if (value >> UInt64(bits - 3)) & 3 == 3 {
            exponent = Int((value >> UInt64(coefficientBits - 2)) & ((1 << UInt64(exponentBits)) - 1)) - bias
            coefficient = (value & ((1 << UInt64(coefficientBits - 2)) - 1)) | (1 << UInt64(coefficientBits))
        } else {
            exponent = Int((value >> UInt64(coefficientBits)) & ((1 << UInt64(exponentBits)) - 1)) - bias
            coefficient = value & ((1 << UInt64(coefficientBits)) - 1)
        }
        return .decimal(decimalText(negative: negative, digits: String(coefficient), exponent: exponent))
    }

    /// The decimal digits of a 113-bit coefficient (high, low).
    static func decimalDigits(_ value: (UInt64, UInt64)) -> String {
        var (high, low) = value
        guard high != 0 else { return String(low) }
        var digits: [UInt8] = []
        while high != 0 || low != 0 {
            // Divide the 128-bit number by 10, keeping the remainder.
            let highQuotient = high / 10
            let highRemainder = high % 10
            let (lowQuotient, remainder) = (10 as UInt64).dividingFullWidth((highRemainder, low))
            high = highQuotient
            low = lowQuotient
            digits.append(UInt8(48 + remainder))
        }
        return String(decoding: digits.reversed(), as: UTF8.self)
    }

    /// `digits` × 10^`exponent` as text: with a decimal point when the exponent is between -40
    /// and 0, digits and zeros up to 40 places, else in scientific notation (`1.5E+300`).
    static func decimalText(negative: Bool, digits: String, exponent: Int) -> String {
        let sign = negative ? "-" : ""
        if exponent == 0 { return sign + digits }
        if exponent > 0, exponent + digits.count <= 40 { return sign + digits + String(repeating: "0", count: exponent) }
        if exponent < 0, exponent >= -40 {
            let places = -exponent
            var text = digits
            if text.count <= places { text = String(repeating: "0", count: places - text.count + 1) + text }
            text.insert(".", at: text.index(text.endIndex, offsetBy: -places))
            return sign + text
        }
        let mantissa = digits.count > 1 ? String(digits.prefix(1)) + "." + digits.dropFirst() : digits
        let power = exponent + digits.count - 1
        return sign + mantissa + "E" + (power >= 0 ? "+" : "") + String(power)
    }

    // MARK: Mixed

    /// The values of a `Mixed` leaf: a composite int per value (0 for null; else its type + 1 in
    /// the low 5 bits, where its payload is in the next 3, and the rest an inline value or an
    /// index into the leaf's ints, pairs, strings or refs).
    static func mixed(_ ref: Int, file: RealmFile, format: Int, label: String, depth: Int,
                      links: Links?) throws -> [Item] {
        guard depth < 8 else { throw file.damaged("\(label) nest collections deeper than this reader follows") }
        let node = try file.node(ref, label)
        guard node.hasRefs, node.count >= 1 else { throw file.damaged("\(label) at offset \(ref) are not Mixed values") }
        let composites = try file.ints(try file.ref(node, 0, label), label)
        func part(_ slot: Int) throws -> Int { slot < node.count ? try file.ref(node, slot, label) : 0 }
        var ints: [Int64]?, pairs: [Int64]?, strings: [[UInt8]?]?, refs: [Int64]?
        func int(_ x: Int) throws -> Int64 {
            if ints == nil { ints = try part(1) == 0 ? [] : try file.ints(try part(1), label) }
            guard let ints, x >= 0, x < ints.count else { throw file.damaged("\(label) name a missing number") }
            return ints[x]
        }
        func pair(_ x: Int) throws -> (Int64, Int64) {
            if pairs == nil { pairs = try part(2) == 0 ? [] : try file.ints(try part(2), label) }
            guard let pairs, x >= 0, 2 * x + 1 < pairs.count else { throw file.damaged("\(label) name a missing pair") }
            return (pairs[2 * x], pairs[2 * x + 1])
        }
        func string(_ x: Int) throws -> [UInt8] {
            if strings == nil { strings = try part(3) == 0 ? [] : try file.byteStrings(try part(3), isString: true, label) }
            guard let strings, x >= 0, x < strings.count, let bytes = strings[x] else {
                throw file.damaged("\(label) name a missing string")
            }
            return bytes
        }
        func nested(_ x: Int) throws -> Int {
            if refs == nil { refs = try part(4) == 0 ? [] : try file.ints(try part(4), label) }
            guard let refs, x >= 0, x < refs.count else { throw file.damaged("\(label) name a missing collection") }
            return Int(refs[x])
        }
        return try composites.map { composite -> Item in
            guard composite != 0 else { return .value(.null) }
            let type = Int(composite & 0x1F) - 1
            let inline = (composite >> 5) & 7 == 0
            let x = Int(composite >> 8)
            switch type {
            case 0: return .value(.int(inline ? Int64(x) : try int(x)))
            case 1: return .value(.bool(x != 0))
            case 2:
                guard let text = String(validating: try string(x), as: UTF8.self) else {
                    throw file.damaged("\(label) hold text that is not UTF-8")
                }
                return .value(.string(text))
            case 4: return .value(.bytes(try string(x)))
            case 8:
                let (seconds, nanoseconds) = try pair(x)
                return .value(.date(try timestamp(seconds, nanoseconds, file: file, label: label)))
            case 9: return .value(.double(Double(Float(bitPattern: UInt32(truncatingIfNeeded: try int(x))))))
            case 10: return .value(.double(Double(bitPattern: UInt64(bitPattern: try int(x)))))
            case 11:
                let (low, high) = try pair(x)
                return decimal128(low: UInt64(bitPattern: low), high: UInt64(bitPattern: high))
            case 15:
                let bytes = try string(x)
                guard bytes.count == 12 else { throw file.damaged("\(label) hold an ObjectId of \(bytes.count) bytes") }
                return .objectId(hex(bytes))
            case 17:
                let bytes = try string(x)
                guard bytes.count == 16 else { throw file.damaged("\(label) hold a UUID of \(bytes.count) bytes") }
                return .value(.uuid(uuid(bytes)))
            case 19, 20:
                let root = try nested(x)
                guard root != 0 else { return .array([]) }
                var items: [Item] = []
                for leaf in try file.bplusLeaves(root, label) {
                    items += try mixed(leaf, file: file, format: format, label: label, depth: depth + 1, links: links)
                }
                return .array(items)
            case 21:
                let root = try nested(x)
                guard root != 0 else { return .object([]) }
                return try dictionary(root, keyType: .string, file: file, format: format, label: label, depth: depth + 1,
                                      links: links)
            case 16:
                let (table, key) = try pair(x)
                guard let links else { throw file.damaged("\(label) hold a link where no link belongs") }
                return try links(table, key)
            case 12:
                throw StoreError(.invalidArgument, "\(label) hold a link without its class, which this reader does "
                    + "not read")
            default:
                throw file.damaged("\(label) hold a Mixed of the unknown type \(type)")
            }
        }
    }

    // MARK: Collections

    /// A list or set of values: the leaves of its B+tree, in order.
    static func list(_ root: Int, of type: RealmModel.ColumnType, nullable: Bool, file: RealmFile, format: Int,
                     label: String, links: Links?) throws -> Item {
        guard root != 0 else { return .array([]) }
        var items: [Item] = []
        for leaf in try file.bplusLeaves(root, label) {
            items += try self.leaf(type, nullable: nullable, ref: leaf, file: file, format: format, label: label,
                                   links: links)
        }
        return .array(items)
    }

    /// A dictionary: from format 23 its keys' B+tree and its values' (Mixed) B+tree, side by
    /// side; before, a cluster tree of keys and values. Its keys sorted by their bytes.
    static func dictionary(_ root: Int, keyType: RealmModel.ColumnType, file: RealmFile, format: Int, label: String,
                           depth: Int = 0, links: Links?) throws -> Item {
        guard root != 0 else { return .object([]) }
        var keys: [Item] = [], values: [Item] = []
        if format >= 23 {
            let top = try file.node(root, label)
            guard top.hasRefs, top.count >= 2 else { throw file.damaged("\(label): a dictionary at offset \(root) is cut short") }
            let keysRoot = try file.ref(top, 0, label), valuesRoot = try file.ref(top, 1, label)
            if keysRoot != 0 {
                for leaf in try file.bplusLeaves(keysRoot, label) {
                    keys += try self.leaf(keyType, nullable: false, ref: leaf, file: file, format: format, label: label)
                }
            }
            if valuesRoot != 0 {
                for leaf in try file.bplusLeaves(valuesRoot, label) {
                    values += try mixed(leaf, file: file, format: format, label: label, depth: depth, links: links)
                }
            }
        } else {
            try RealmModel.visitCluster(root, file: file, label: label) { leaf, _ in
                keys += try self.leaf(keyType, nullable: false, ref: try file.ref(leaf, 1, label), file: file,
                                      format: format, label: label)
                values += try mixed(try file.ref(leaf, 2, label), file: file, format: format, label: label, depth: depth,
                                    links: links)
            }
        }
        guard keys.count == values.count else {
            throw file.damaged("\(label): a dictionary has \(keys.count) keys and \(values.count) values")
        }
        let pairs = zip(keys, values).map { key, value -> (String, Item) in
            if case .value(.string(let text)) = key { return (text, value) }
            return (key.json(tagged: false), value)
        }.sorted { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) }
        return .object(pairs)
    }
}

import Foundation

/// The conversions a ``SchemaStep/changeType(entity:attribute:to:optional:)`` step applies.
///
/// | from \ to | int | double | string | bool | date | uuid | bytes |
/// |---|---|---|---|---|---|---|---|
/// | int | = | exact only (the double equals the int) | decimal | 0 / 1 only | µs since 1970 | – | – |
/// | double | integral, in range | = | shortest round-trip text | – | seconds since 1970 | – | – |
/// | string | decimal only | Swift `Double(text)` | = | `true` / `false` | ISO 8601 (µs) | UUID text | UTF-8 |
/// | bool | 0 / 1 | – | `true` / `false` | = | – | – | – |
/// | date | µs since 1970 | seconds since 1970 | ISO 8601 (µs, UTC) | – | = | – | – |
/// | uuid | – | – | uppercase text | – | – | = | 16 bytes |
/// | bytes | – | – | valid UTF-8 only | – | – | 16 bytes only | = |
///
/// Null stays null. A value outside a conversion's domain fails the migration with
/// `invalidValue` naming the item, attribute and value; a pair marked – is refused when the
/// plan is checked, before anything is written.
public enum ValueConversion {
    /// Whether `from` values can be converted to `to`.
    public static func isDefined(from: ValueType, to: ValueType) -> Bool {
        if from == to { return true }
        switch (from, to) {
        case (.int, .double), (.int, .string), (.int, .bool), (.int, .date),
             (.double, .int), (.double, .string), (.double, .date),
             (.string, _),
             (.bool, .int), (.bool, .string),
             (.date, .int), (.date, .double), (.date, .string),
             (.uuid, .string), (.uuid, .bytes),
             (.bytes, .string), (.bytes, .uuid):
            return true
        default:
            return false
        }
    }

    /// Converts `value` to `type`; `nil` when the value has no image under the conversion.
    public static func convert(_ value: Value, to type: ValueType) -> Value? {
        if value.isNull || value.type == type { return value }
        switch (value, type) {
        case (.int(let i), .double):
            let d = Double(i)
            return Int64(exactly: d) == i ? .double(d) : nil
        case (.int(let i), .string): return .string(String(i))
        case (.int(let i), .bool): return i == 0 ? .bool(false) : i == 1 ? .bool(true) : nil
        case (.int(let i), .date): return .date(Timestamp(microsecondsSinceEpoch: i))
        case (.double(let d), .int): return Int64(exactly: d == 0 ? 0 : d).map { .int($0) }
        case (.double(let d), .string): return d.isNaN ? nil : .string(d.description)
        case (.double(let d), .date):
            let micros = (d * 1_000_000).rounded()
            return Int64(exactly: micros).map { .date(Timestamp(microsecondsSinceEpoch: $0)) }
        case (.string(let s), _): return fromString(s, to: type)
        case (.bool(let b), .int): return .int(b ? 1 : 0)
        case (.bool(let b), .string): return .string(b ? "true" : "false")
        case (.date(let t), .int): return .int(t.microsecondsSinceEpoch)
        case (.date(let t), .double): return .double(Double(t.microsecondsSinceEpoch) / 1_000_000)
        case (.date(let t), .string): return .string(iso8601(t))
        case (.uuid(let u), .string): return .string(u.uuidString)
        case (.uuid(let u), .bytes): return .bytes(u.bytes)
        case (.bytes(let b), .string): return String(validating: b, as: UTF8.self).map { .string($0) }
        case (.bytes(let b), .uuid): return UUID(bytes: b).map { .uuid($0) }
        default: return nil
        }
    }

    private static func fromString(_ s: String, to type: ValueType) -> Value? {
        switch type {
        case .int: return Int64(s).map { .int($0) }
        case .double: return Double(s).flatMap { $0.isNaN ? nil : .double($0) }
        case .bool: return s == "true" ? .bool(true) : s == "false" ? .bool(false) : nil
        case .date: return parseISO8601(s).map { .date($0) }
        case .uuid: return UUID(uuidString: s).map { .uuid($0) }
        case .bytes: return .bytes(Array(s.utf8))
        case .string: return .string(s)
        }
    }

    /// A timestamp as `YYYY-MM-DDTHH:MM:SS.ffffffZ`, UTC, the text a date converts to. Years
    /// outside 0000 to 9999 take ISO 8601's expanded form, a sign and six digits
    /// (`+294247-01-10T04:00:54.775807Z`), so that every date a store can hold has a text.
    public static func iso8601Text(_ t: Timestamp) -> String { iso8601(t) }

    /// Parses `[±YY]YYYY-MM-DDTHH:MM:SS[.f{1,6}](Z|±HH:MM)`, the text a string converts to a
    /// date from.
    public static func parseISO8601Text(_ text: String) -> Timestamp? { parseISO8601(text) }

    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (or `±YYYYYY-…` outside years 0 to 9999), UTC, the form
    /// ``convert(_:to:)`` writes.
    static func iso8601(_ t: Timestamp) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(27)
        appendISO8601(t, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends ``iso8601(_:)``'s text as UTF-8, digit by digit (a date is formatted for every
    /// date value an export or a conversion writes, where `String(format:)` would dominate).
    package static func appendISO8601(_ t: Timestamp, to out: inout [UInt8]) {
        // Floor division without overflow: Int64.min microseconds is a valid timestamp.
        let (quotient, remainder) = t.microsecondsSinceEpoch.quotientAndRemainder(dividingBy: 1_000_000)
        let seconds = remainder < 0 ? quotient - 1 : quotient
        let fraction = Int(remainder < 0 ? remainder + 1_000_000 : remainder)
        let (dayQuotient, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let days = secondOfDay < 0 ? dayQuotient - 1 : dayQuotient
        let second = Int(secondOfDay < 0 ? secondOfDay + 86_400 : secondOfDay)
        // The civil date of a day count, as in Howard Hinnant's algorithm (the inverse of the
        // one the parser uses).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                out.append(UInt8(0x30 + rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        if (0...9_999).contains(year) {
            digits(Int(year), 4)
        } else {
            out.append(year < 0 ? 0x2D : 0x2B)
            digits(Int(year.magnitude), 6)
        }
        out.append(0x2D)
        digits(month, 2)
        out.append(0x2D)
        digits(day, 2)
        out.append(0x54)
        digits(second / 3_600, 2)
        out.append(0x3A)
        digits(second / 60 % 60, 2)
        out.append(0x3A)
        digits(second % 60, 2)
        out.append(0x2E)
        digits(fraction, 6)
        out.append(0x5A)
    }

    /// Parses `[±YY]YYYY-MM-DDTHH:MM:SS[.f{1,6}](Z|±HH:MM)`; `nil` for any other text and for a
    /// date past the range of ``Timestamp``.
    static func parseISO8601(_ text: String) -> Timestamp? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var n = 0
            for b in bytes[range] {
                guard b >= 0x30 && b <= 0x39 else { return nil }
                n = n * 10 + Int(b - 0x30)
            }
            return n
        }
        // An expanded year: a sign and six digits; the fields after it move by three.
        let expanded = !bytes.isEmpty && (bytes[0] == 0x2B || bytes[0] == 0x2D)
        let b = expanded ? 3 : 0
        guard bytes.count >= 20 + b, bytes[b + 4] == 0x2D, bytes[b + 7] == 0x2D,
              bytes[b + 10] == 0x54 || bytes[b + 10] == 0x20, bytes[b + 13] == 0x3A, bytes[b + 16] == 0x3A,
              let digits = number(expanded ? 1..<7 : 0..<4), let month = number(b + 5..<b + 7),
              let day = number(b + 8..<b + 10), let hour = number(b + 11..<b + 13),
              let minute = number(b + 14..<b + 16), let second = number(b + 17..<b + 19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60
        else { return nil }
        let year = expanded && bytes[0] == 0x2D ? -digits : digits
        var i = b + 19
        var micros = 0
        if i < bytes.count, bytes[i] == 0x2E {
            i += 1
            var digits = 0
            while i < bytes.count, bytes[i] >= 0x30 && bytes[i] <= 0x39 {
                guard digits < 6 else { return nil }
                micros = micros * 10 + Int(bytes[i] - 0x30)
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<6 { micros *= 10 }
        }
        var offset = 0
        if i == bytes.count - 1 && bytes[i] == 0x5A {
            offset = 0
        } else if i == bytes.count - 6, bytes[i] == 0x2B || bytes[i] == 0x2D, bytes[i + 3] == 0x3A,
                  let h = number(i + 1..<i + 3), let m = number(i + 4..<i + 6), h < 24, m < 60 {
            offset = (h * 3600 + m * 60) * (bytes[i] == 0x2D ? -1 : 1)
        } else {
            return nil
        }
        // Days from the civil date (proleptic Gregorian), as in Howard Hinnant's algorithm.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        // In 128 bits: the first and last seconds of the range pass Int64 before their fraction.
        return Int64(exactly: Int128(seconds) * 1_000_000 + Int128(micros)).map(Timestamp.init(microsecondsSinceEpoch:))
    }
}

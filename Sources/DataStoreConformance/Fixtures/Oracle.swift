import DataStoreAPI
import Foundation

/// The naive answer to a request: plain arrays, filtered and sorted here, written apart from
/// every backend (the in-memory one included) so that a shared mistake cannot hide.
enum Oracle {
    static func answer(_ request: FetchRequest, over items: [Record], primaryKey: String) -> [Record] {
        // Each row's sort values (and their bytes) taken once, not at every comparison.
        let sort = request.sort
        var keyed = items.filter { matches(request.filter, $0) }.map { row -> (row: Record, keys: [SortValue]) in
            var keys: [SortValue] = []
            keys.reserveCapacity(sort.count + 1)
            for index in sort.indices {
                keys.append(SortValue(row[sort[index].attribute], fold: sort[index].caseInsensitive))
            }
            keys.append(SortValue(row[primaryKey], fold: false))
            return (row, keys)
        }
        keyed.sort { a, b in
            for index in sort.indices {
                var c = order(a.keys[index], b.keys[index], fold: sort[index].caseInsensitive)
                if !sort[index].ascending { c = -c }
                if c != 0 { return c < 0 }
            }
            return order(a.keys[sort.count], b.keys[sort.count], fold: false) < 0
        }
        var rows = keyed.map(\.row)
        if request.offset >= rows.count { return [] }
        rows.removeFirst(request.offset)
        if let limit = request.limit, rows.count > limit { rows.removeLast(rows.count - limit) }
        return rows
    }

    static func bytes(_ v: Value, fold: Bool) -> [UInt8] {
        switch v {
        case .string(let s):
            return fold ? s.utf8.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 } : Array(s.utf8)
        case .bytes(let b): return b
        case .uuid(let u): return withUnsafeBytes(of: u.uuid) { Array($0) }
        default: return []
        }
    }

    /// A value to sort by, with the bytes ``order(_:_:fold:)`` compares it by.
    struct SortValue {
        let value: Value
        let bytes: [UInt8]

        init(_ value: Value, fold: Bool) {
            self.value = value
            bytes = Oracle.bytes(value, fold: fold)
        }
    }

    /// ``order(_:_:fold:)`` of the two values, their bytes taken beforehand.
    static func order(_ a: SortValue, _ b: SortValue, fold: Bool) -> Int {
        switch (a.value, b.value) {
        case (.string, .string), (.bytes, .bytes), (.uuid, .uuid):
            let (x, y) = (a.bytes, b.bytes)
            let shorter = min(x.count, y.count)
            let common = shorter == 0 ? 0
                : x.withUnsafeBytes { x in y.withUnsafeBytes { y in memcmp(x.baseAddress!, y.baseAddress!, shorter) } }
            if common != 0 { return common < 0 ? -1 : 1 }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        default:
            return order(a.value, b.value, fold: fold)
        }
    }

    /// Nulls first; numbers numerically; strings, bytes and uuids by bytes.
    static func order(_ a: Value, _ b: Value, fold: Bool) -> Int {
        switch (a, b) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case let (.int(x), .int(y)): return x == y ? 0 : (x < y ? -1 : 1)
        case let (.double(x), .double(y)): return x == y ? 0 : (x < y ? -1 : 1)
        case let (.double(x), .int(y)): return order(.double(x), .double(Double(y)), fold: fold)
        case let (.int(x), .double(y)): return order(.double(Double(x)), .double(y), fold: fold)
        case let (.bool(x), .bool(y)): return x == y ? 0 : (x ? 1 : -1)
        case let (.date(x), .date(y)):
            return x.microsecondsSinceEpoch == y.microsecondsSinceEpoch ? 0 : (x < y ? -1 : 1)
        default:
            let (x, y) = (bytes(a, fold: fold), bytes(b, fold: fold))
            if x == y { return 0 }
            return x.lexicographicallyPrecedes(y) ? -1 : 1
        }
    }

    static func matches(_ filter: Filter, _ r: Record) -> Bool {
        switch filter {
        case .all: return true
        case let .compare(name, op, value):
            let x = r[name]
            switch op {
            case .equal: return order(x, value, fold: false) == 0
            case .notEqual: return order(x, value, fold: false) != 0
            case .less: return !x.isNull && !value.isNull && order(x, value, fold: false) < 0
            case .lessOrEqual: return !x.isNull && !value.isNull && order(x, value, fold: false) <= 0
            case .greater: return !x.isNull && !value.isNull && order(x, value, fold: false) > 0
            case .greaterOrEqual: return !x.isNull && !value.isNull && order(x, value, fold: false) >= 0
            }
        case let .among(name, values): return values.contains { order(r[name], $0, fold: false) == 0 }
        case .isNull(let name): return r[name].isNull
        case let .hasPrefix(name, prefix):
            let x = bytes(r[name], fold: false)
            return !r[name].isNull && x.count >= prefix.utf8.count && Array(x.prefix(prefix.utf8.count)) == Array(prefix.utf8)
        case let .contains(name, needle):
            guard !r[name].isNull else { return false }
            let (x, n) = (bytes(r[name], fold: false), Array(needle.utf8))
            if n.isEmpty { return true }
            return x.count >= n.count && (0...(x.count - n.count)).contains { Array(x[$0..<$0 + n.count]) == n }
        case let .hasElement(name, element):
            guard case .string(let text) = r[name],
                  let elements = try? JSONDecoder().decode([OracleScalar].self, from: Data(text.utf8)) else { return false }
            return elements.contains { $0.equals(element) }
        case .and(let fs): return fs.allSatisfy { matches($0, r) }
        case .or(let fs): return fs.contains { matches($0, r) }
        case .not(let f): return !matches(f, r)
        case .any, .relatedCount: return false
        }
    }
}

/// A JSON scalar as Foundation's decoder reads it, for the oracle's `hasElement`: independent of
/// the package's own reader.
struct OracleScalar: Decodable {
    let value: Value

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            value = .null
        } else if let bool = try? container.decode(Bool.self) {
            value = .bool(bool)
        } else if let int = try? container.decode(Int64.self) {
            value = .int(int)
        } else if let double = try? container.decode(Double.self) {
            value = .double(double)
        } else {
            value = .string(try container.decode(String.self))
        }
    }

    func equals(_ other: Value) -> Bool {
        switch (value, other) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Double(a) == b
        case let (.double(a), .double(b)): return a == b
        case let (.string(a), .string(b)): return Array(a.utf8) == Array(b.utf8)
        default: return false
        }
    }
}

@_spi(Backend) import DataStoreAPI
import Foundation

/// How a value of a foreign column becomes a ``Value`` of the attribute it is copied into.
enum ForeignConversion: Sendable, Hashable {
    case int
    case double
    case string
    case bytes
    /// 0 or 1.
    case bool
    /// Core Data's dates: seconds (a double) since 2001-01-01 00:00:00 UTC.
    case referenceDate
    /// Seconds (int or double) since 1970-01-01 00:00:00 UTC.
    case unixDate
    /// Text: GRDB's `YYYY-MM-DD HH:MM:SS.SSS`, SQLite.swift's `YYYY-MM-DDTHH:MM:SS.SSS`, ISO 8601
    /// with a `Z` or an offset (see ``ForeignValues/parseDate(_:)``).
    case textDate
    /// 16 bytes, or text in the 36-character form.
    case uuid
    /// Core Data's binary data with external storage allowed: the column holds the bytes after a
    /// 1, or after a 2 the name of a file in `directory` (`.NAME_SUPPORT/_EXTERNAL_DATA`).
    case externalBinary(directory: String)

    /// The type of the attribute a value converts into.
    var type: ValueType {
        switch self {
        case .int: .int
        case .double: .double
        case .string: .string
        case .bytes, .externalBinary: .bytes
        case .bool: .bool
        case .referenceDate, .unixDate, .textDate: .date
        case .uuid: .uuid
        }
    }
}

/// One attribute read from a foreign table: its name, the SQL expression that reads it and how
/// its value converts.
struct ForeignColumn: Sendable, Hashable {
    var attribute: String
    var expression: String
    var conversion: ForeignConversion
    /// The column as the user knows it (`ZPOST.ZTITLE`, `book.title`), for messages.
    var origin: String
}

/// How an entity's primary key is read.
enum ForeignKey: Sendable, Hashable {
    /// One column (an int, a string or a uuid).
    case column(ForeignColumn)
    /// A pair of int columns, as a uuid: the first 8 bytes order-encode the first, the last 8
    /// the second (the join entity of a many-to-many, keyed by its two items' numbers), so that
    /// key order is the order of the pair.
    case pair(String, String)
}

/// One entity of a foreign database: the entity as stores here hold it, and the SQL that reads
/// its items in key order.
struct ForeignEntity: Sendable {
    var schema: EntitySchema
    /// The `FROM` clause (a table with the alias `t`, and what it joins).
    var from: String
    /// A condition on the rows (Core Data's `Z_ENT IN (…)` for one hierarchy), or nil.
    var filter: String?
    var key: ForeignKey
    /// Every attribute but the key of a ``ForeignKey/pair`` key, in the entity's attribute order.
    var columns: [ForeignColumn]
    /// The user's name for where the items come from, for messages (`table ZPOST`, `table book`).
    var origin: String
}

/// What a foreign database holds, read as a store: the schema and how to read each entity.
struct ForeignMapping: Sendable {
    var schema: Schema
    var entities: [String: ForeignEntity]
    /// One line for `inspect`: what kind of foreign store it is and how it was mapped.
    var summary: String
}

/// Conversion of a foreign value, with errors that name where it came from.
enum ForeignValues {
    static let referenceDateOffset: Double = 978_307_200

    /// Converts `raw` (as SQLite holds it) for `column`; `row` names the row for a message.
    static func convert(_ raw: Value, _ column: ForeignColumn, row: @autoclosure () -> String) throws -> Value {
        if case .null = raw { return .null }
        func refuse(_ what: String) -> StoreError {
            StoreError(.invalidValue, "\(column.origin) holds \(what) in \(row()), which cannot be a "
                + "\(column.conversion.type) (attribute '\(column.attribute)')")
        }
        switch (column.conversion, raw) {
        case (.int, .int): return raw
        case (.int, .double(let d)):
            guard let i = Int64(exactly: d) else { throw refuse("the real number \(d)") }
            return .int(i)
        case (.double, .double): return raw
        case (.double, .int(let i)): return .double(Double(i))
        case (.string, .string): return raw
        case (.bytes, .bytes): return raw
        case (.bytes, .string(let s)): return .bytes(Array(s.utf8))
        case (.bool, .int(let i)) where i == 0 || i == 1: return .bool(i == 1)
        case (.referenceDate, .double(let d)): return try date(seconds: d + referenceDateOffset, refuse)
        case (.referenceDate, .int(let i)): return try date(seconds: Double(i) + referenceDateOffset, refuse)
        case (.unixDate, .double(let d)): return try date(seconds: d, refuse)
        case (.unixDate, .int(let i)): return try date(seconds: Double(i), refuse)
        case (.textDate, .string(let s)):
            guard let timestamp = parseDate(s) else { throw refuse("the text '\(s.prefix(40))'") }
            return .date(timestamp)
        case (.uuid, .bytes(let b)) where b.count == 16:
            return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                                     b[12], b[13], b[14], b[15])))
        case (.uuid, .string(let s)):
            guard let uuid = UUID(uuidString: s) else { throw refuse("the text '\(s.prefix(40))'") }
            return .uuid(uuid)
        case (.externalBinary(let directory), .bytes(let b)):
            return try externalBinary(b, directory: directory, column: column, row: row())
        default:
            throw refuse(describe(raw))
        }
    }

    static func describe(_ raw: Value) -> String {
        switch raw {
        case .int(let i): "the integer \(i)"
        case .double(let d): "the real number \(d)"
        case .string(let s): "the text '\(s.prefix(40))'"
        case .bytes(let b): "a blob of \(b.count) bytes"
        default: "\(raw)"
        }
    }

    private static func date(seconds: Double, _ refuse: (String) -> StoreError) throws -> Value {
        guard seconds.isFinite, let timestamp = try? Timestamp(Date(timeIntervalSince1970: seconds)) else {
            throw refuse("a date out of range (\(seconds) s since 1970)")
        }
        return .date(timestamp)
    }

    /// Core Data's external binary storage: a 1 then the bytes (kept in the row), or a 2 then the
    /// file's name (its UUID) and a NUL, the bytes being the file's in `directory`.
    static func externalBinary(_ blob: [UInt8], directory: String, column: ForeignColumn, row: String) throws -> Value {
        guard let marker = blob.first else { return .bytes([]) }
        switch marker {
        case 1: return .bytes(Array(blob.dropFirst()))
        case 2:
            let name = String(decoding: blob.dropFirst().prefix { $0 != 0 }, as: UTF8.self)
            guard !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else {
                throw StoreError(.corrupt, "\(column.origin) in \(row) names no external data file")
            }
            let file = (directory as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: file) else {
                throw StoreError(.notFound, "\(column.origin) in \(row) keeps its bytes in \(file), which is missing "
                    + "(copy the store's support directory with it)")
            }
            return .bytes(Array(data))
        default:
            throw StoreError(.corrupt, "\(column.origin) in \(row) is external binary data with an unknown marker "
                + "byte \(marker)")
        }
    }

    /// Parses `YYYY-MM-DD`, then optionally ` HH:MM[:SS[.fraction]]` or `THH:MM…`, then
    /// optionally `Z` or `±HH:MM` (no zone: UTC, as GRDB and SQLite.swift write).
    static func parseDate(_ text: String) -> Timestamp? {
        let bytes = Array(text.utf8)
        var position = 0
        func number(_ digits: Int) -> Int? {
            guard position + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[position..<position + digits] {
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            position += digits
            return value
        }
        func expect(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }
        guard let year = number(4), expect(0x2D), let month = number(2), expect(0x2D), let day = number(2),
              (1...12).contains(month), (1...31).contains(day) else { return nil }
        var hour = 0, minute = 0, second = 0
        var micros: Int64 = 0
        if position < bytes.count, bytes[position] == 0x20 || bytes[position] == 0x54 {
            position += 1
            guard let h = number(2), expect(0x3A), let m = number(2), h < 24, m < 60 else { return nil }
            hour = h
            minute = m
            if expect(0x3A) {
                guard let s = number(2), s < 61 else { return nil }
                second = s
                if expect(0x2E) {
                    var scale: Int64 = 100_000
                    var any = false
                    while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 {
                        micros += Int64(bytes[position] - 0x30) * scale
                        scale /= 10
                        position += 1
                        any = true
                    }
                    guard any else { return nil }
                }
            }
        }
        var offsetSeconds = 0
        if position < bytes.count {
            if expect(0x5A) {
            } else if bytes[position] == 0x2B || bytes[position] == 0x2D {
                let sign = bytes[position] == 0x2D ? -1 : 1
                position += 1
                guard let h = number(2) else { return nil }
                _ = expect(0x3A)
                guard let m = number(2) else { return nil }
                offsetSeconds = sign * (h * 3600 + m * 60)
            } else {
                return nil
            }
        }
        guard position == bytes.count else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second - offsetSeconds)
        return Timestamp(microsecondsSinceEpoch: seconds * 1_000_000 + micros)
    }
}

/// An order for a table keyed by a column of the user's choosing (`key=`), built once per
/// connection in SQLite's `temp` database (writable on a read-only connection; nothing touches
/// the user's file): `(k PRIMARY KEY, pk)` without rowid, so that each page of a key-order scan
/// is a range of an index instead of a sort of the whole table, and so that a key held twice or
/// null is refused, naming it, before anything is copied.
enum ForeignKeyOrder {
    /// Builds the order of `table`'s rows by `column` (`rowid` names each row: `pk`); returns the
    /// `FROM` clause that joins it (`o`) to the table (`t`) and the key's expression.
    static func make(_ database: ForeignDatabase, table: String, column: String, rowid: String,
                     allowed: [String], label: String) throws -> (from: String, key: String) {
        let name = ForeignDatabase.quoted("_ds_key_" + table)
        let quotedTable = ForeignDatabase.quoted(table), quotedColumn = ForeignDatabase.quoted(column)
        let classes = allowed.map { "'\($0)'" }.joined(separator: ", ")
        if let row = try database.rows("SELECT \(rowid), typeof(\(quotedColumn)) FROM \(quotedTable) WHERE "
            + "typeof(\(quotedColumn)) NOT IN (\(classes)) LIMIT 1").first {
            throw StoreError(.invalidValue, "\(label) keys the items but holds \(row[1].stringValue ?? "?") in the row "
                + "\(rowid) = \(row[0]); a key is never null and always of one type")
        }
        let statement = try database.prepare("CREATE TEMP TABLE IF NOT EXISTS \(name) (k, pk INTEGER, PRIMARY KEY (k)) "
            + "WITHOUT ROWID")
        _ = try statement.step()
        let fill = "INSERT INTO temp.\(name) SELECT \(quotedColumn), \(rowid) FROM \(quotedTable)"
        do {
            _ = try database.prepare("DELETE FROM temp.\(name)").step()
            _ = try database.prepare(fill).step()
        } catch {
            let twice = try database.rows("SELECT \(quotedColumn) FROM \(quotedTable) GROUP BY \(quotedColumn) "
                + "HAVING count(*) > 1 LIMIT 1").first?.first
            throw StoreError(.invalidValue, "\(label) keys the items but holds "
                + (twice.map { "\($0) more than once" } ?? "a value it cannot order") + "; a key is unique")
        }
        return ("temp.\(name) AS o JOIN \(quotedTable) AS t ON t.\(rowid) = o.pk", "o.k")
    }
}

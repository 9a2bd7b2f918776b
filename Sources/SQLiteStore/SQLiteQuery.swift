@_spi(Backend) import DataStoreAPI

/// A piece of SQL and the values bound to its parameters, in order. A prefix bound is bound as
/// raw text bytes (it need not be valid UTF-8), which `Value` cannot carry.
struct SQLFragment {
    enum Binding {
        case value(Value)
        case textBytes([UInt8])
    }

    var sql: String
    var bindings: [Binding]

    init(_ sql: String, _ bindings: [Binding] = []) {
        self.sql = sql
        self.bindings = bindings
    }
}

/// Translates requests into SQL that gives exactly the canonical answers.
///
/// Every translated predicate evaluates to 0 or 1, never NULL, so that `NOT` inverts as the
/// two-valued semantics demand: `==` and `!=` use `IS` / `IS NOT`; ordering comparisons and
/// `IN` are guarded by `IS NOT NULL`. Prefix and contains compare bytes (`CAST(x AS BLOB)`,
/// `instr` on blobs), never `LIKE`; a prefix also gives a `>= p AND < successor(p)` range so an
/// index on the attribute is used.
enum SQLiteQuery {
    static func quote(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func translate(_ filter: Filter) -> SQLFragment {
        switch filter {
        case .all:
            return SQLFragment("1")
        case let .compare(name, op, value):
            let column = quote(name)
            switch op {
            case .equal: return SQLFragment("\(column) IS ?", [.value(value)])
            case .notEqual: return SQLFragment("\(column) IS NOT ?", [.value(value)])
            default:
                if value.isNull { return SQLFragment("0") }
                let sqlOp = op == .less ? "<" : op == .lessOrEqual ? "<=" : op == .greater ? ">" : ">="
                return SQLFragment("(\(column) IS NOT NULL AND \(column) \(sqlOp) ?)", [.value(value)])
            }
        case let .among(name, values):
            let column = quote(name)
            let present = values.filter { !$0.isNull }
            var parts: [String] = []
            if !present.isEmpty {
                let marks = Array(repeating: "?", count: present.count).joined(separator: ", ")
                parts.append("(\(column) IS NOT NULL AND \(column) IN (\(marks)))")
            }
            if present.count != values.count { parts.append("\(column) IS NULL") }
            return parts.isEmpty ? SQLFragment("0")
                : SQLFragment("(" + parts.joined(separator: " OR ") + ")", present.map { .value($0) })
        case .isNull(let name):
            return SQLFragment("\(quote(name)) IS NULL")
        case let .hasPrefix(name, prefix):
            let column = quote(name)
            let bytes = Array(prefix.utf8)
            if bytes.isEmpty { return SQLFragment("\(column) IS NOT NULL") }
            var sql = "(\(column) IS NOT NULL AND \(column) >= ?"
            var bindings: [SQLFragment.Binding] = [.value(.string(prefix))]
            if let upper = successor(of: bytes) {
                sql += " AND \(column) < ?"
                bindings.append(.textBytes(upper))
            }
            sql += " AND substr(CAST(\(column) AS BLOB), 1, \(bytes.count)) = ?)"
            bindings.append(.value(.bytes(bytes)))
            return SQLFragment(sql, bindings)
        case let .contains(name, needle):
            let column = quote(name)
            return SQLFragment("(\(column) IS NOT NULL AND instr(CAST(\(column) AS BLOB), ?) > 0)",
                               [.value(.bytes(Array(needle.utf8)))])
        case let .hasElement(name, element):
            // The package's reader of JSON arrays, registered on every connection
            // (`SQLiteConnection`), so that SQLite answers as every backend does.
            return SQLFragment("\(SQLiteConnection.hasElementFunction)(\(quote(name)), ?)",
                               [.value(.string(JSONScalarArray.text(of: element)))])
        case .and(let filters):
            return join(filters, with: "AND", empty: "1")
        case .or(let filters):
            return join(filters, with: "OR", empty: "0")
        case .not(let inner):
            let fragment = translate(inner)
            return SQLFragment("(NOT \(fragment.sql))", fragment.bindings)
        case .any, .relatedCount:
            // Resolved by the accessor before any engine sees the filter.
            return SQLFragment("0")
        }
    }

    /// Joins terms as a balanced tree of parentheses, so that an `and` or `or` of thousands of
    /// terms stays far below SQLite's expression depth limit (SQLITE_MAX_EXPR_DEPTH, 1000), which
    /// a flat `a OR b OR ...` chain reaches at about a thousand terms.
    private static func join(_ filters: [Filter], with op: String, empty: String) -> SQLFragment {
        guard !filters.isEmpty else { return SQLFragment(empty) }
        return balanced(filters.map(translate)[...], op)
    }

    private static func balanced(_ parts: ArraySlice<SQLFragment>, _ op: String) -> SQLFragment {
        if parts.count == 1 { return parts[parts.startIndex] }
        let middle = parts.startIndex + parts.count / 2
        let left = balanced(parts[..<middle], op)
        let right = balanced(parts[middle...], op)
        return SQLFragment("(\(left.sql) \(op) \(right.sql))", left.bindings + right.bindings)
    }

    /// Whether SQL nests parentheses so deep that SQLite's parser could run out of stack
    /// ("parser stack overflow": its stack holds 100 entries, and each level of nesting takes 2
    /// to 4 of them, so about 25 levels overflow). Such a filter is evaluated in Swift instead,
    /// over the entity in key order. Identifiers and bound values never hold parentheses.
    static func nestsTooDeep(_ sql: String) -> Bool {
        var depth = 0
        for byte in sql.utf8 {
            if byte == UInt8(ascii: "(") {
                depth += 1
                if depth > maxNesting { return true }
            } else if byte == UInt8(ascii: ")") {
                depth -= 1
            }
        }
        return false
    }

    static let maxNesting = 20

    /// The smallest byte string greater than every string that starts with `bytes`.
    static func successor(of bytes: [UInt8]) -> [UInt8]? {
        var upper = bytes
        while let last = upper.last {
            if last < 0xFF {
                upper[upper.count - 1] = last + 1
                return upper
            }
            upper.removeLast()
        }
        return nil
    }

    /// `ORDER BY` for the sort keys, ties broken by primary key.
    static func orderBy(_ sort: [SortKey], _ entity: EntitySchema) -> String {
        let keys = sort.map { key in
            quote(key.attribute) + (key.caseInsensitive ? " COLLATE \(SQLiteConnection.foldingCollation)" : "")
                + (key.ascending ? " ASC" : " DESC")
        }
        return " ORDER BY " + (keys + [quote(entity.primaryKey) + " ASC"]).joined(separator: ", ")
    }

    /// The SELECT for a request, with offset and limit as the last two parameters.
    static func select(_ request: FetchRequest, _ entity: EntitySchema, columns: String) -> SQLFragment {
        let filter = translate(request.filter)
        let sql = "SELECT \(columns) FROM \(quote(entity.name)) WHERE \(filter.sql)"
            + orderBy(request.sort, entity) + " LIMIT ? OFFSET ?"
        return SQLFragment(sql, filter.bindings + [.value(.int(Int64(request.limit ?? -1))),
                                                   .value(.int(Int64(request.offset)))])
    }
}

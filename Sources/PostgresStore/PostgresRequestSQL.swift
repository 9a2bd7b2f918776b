#if Postgres
@_spi(Backend) import DataStoreAPI

/// Translates requests into SQL that gives exactly the canonical answers, or says it cannot
/// (`nil`), and the request is then answered in Swift over key-ordered pages.
///
/// Every predicate evaluates to true or false, never NULL, so that `NOT` inverts as the
/// two-valued semantics demand: `==`, ordering comparisons, `IN`, prefix and contains are
/// guarded by `IS NOT NULL`, `!=` by `IS NULL OR`. Strings compare in the
/// "C" collation (bytes) and are bound escaped as stored; a prefix is `starts_with` on the escaped
/// text (the escape keeps prefixes); `contains` is translated only for needles without the bytes
/// 0 to 2, which the escape could match inside an escaped character. Nulls sort first, as in
/// the canonical order; a case-insensitive sort folds ASCII letters only, as the canonical one.
struct PostgresRequestSQL {
    private(set) var binds = LibpqParameters()
    private var count = 0
    /// The store's quoted schema, which holds the hash function of string indexes.
    var schema: String?

    private mutating func bind(_ value: Value) -> String {
        PostgresSQL.bind(value, into: &binds)
        count += 1
        return "$\(count)"
    }

    static let maxBinds = 30_000

    /// The WHERE condition of `filter`, or `nil` when it has no exact translation.
    mutating func condition(_ filter: Filter, _ entity: EntitySchema) -> String? {
        guard count < Self.maxBinds else { return nil }
        switch filter {
        case .all:
            return "true"
        case let .compare(name, op, value):
            let column = PostgresSQL.quote(name)
            switch op {
            // `=` and `<>` with a null guard rather than `IS [NOT] DISTINCT FROM`, which no
            // index serves; a string's or bytes' index is over the value's hash, so the hash is
            // compared too when an index starts with the attribute.
            case .equal:
                if value.isNull { return "(\(column) IS NULL)" }
                let mark = bind(value)
                return "(\(column) IS NOT NULL AND \(column) = \(mark)\(hashTerm(name, mark, entity)))"
            case .notEqual:
                if value.isNull { return "(\(column) IS NOT NULL)" }
                return "(\(column) IS NULL OR \(column) <> \(bind(value)))"
            default:
                if value.isNull { return "false" }
                let sqlOp = op == .less ? "<" : op == .lessOrEqual ? "<=" : op == .greater ? ">" : ">="
                return "(\(column) IS NOT NULL AND \(column) \(sqlOp) \(bind(value)))"
            }
        case let .among(name, values):
            let column = PostgresSQL.quote(name)
            let present = values.filter { !$0.isNull }
            var parts: [String] = []
            if !present.isEmpty {
                let marks = present.map { bind($0) }.joined(separator: ", ")
                parts.append("(\(column) IS NOT NULL AND \(column) IN (\(marks)))")
            }
            if present.count != values.count { parts.append("(\(column) IS NULL)") }
            return parts.isEmpty ? "false" : "(" + parts.joined(separator: " OR ") + ")"
        case .isNull(let name):
            return "(\(PostgresSQL.quote(name)) IS NULL)"
        case let .hasPrefix(name, prefix):
            let column = PostgresSQL.quote(name)
            if prefix.isEmpty { return "(\(column) IS NOT NULL)" }
            return "(\(column) IS NOT NULL AND starts_with(\(column), \(bind(.string(prefix)))))"
        case let .contains(name, needle):
            guard !needle.utf8.contains(where: { $0 < 3 }) else { return nil }
            let column = PostgresSQL.quote(name)
            if needle.isEmpty { return "(\(column) IS NOT NULL)" }
            return "(\(column) IS NOT NULL AND strpos(\(column), \(bind(.string(needle)))) > 0)"
        case .hasElement:
            // Evaluated after the scan, by the same reader of JSON as every backend's (jsonb would
            // refuse text that is not JSON instead of holding no element).
            return nil
        case .and(let filters):
            return join(filters, "AND", empty: "true", entity)
        case .or(let filters):
            return join(filters, "OR", empty: "false", entity)
        case .not(let inner):
            return condition(inner, entity).map { "(NOT \($0))" }
        case .any, .relatedCount:
            // Resolved by the accessor before any engine sees the filter.
            return "false"
        }
    }

    /// ` AND hash(column) = hash(mark)` for a string or bytes attribute that an index starts
    /// with, so that the index (over the hash) serves an equality.
    private func hashTerm(_ name: String, _ mark: String, _ entity: EntitySchema) -> String {
        guard let attribute = entity.attribute(named: name), attribute.type == .string || attribute.type == .bytes,
              entity.indexes.contains(where: { $0.attributes.first == name }), let schema else { return "" }
        let cast = "\(mark)::\(PostgresSQL.castType(attribute.type))"
        return " AND " + PostgresSQL.indexTerm(attribute, schema: schema, operand: PostgresSQL.quote(name)) + " = "
            + PostgresSQL.indexTerm(attribute, schema: schema, operand: cast)
    }

    private mutating func join(_ filters: [Filter], _ op: String, empty: String, _ entity: EntitySchema) -> String? {
        guard !filters.isEmpty else { return empty }
        var parts: [String] = []
        for filter in filters {
            guard let part = condition(filter, entity) else { return nil }
            parts.append(part)
        }
        return balanced(parts[...], op)
    }

    /// A balanced tree of parentheses, so that thousands of terms stay shallow.
    private func balanced(_ parts: ArraySlice<String>, _ op: String) -> String {
        if parts.count == 1 { return parts[parts.startIndex] }
        let middle = parts.startIndex + parts.count / 2
        return "(\(balanced(parts[..<middle], op)) \(op) \(balanced(parts[middle...], op)))"
    }

    /// `ORDER BY` for the sort keys, ties broken by primary key.
    static func orderBy(_ sort: [SortKey], _ entity: EntitySchema) -> String {
        let keys = sort.map { key -> String in
            var term = PostgresSQL.quote(key.attribute)
            if key.caseInsensitive {
                term = "translate(\(term), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') COLLATE \"C\""
            }
            return term + (key.ascending ? " ASC NULLS FIRST" : " DESC NULLS LAST")
        }
        return " ORDER BY " + (keys + [PostgresSQL.quote(entity.primaryKey) + " ASC"]).joined(separator: ", ")
    }

    /// The SELECT of a request, or `nil` when its filter has no exact translation.
    static func select(_ request: FetchRequest, _ entity: EntitySchema, columns: String, table: String,
                       schema: String) -> (sql: String, binds: LibpqParameters)?
    {
        var builder = PostgresRequestSQL(schema: schema)
        guard let condition = builder.condition(request.filter, entity) else { return nil }
        var sql = "SELECT \(columns) FROM \(table) WHERE \(condition)" + orderBy(request.sort, entity)
        if let limit = request.limit { sql += " LIMIT \(builder.bind(.int(Int64(limit))))" }
        if request.offset > 0 { sql += " OFFSET \(builder.bind(.int(Int64(request.offset))))" }
        return (sql, builder.binds)
    }

    /// The count of a filter, or `nil` when it has no exact translation.
    static func count(_ filter: Filter, _ entity: EntitySchema, table: String, schema: String)
        -> (sql: String, binds: LibpqParameters)?
    {
        var builder = PostgresRequestSQL(schema: schema)
        guard let condition = builder.condition(filter, entity) else { return nil }
        return ("SELECT count(*) FROM \(table) WHERE \(condition)", builder.binds)
    }
}
#endif

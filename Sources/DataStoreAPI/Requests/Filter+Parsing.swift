import Foundation

extension Filter {
    /// A filter written as text, as the command line takes it:
    ///
    /// ```
    /// rating >= 4 and (name hasPrefix "Ada" or not active == true)
    /// company.name == 'Acme' and id in [1, 2, 3] and deletedAt is null
    /// ```
    ///
    /// Comparisons `==`, `!=`, `<`, `<=`, `>`, `>=`; `in [...]`; `is null` and `is not null`;
    /// `hasPrefix` and `contains` with a string; `and`, `or`, `not` (or `&&`, `||`, `!`) and
    /// parentheses. An attribute may be a key path across to-one relationships. Literals are
    /// numbers, strings in double or single quotes, `true`, `false` and `null`; a string given
    /// for a date (ISO 8601) or a uuid attribute is read as one.
    /// - Throws: `invalidArgument` naming the position and what was expected, `unknownAttribute`
    ///   for a name the entity does not have, `typeMismatch` for a literal of the wrong type.
    public init(parsing text: String, for entity: EntitySchema, in schema: Schema? = nil) throws(StoreError) {
        var parser = FilterTextParser(text: text, entity: entity, schema: schema)
        self = try parser.parse()
    }
}

/// The recursive-descent parser behind ``Filter/init(parsing:for:in:)``.
struct FilterTextParser {
    enum Token: Equatable {
        case word(String)
        case string(String)
        case number(String)
        case symbol(String)
    }

    let text: String
    let entity: EntitySchema
    let schema: Schema?
    private var tokens: [(token: Token, offset: Int)] = []
    private var index = 0
    /// How many `not`s and parentheses enclose the term being read: at most ``maxNesting``, so
    /// that the recursion is bounded (20,000 parentheses overflowed the stack).
    private var depth = 0
    /// The most `not`s and parentheses around a term: four times ``Limits/maxFilterDepth``, so
    /// that a filter within that limit written with redundant parentheses (`not (a)` counts
    /// two) is parsed and judged by the limit itself.
    static let maxNesting = 4 * Limits.maxFilterDepth

    init(text: String, entity: EntitySchema, schema: Schema?) {
        self.text = text
        self.entity = entity
        self.schema = schema
    }

    private func failure(_ message: String) -> StoreError {
        let offset = index < tokens.count ? tokens[index].offset : text.count
        let shown = text.count > 200 ? text.prefix(200) + "..." : Substring(text)
        return StoreError(.invalidArgument, "filter '\(shown)': \(message) at character \(offset + 1)")
    }

    mutating func parse() throws(StoreError) -> Filter {
        tokens = try tokenize()
        guard !tokens.isEmpty else { throw failure("a comparison expected") }
        let filter = try parseOr()
        guard index == tokens.count else { throw failure("unexpected \(describe(tokens[index].token))") }
        return filter
    }

    private func describe(_ token: Token) -> String {
        switch token {
        case .word(let w): return "'\(w)'"
        case .string(let s): return "string \"\(s)\""
        case .number(let n): return "number \(n)"
        case .symbol(let s): return "'\(s)'"
        }
    }

    private var current: Token? { index < tokens.count ? tokens[index].token : nil }

    private mutating func take(_ token: Token) -> Bool {
        guard current == token else { return false }
        index += 1
        return true
    }

    private mutating func takeWord(_ word: String) -> Bool {
        guard case .word(let w)? = current, w.lowercased() == word else { return false }
        index += 1
        return true
    }

    private mutating func parseOr() throws(StoreError) -> Filter {
        var terms = [try parseAnd()]
        while takeWord("or") || take(.symbol("||")) { terms.append(try parseAnd()) }
        return terms.count == 1 ? terms[0] : .or(terms)
    }

    private mutating func parseAnd() throws(StoreError) -> Filter {
        var terms = [try parseUnary()]
        while takeWord("and") || take(.symbol("&&")) { terms.append(try parseUnary()) }
        return terms.count == 1 ? terms[0] : .and(terms)
    }

    private mutating func parseUnary() throws(StoreError) -> Filter {
        let negated = takeWord("not") || take(.symbol("!"))
        let grouped = !negated && take(.symbol("("))
        if negated || grouped {
            depth += 1
            guard depth <= Self.maxNesting else {
                throw failure("parentheses and 'not's nested more than \(Self.maxNesting) deep (a filter holds at "
                    + "most \(Limits.maxFilterDepth) levels)")
            }
        }
        defer { if negated || grouped { depth -= 1 } }
        if negated { return .not(try parseUnary()) }
        if grouped {
            let inner = try parseOr()
            guard take(.symbol(")")) else { throw failure("')' expected") }
            return inner
        }
        return try parseComparison()
    }

    private mutating func parseComparison() throws(StoreError) -> Filter {
        guard case .word(let path)? = current, !["and", "or", "not"].contains(path.lowercased()) else {
            throw failure("an attribute name expected")
        }
        index += 1
        let type = try attributeType(path)
        if takeWord("is") {
            let negated = takeWord("not")
            guard takeWord("null") else { throw failure("'null' expected after 'is'") }
            return negated ? .not(.isNull(path)) : .isNull(path)
        }
        if takeWord("in") {
            guard take(.symbol("[")) else { throw failure("'[' expected after 'in'") }
            var values: [Value] = []
            if !take(.symbol("]")) {
                repeat { values.append(try parseValue(as: type, for: path)) } while take(.symbol(","))
                guard take(.symbol("]")) else { throw failure("',' or ']' expected") }
            }
            return .among(path, values)
        }
        for (word, make) in [("hasprefix", Filter.hasPrefix), ("contains", Filter.contains)] where takeWord(word) {
            guard case .string(let text)? = current else { throw failure("a string expected after '\(word)'") }
            index += 1
            return make(path, text)
        }
        let operators: [String: ComparisonOperator] = ["==": .equal, "=": .equal, "!=": .notEqual, "<": .less,
                                                      "<=": .lessOrEqual, ">": .greater, ">=": .greaterOrEqual]
        guard case .symbol(let symbol)? = current, let op = operators[symbol] else {
            throw failure("a comparison (==, !=, <, <=, >, >=, in, is null, hasPrefix, contains) expected")
        }
        index += 1
        return .compare(path, op, try parseValue(as: type, for: path))
    }

    /// The type of the attribute a (key) path names.
    private func attributeType(_ path: String) throws(StoreError) -> ValueType {
        var entity = self.entity
        let parts = path.split(separator: ".").map(String.init)
        for (position, part) in parts.enumerated() {
            if position == parts.count - 1 {
                guard let attribute = entity.attribute(named: part) else {
                    throw StoreError(.unknownAttribute,
                                     "filter '\(text)': '\(entity.name)' has no attribute '\(part)'")
                }
                return attribute.type
            }
            guard let relationship = entity.relationship(named: part), relationship.cardinality == .toOne,
                  let destination = schema?.entity(named: relationship.destination) else {
                throw StoreError(.unknownAttribute, "filter '\(text)': '\(entity.name)' has no to-one relationship "
                    + "'\(part)'")
            }
            entity = destination
        }
        throw StoreError(.unknownAttribute, "filter '\(text)': an empty attribute name")
    }

    private mutating func parseValue(as type: ValueType, for path: String) throws(StoreError) -> Value {
        guard let token = current else { throw failure("a value expected") }
        index += 1
        func mismatch() -> StoreError {
            StoreError(.typeMismatch, "filter '\(text)': '\(path)' is \(type == .int ? "an" : "a") \(type), "
                + "not \(describe(token))")
        }
        switch token {
        case .word("null"): return .null
        case .word("true") where type == .bool: return .bool(true)
        case .word("false") where type == .bool: return .bool(false)
        case .number(let n):
            switch type {
            case .int:
                guard let i = Int64(n) else { throw mismatch() }
                return .int(i)
            case .double:
                guard let d = Double(n) else { throw mismatch() }
                return .double(d)
            case .date:
                guard let seconds = Double(n), let micros = Int64(exactly: (seconds * 1_000_000).rounded()) else {
                    throw mismatch()
                }
                return .date(Timestamp(microsecondsSinceEpoch: micros))
            default: throw mismatch()
            }
        case .string(let s):
            switch type {
            case .string: return .string(s)
            case .date:
                guard let t = ValueConversion.parseISO8601Text(s) else { throw mismatch() }
                return .date(t)
            case .uuid:
                guard let u = UUID(uuidString: s) else { throw mismatch() }
                return .uuid(u)
            case .bytes:
                guard let data = Data(base64Encoded: s) else { throw mismatch() }
                return .bytes(Array(data))
            default: throw mismatch()
            }
        default:
            throw mismatch()
        }
    }

    private func tokenize() throws(StoreError) -> [(token: Token, offset: Int)] {
        var tokens: [(Token, Int)] = []
        let scalars = Array(text.unicodeScalars)
        var i = 0
        func fail(_ message: String) -> StoreError {
            StoreError(.invalidArgument, "filter '\(text)': \(message) at character \(i + 1)")
        }
        func isDigit(_ scalar: Unicode.Scalar) -> Bool { ("0"..."9").contains(scalar) }
        while i < scalars.count {
            let c = scalars[i]
            if c == " " || c == "\t" || c == "\n" { i += 1; continue }
            let start = i
            if c == "\"" || c == "'" {
                var out = String.UnicodeScalarView()
                i += 1
                while i < scalars.count, scalars[i] != c {
                    if scalars[i] == "\\", i + 1 < scalars.count { i += 1 }
                    out.append(scalars[i])
                    i += 1
                }
                guard i < scalars.count else { throw fail("unterminated string") }
                i += 1
                tokens.append((.string(String(out)), start))
            } else if c.properties.isAlphabetic || c == "_" {
                while i < scalars.count,
                      scalars[i].properties.isAlphabetic || scalars[i] == "_" || scalars[i] == "."
                        || isDigit(scalars[i]) { i += 1 }
                tokens.append((.word(String(String.UnicodeScalarView(scalars[start..<i]))), start))
            } else if isDigit(c) || (c == "-" && i + 1 < scalars.count && isDigit(scalars[i + 1])) {
                i += 1
                while i < scalars.count, isDigit(scalars[i]) || [".", "e", "E", "+", "-"].contains(scalars[i]) {
                    i += 1
                }
                tokens.append((.number(String(String.UnicodeScalarView(scalars[start..<i]))), start))
            } else {
                let two = i + 1 < scalars.count ? String(String.UnicodeScalarView([c, scalars[i + 1]])) : ""
                if ["==", "!=", "<=", ">=", "&&", "||"].contains(two) {
                    tokens.append((.symbol(two), start))
                    i += 2
                } else if "=<>!()[],".unicodeScalars.contains(c) {
                    tokens.append((.symbol(String(c)), start))
                    i += 1
                } else {
                    throw fail("unexpected '\(c)'")
                }
            }
        }
        return tokens
    }
}

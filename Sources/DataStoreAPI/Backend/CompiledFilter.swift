/// A filter bound once per request to the slots of an entity's record layout: it evaluates a
/// record of that layout by position instead of looking each attribute up by name, exactly as
/// ``Filter/matches(_:)`` does (the leaves' semantics are shared), and it names the attributes it
/// reads, so that a backend can decode only those before it knows whether a record matches.
@_spi(Backend) public struct CompiledFilter {
    private indirect enum Node {
        case all
        case compare(Int, ComparisonOperator, Value)
        case among(Int, [Value])
        /// `among` of many candidates, sorted by ``Value/compareCanonical(_:_:foldingASCIICase:)``
        /// and searched by halves (the same equality as `Filter.among`'s, in log time).
        case amongSorted(Int, [Value])
        case isNull(Int)
        case hasPrefix(Int, [UInt8])
        case contains(Int, [UInt8])
        case hasElement(Int, Value)
        case and([Node])
        case or([Node])
        case not(Node)
        /// An attribute the layout lacks: always null, as `Record`'s subscript reads it.
        case constant(Bool)
    }

    public let filter: Filter
    public let layout: RecordLayout
    /// Per slot of the layout, whether the filter reads it.
    public let reads: [Bool]
    private let root: Node

    public init(_ filter: Filter, layout: RecordLayout) {
        self.filter = filter
        self.layout = layout
        var reads = [Bool](repeating: false, count: layout.names.count)
        root = Self.compile(filter, layout, &reads)
        self.reads = reads
    }

    /// Whether the filter reads every attribute (or none: `.all`): nothing to gain from decoding
    /// only what it reads.
    public var readsEveryAttributeOrNone: Bool {
        !reads.contains(false) || !reads.contains(true)
    }

    private static func compile(_ filter: Filter, _ layout: RecordLayout, _ reads: inout [Bool]) -> Node {
        func slot(_ name: String) -> Int? {
            guard let slot = layout.slot(of: name) else { return nil }
            reads[slot] = true
            return slot
        }
        switch filter {
        case .all:
            return .all
        case let .compare(attribute, op, value):
            guard let at = slot(attribute) else { return .constant(Filter.compare(.null, op, value)) }
            return .compare(at, op, value)
        case let .among(attribute, values):
            guard let at = slot(attribute) else { return .constant(Filter.among(.null, values)) }
            // (A NaN compares equal to every double, so a list holding one is searched in order.)
            guard values.count > 16, !values.contains(where: { if case .double(let d) = $0 { d.isNaN } else { false } })
            else { return .among(at, values) }
            return .amongSorted(at, values.sorted { Value.compareCanonical($0, $1) < 0 })
        case .isNull(let attribute):
            guard let at = slot(attribute) else { return .constant(true) }
            return .isNull(at)
        case let .hasPrefix(attribute, prefix):
            guard let at = slot(attribute) else { return .constant(false) }
            return .hasPrefix(at, Array(prefix.utf8))
        case let .contains(attribute, needle):
            guard let at = slot(attribute) else { return .constant(false) }
            return .contains(at, Array(needle.utf8))
        case let .hasElement(attribute, element):
            guard let at = slot(attribute) else { return .constant(false) }
            return .hasElement(at, element)
        case .and(let filters):
            return .and(filters.map { compile($0, layout, &reads) })
        case .or(let filters):
            return .or(filters.map { compile($0, layout, &reads) })
        case .not(let inner):
            return .not(compile(inner, layout, &reads))
        case .any, .relatedCount:
            // Resolved by the accessor before any engine sees the filter.
            return .constant(false)
        }
    }

    /// Whether the record matches; a record of another layout is evaluated by name. A compact
    /// record of this layout decodes only the fields the filter reads.
    public func matches(_ record: Record) -> Bool {
        if let values = record.heldValues(of: layout) { return values.withUnsafeBufferPointer { Self.evaluate(root, $0) } }
        if let row = record.compactRow, row.layout == layout { return Self.evaluate(root, row) }
        guard let values = record.values(inOrderOf: layout) else { return filter.matches(record) }
        return values.withUnsafeBufferPointer { Self.evaluate(root, $0) }
    }

    /// Whether the row whose fields `table` holds (of this filter's layout) matches: only the
    /// fields the filter reads are decoded.
    @_spi(Backend) public func matches(_ table: FieldTable) -> Bool {
        Self.evaluate(root, TableValues(table: table))
    }

    /// Whether `candidates`, sorted by `Value.compareCanonical`, hold a value equal to `value`.
    private static func sorted(_ candidates: [Value], hold value: Value) -> Bool {
        // A NaN equals every double, as in `Filter.among`.
        if case .double(let d) = value, d.isNaN { return candidates.contains { if case .double = $0 { true } else { false } } }
        var (low, high) = (0, candidates.count)
        while low < high {
            let middle = (low + high) / 2
            let order = Value.compareCanonical(candidates[middle], value)
            if order == 0 { return true }
            if order < 0 { low = middle + 1 } else { high = middle }
        }
        return false
    }

    private static func evaluate(_ node: Node, _ values: some SlotValues) -> Bool {
        switch node {
        case .all: return true
        case .constant(let result): return result
        case let .compare(slot, op, value): return Filter.compare(values[slot], op, value)
        case let .among(slot, candidates): return Filter.among(values[slot], candidates)
        case let .amongSorted(slot, candidates): return Self.sorted(candidates, hold: values[slot])
        case .isNull(let slot): return values[slot].isNull
        case let .hasPrefix(slot, prefix): return Filter.hasPrefix(values[slot], prefix)
        case let .contains(slot, needle): return Filter.contains(values[slot], needle)
        case let .hasElement(slot, element): return StructuredValue.arrayHolds(values[slot], element)
        case .and(let nodes): return nodes.allSatisfy { evaluate($0, values) }
        case .or(let nodes): return nodes.contains { evaluate($0, values) }
        case .not(let inner): return !evaluate(inner, values)
        }
    }
}

/// A record's values by slot, as a compiled filter reads them: held values, or a compact
/// record's fields, each decoded when read.
private protocol SlotValues {
    subscript(slot: Int) -> Value { get }
}

extension UnsafeBufferPointer<Value>: SlotValues {}

/// A field table's row, its fields built when read.
private struct TableValues: SlotValues {
    let table: FieldTable

    subscript(slot: Int) -> Value { table[slot].value }
}

extension CompactRow: SlotValues {
    subscript(slot: Int) -> Value { value(at: slot) }
}

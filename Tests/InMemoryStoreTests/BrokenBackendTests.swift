@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import Foundation
@_spi(Backend) import InMemoryStore
import Testing

/// How the broken backend misbehaves.
enum Breakage: Sendable, CaseIterable {
    /// Ignores the request's offset.
    case ignoresOffset
    /// Sorts strings with Swift's `<` (Unicode canonical order) instead of UTF-8 bytes.
    case sortsWithSwiftLessThan
    /// Treats `!=` as SQL does: items whose value is null never match.
    case threeValuedNotEqual
    /// Misses, in `<` and `<=` ranges on strings and bytes, items whose value is a proper prefix
    /// of the bound and whose encoded primary key starts with 0xFF (LMDB's format-1 index scan).
    case rangeStopsAtKeysStartingWith0xFF
    /// Checks unique indexes before the primary key on insert, so re-inserting an item reports
    /// `uniqueViolation` instead of `keyExists` (SQLite's WITHOUT ROWID tables).
    case uniqueCheckedBeforeKey
    /// Folds case in sorts only up to the first NUL byte, then compares lengths (SQLite's NOCASE).
    case caseFoldingStopsAtNUL
    /// Stores the attributes and indexes of relationships but reports a schema without them,
    /// so no delete rule runs and no reference is checked.
    case forgetsRelationships
    /// Checks each to-one reference when it is written (as an immediate SQL foreign key
    /// would), instead of when the transaction commits.
    case checksReferencesPerStatement
    /// Reports every cascade rule as `deny`: a delete that should cascade is refused.
    case skipsCascades
}

/// Wraps the in-memory engine and breaks one behaviour, to show the suite catches it.
final class BrokenEngine: StorageEngine {
    let inner: InMemoryEngine
    let breakage: Breakage

    init(inner: InMemoryEngine, breakage: Breakage) {
        self.inner = inner
        self.breakage = breakage
    }

    var schema: Schema {
        var schema = inner.schema
        for position in schema.entities.indices {
            switch breakage {
            case .forgetsRelationships:
                schema.entities[position].relationships = []
            case .skipsCascades:
                for r in schema.entities[position].relationships.indices
                where schema.entities[position].relationships[r].deleteRule == .cascade {
                    schema.entities[position].relationships[r].deleteRule = .deny
                }
            default:
                return schema
            }
        }
        return schema
    }

    func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try inner.withReader { try body(BrokenTransaction(inner: $0, breakage: breakage)) }
    }

    func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try inner.withWriter { writer in
            let broken = BrokenWriter(inner: writer, breakage: breakage)
            broken.storedSchema = inner.schema
            return try body(broken)
        }
    }

    func close() throws { try inner.close() }
}

class BrokenTransaction: StorageReader {
    let base: any StorageReader
    let breakage: Breakage

    init(inner: any StorageReader, breakage: Breakage) {
        base = inner
        self.breakage = breakage
    }

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? { try base.get(entity, key: key) }
    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        guard breakage == .rangeStopsAtKeysStartingWith0xFF else { return try base.count(filter, in: entity) }
        return try fetch(FetchRequest(entity.name, filter: filter), in: entity).count
    }
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        try base.scan(entity, after: key, limit: limit)
    }
    func metadata(forKey key: String) throws -> [UInt8]? { try base.metadata(forKey: key) }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        var request = request
        switch breakage {
        case .ignoresOffset:
            request.offset = 0
            return try base.fetch(request, in: entity)
        case .threeValuedNotEqual:
            return try base.fetch(request, in: entity).filter { record in
                !Self.notEqualAttributes(request.filter).contains { record[$0].isNull }
            }
        case .rangeStopsAtKeysStartingWith0xFF:
            let bounds = Self.upperBounds(request.filter)
            return try base.fetch(request, in: entity).filter { record in
                let key = (try? KeyEncoding.encodeKey(record[entity.primaryKey])) ?? []
                return key.first != 0xFF || !bounds.contains { name, bound in
                    let value = Self.bytes(record[name])
                    return value.count < bound.count && bound.starts(with: value)
                }
            }
        case .caseFoldingStopsAtNUL:
            guard request.sort.contains(where: \.caseInsensitive) else { return try base.fetch(request, in: entity) }
            let (offset, limit) = (request.offset, request.limit)
            request.offset = 0
            request.limit = nil
            let rows = try base.fetch(request, in: entity).map { (try KeyEncoding.encodeKey($0[entity.primaryKey]), $0) }
            let sorted = rows.sorted { a, b in
                for key in request.sort {
                    var c = key.caseInsensitive ? Self.compareUpToNUL(a.1[key.attribute], b.1[key.attribute])
                        : Value.compareCanonical(a.1[key.attribute], b.1[key.attribute])
                    if !key.ascending { c = -c }
                    if c != 0 { return c < 0 }
                }
                return Value.compareBytes(a.0, b.0) < 0
            }.map(\.1)
            return FetchRequest(entity.name, offset: offset, limit: limit).page(sorted)
        case .uniqueCheckedBeforeKey, .forgetsRelationships, .checksReferencesPerStatement, .skipsCascades:
            return try base.fetch(request, in: entity)
        case .sortsWithSwiftLessThan:
            let (offset, limit) = (request.offset, request.limit)
            request.offset = 0
            request.limit = nil
            var rows = try base.fetch(request, in: entity)
            if let key = request.sort.first {
                rows.sort { a, b in
                    if case .string(let x) = a[key.attribute], case .string(let y) = b[key.attribute], x != y {
                        return key.ascending ? x < y : x > y
                    }
                    return false
                }
            }
            let start = min(offset, rows.count)
            return Array(rows[start..<min(rows.count, start + (limit ?? rows.count))])
        }
    }

    static func upperBounds(_ filter: Filter) -> [(String, [UInt8])] {
        switch filter {
        case let .compare(name, .less, value), let .compare(name, .lessOrEqual, value): return [(name, bytes(value))]
        case .and(let fs), .or(let fs): return fs.flatMap(upperBounds)
        default: return []
        }
    }

    static func bytes(_ value: Value) -> [UInt8] {
        switch value {
        case .string(let s): return Array(s.utf8)
        case .bytes(let b): return b
        default: return [0xFF, 0xFF]
        }
    }

    /// SQLite's NOCASE: folded bytes up to the first NUL, then the shorter string first.
    static func compareUpToNUL(_ a: Value, _ b: Value) -> Int {
        guard case .string(let x) = a, case .string(let y) = b else { return Value.compareCanonical(a, b) }
        let (p, q) = (Array(x.utf8.prefix { $0 != 0 }), Array(y.utf8.prefix { $0 != 0 }))
        let c = Value.compareBytes(p, q, foldingASCIICase: true)
        return c != 0 ? c : (x.utf8.count == y.utf8.count ? 0 : (x.utf8.count < y.utf8.count ? -1 : 1))
    }

    static func notEqualAttributes(_ filter: Filter) -> [String] {
        switch filter {
        case let .compare(name, .notEqual, _): return [name]
        case .and(let fs), .or(let fs): return fs.flatMap(notEqualAttributes)
        default: return []
        }
    }
}

final class BrokenWriter: BrokenTransaction, StorageWriter {
    let writer: any StorageWriter

    init(inner: any StorageWriter, breakage: Breakage) {
        writer = inner
        super.init(inner: inner, breakage: breakage)
    }

    /// What `.checksReferencesPerStatement` does at each write.
    private func checkReferencesNow(_ record: Record, _ entity: EntitySchema) throws {
        guard breakage == .checksReferencesPerStatement else { return }
        for relationship in entity.relationships where relationship.cardinality == .toOne {
            let value = record[relationship.name]
            guard !value.isNull, let target = storedSchema.entity(named: relationship.destination) else { continue }
            if try writer.get(target, key: PrimaryKey(value)) == nil {
                throw StoreError(.referenceViolation, "'\(entity.name)' refers to missing '\(target.name)' \(value)")
            }
        }
    }

    var storedSchema = Schema(entities: [])

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try checkReferencesNow(record, entity)
        if breakage == .uniqueCheckedBeforeKey {
            for index in entity.indexes where index.isUnique {
                let values = index.attributes.map { record[$0] }
                if values.contains(where: \.isNull) { continue }
                let same = Filter.and(zip(index.attributes, values).map { .compare($0, .equal, $1) })
                if try !writer.fetch(FetchRequest(entity.name, filter: same, limit: 1), in: entity).isEmpty {
                    throw StoreError.uniqueViolation(entity, index, record)
                }
            }
        }
        try writer.insert(record, key: key, in: entity)
    }
    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try checkReferencesNow(record, entity)
        try writer.put(record, key: key, in: entity)
    }
    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool { try writer.delete(key: key, in: entity) }
    func deleteAll(in entity: EntitySchema) throws -> Int { try writer.deleteAll(in: entity) }
    func setMetadata(_ value: [UInt8]?, forKey key: String) throws { try writer.setMetadata(value, forKey: key) }
}

func brokenBackend(_ breakage: Breakage) -> ConformanceBackend {
    ConformanceBackend(name: "broken (\(breakage))") { _, schema, _ in
        let engine = try InMemoryEngine(database: InMemoryDatabase(), schema: schema)
        return try Store(engine: BrokenEngine(inner: engine, breakage: breakage))
    }
}

/// The case that must catch each breakage.
let catchingCases: [(Breakage, String)] = [
    (.ignoresOffset, "offsetsAndLimitsMatchTheOracle"),
    (.ignoresOffset, "pagesOverManyEqualSortKeysAreStableAndComplete"),
    (.sortsWithSwiftLessThan, "everySortMatchesTheOracle"),
    (.sortsWithSwiftLessThan, "stringsSortByUTF8BytesAndFoldASCIIOnly"),
    (.threeValuedNotEqual, "everyPredicateMatchesTheOracle"),
    (.threeValuedNotEqual, "nullComparesAsAValueInTwoValuedLogic"),
    (.rangeStopsAtKeysStartingWith0xFF, "indexedRangesFindValuesThatArePrefixesOfTheirBounds"),
    (.rangeStopsAtKeysStartingWith0xFF, "randomEdgeRequestsMatchTheOracleOnStoreChildAndDelete"),
    (.uniqueCheckedBeforeKey, "insertingAnExistingKeyIsKeyExistsEvenWhenAUniqueValueAlsoClashes"),
    (.uniqueCheckedBeforeKey, "seededEdgeSequence4EndsEqualToTheModel"),
    (.caseFoldingStopsAtNUL, "caseInsensitiveSortComparesPastNULBytes"),
    (.caseFoldingStopsAtNUL, "randomEdgeRequestsMatchTheOracleOnStoreChildAndDelete"),
    (.skipsCascades, "cascadeDeletesRelatedItemsAndTheFeedListsThem"),
    (.skipsCascades, "cyclesAndDeepChainsDelete"),
    (.forgetsRelationships, "cyclesAndDeepChainsDelete"),
    (.forgetsRelationships, "aReferenceToNothingRollsTheTransactionBack"),
    (.checksReferencesPerStatement, "aTransactionMayInsertAnItemBeforeWhatItRefersTo"),
    (.forgetsRelationships, "randomGraphSequence1EndsEqualToTheGraphModel"),
    (.checksReferencesPerStatement, "randomGraphSequence1EndsEqualToTheGraphModel"),
    (.skipsCascades, "randomGraphSequence1EndsEqualToTheGraphModel"),
]

@Test(arguments: catchingCases)
func suiteFailsABrokenBackend(_ breakage: Breakage, _ caseName: String) async throws {
    let testCase = try #require(ConformanceSuite.named(caseName))
    let failure = await testCase.firstFailure(on: brokenBackend(breakage))
    #expect(failure != nil, "the suite must report the \(breakage) backend with \(caseName)")
    if let failure { print("caught \(breakage) with \(caseName): \(failure.prefix(100))") }
}

@Test(arguments: catchingCases)
func theSameCasesPassOnTheUnbrokenBackend(_ breakage: Breakage, _ caseName: String) async throws {
    let testCase = try #require(ConformanceSuite.named(caseName))
    try await testCase.run(on: inMemoryBackend)
}

@Test func suiteHasAtLeastSixtyCases() {
    #expect(ConformanceSuite.cases.count >= 60)
    #expect(Set(ConformanceSuite.cases.map(\.name)).count == ConformanceSuite.cases.count, "case names are unique")
}

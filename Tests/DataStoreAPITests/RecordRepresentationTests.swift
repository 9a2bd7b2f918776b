@_spi(Backend) import DataStoreAPI
import Foundation
import PropertyBased
import Testing

// A record is a store's layout and values, a literal's pairs or a dictionary; the app must not
// be able to tell which. These properties compare all three on random names (repeated ones
// included) and values, and the key order used without encoding against the encoded one. Names
// are their bytes: a look-alike (the Kelvin sign for K) is another name everywhere.

private let names = ["id", "name", "score", "a", "", "é", "e\u{301}", "K", "\u{212A}", "name2", "x\u{0}"]

private func randomValue(_ rng: inout some RandomNumberGenerator) -> Value {
    switch rng.next() % 6 {
    case 0: return .null
    case 1: return .int(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64))
    case 2: return .double(Double(bitPattern: rng.next()))
    case 3: return .string(names[Int(rng.next() % UInt64(names.count))])
    case 4: return .bytes((0..<Int(rng.next() % 4)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
    default: return .bool(rng.next() % 2 == 0)
    }
}

/// The generator's names without the look-alikes: a Swift `Dictionary` takes `K` and the Kelvin
/// sign for one key, where a record's names are their bytes (``namesAreTheirBytesInEveryRecord``).
private let distinctNames = names.filter { $0 != "e\u{301}" && $0 != "\u{212A}" }

/// Up to 20 pairs: past 16 a literal is hashed, so both sides of the limit are covered.
private let pairsGenerator = Generator<[(String, Value)], [[(String, Value)]]>(
    run: { rng in
        (0..<Int(rng.next() % 21)).map { _ in
            (distinctNames[Int(rng.next() % UInt64(distinctNames.count))], randomValue(&rng))
        }
    },
    shrink: { pairs in pairs.isEmpty ? [] : [Array(pairs.dropLast()), Array(pairs.dropFirst())] })

@Test func literalsDictionariesAndStoredRecordsAreIndistinguishable() async {
    await propertyCheck(count: 500, input: pairsGenerator) { pairs in
        let literal = Record(pairs: pairs)
        let dictionary = Record(Dictionary(pairs, uniquingKeysWith: { _, last in last }))
        let layout = RecordLayout(Array(dictionary.values.keys).sorted())
        let stored = Record(layout: layout, values: layout.names.map { dictionary[$0] })
        for record in [literal, stored] {
            #expect(record == dictionary)
            #expect(record.hashValue == dictionary.hashValue)
            #expect(record.count == dictionary.count)
            #expect(Set(record.attributeNames) == Set(dictionary.attributeNames))
            #expect(record.values == dictionary.values)
            for (position, name) in (names + ["missing"]).enumerated() {
                // "K" and the Kelvin sign, "é" and "e" with a combining accent: equal as Swift
                // strings, but other names (their bytes differ): the look-alike finds nothing in
                // every representation.
                #expect(record.value(ifPresent: name) == dictionary.value(ifPresent: name))
                #expect(record.value(ifPresent: name, at: position % 20) == dictionary.value(ifPresent: name))
            }
            #expect(Array(record.values(in: layout)) == layout.names.map { dictionary[$0] })
            var changed = record
            var expected = dictionary
            for (name, value) in [("score", Value.int(9)), ("new", .null), ("id", .string("k"))] {
                changed[name] = value
                expected[name] = value
            }
            #expect(changed == expected)
            #expect(record == dictionary, "a changed copy left the original as it was")
        }
    }
}

/// An entity whose attributes are some of the generator's names, in the order a literal in
/// schema order names them, so that random literals often match its layout name for name.
private let normalizingEntity = EntitySchema("T", primaryKey: "id", attributes: [
    Attribute("id", .int), Attribute("name", .string, optional: true), Attribute("score", .int, default: 7),
    Attribute("a", .double, optional: true), Attribute("é", .bytes, optional: true),
])

/// Literals in the entity's order (a write's fast path: names matched to the layout one by one),
/// some with a name repeated, one dropped or an unknown one added.
private let schemaOrderPairsGenerator = Generator<[(String, Value)], [[(String, Value)]]>(
    run: { rng in
        func typedValue(_ position: Int, _ rng: inout some RandomNumberGenerator) -> Value {
            switch position {
            case 0: return .int(Int64(bitPattern: rng.next()) >> 40)
            case 1: return .string(names[Int(rng.next() % UInt64(names.count))])
            case 2: return .int(Int64(rng.next() % 100))
            case 3: return .double(Double(rng.next() % 1000) / 8)
            default: return .bytes([UInt8(truncatingIfNeeded: rng.next())])
            }
        }
        var pairs = normalizingEntity.attributes.indices.map { position in
            (normalizingEntity.attributes[position].name,
             rng.next() % 8 == 0 ? randomValue(&rng) : typedValue(position, &rng))
        }
        switch rng.next() % 6 {
        case 0: pairs.append((pairs[Int(rng.next() % 5)].0, randomValue(&rng)))  // a name again, last
        case 1: pairs.insert((pairs[Int(rng.next() % 5)].0, randomValue(&rng)), at: Int(rng.next() % 5))
        case 2: pairs.remove(at: Int(rng.next() % 5))
        case 3: pairs.append(("missing", randomValue(&rng)))
        case 4: pairs.append((distinctNames[Int(rng.next() % UInt64(distinctNames.count))], randomValue(&rng)))
        default: break
        }
        return pairs
    },
    shrink: { _ in [] })

@Test func aWriteNormalizesALiteralAsItsDictionary() async {
    await propertyCheck(count: 2_000, input: schemaOrderPairsGenerator) { pairs in
        let literal = Record(pairs: pairs)
        let dictionary = Record(Dictionary(pairs, uniquingKeysWith: { _, last in last }))
        let fromLiteral = Result { () throws(StoreError) in try normalizingEntity.normalize(literal) }
        let fromDictionary = Result { () throws(StoreError) in try normalizingEntity.normalize(dictionary) }
        switch (fromLiteral, fromDictionary) {
        case let (.success(a), .success(b)):
            #expect(a == b, "\(pairs)")
            #expect(a.attributeNames == normalizingEntity.attributes.map(\.name))
        case let (.failure(a), .failure(b)):
            #expect(a.code == b.code, "\(pairs): \(a.message) / \(b.message)")
        default:
            Issue.record("\(pairs): \(fromLiteral) against \(fromDictionary)")
        }
    }
}

/// A record's names are their bytes in every representation: `K` and KELVIN SIGN, `é` and `e`
/// with a combining accent, are two names, and one is never found by the other.
@Test func namesAreTheirBytesInEveryRecord() {
    let kelvin = "\u{212A}"
    let literal = Record(pairs: [("K", 1), (kelvin, 2), ("é", 3)])
    #expect(literal.count == 3)
    #expect(literal["K"] == 1 && literal[kelvin] == 2 && literal["e\u{301}"] == .null)
    let stored = Record(layout: RecordLayout(["K", "é"]), values: [1, 3])
    #expect(stored.value(ifPresent: kelvin) == nil && stored.value(ifPresent: "e\u{301}") == nil)
    #expect(stored.value(ifPresent: "K") == 1)
    let dictionary = Record(["K": 1, "é": 3])
    #expect(dictionary.value(ifPresent: kelvin) == nil && dictionary.value(ifPresent: "e\u{301}") == nil)
    let many = RecordLayout((0..<12).map { "a\($0)" } + ["K"])
    #expect(many.slot(of: "K") == 12 && many.slot(of: kelvin) == nil, "a layout that hashes its names")
}

/// A look-alike of an attribute's name (`e` and a combining accent for `é`, which Swift's
/// equality takes for it) is an unknown name in a write, whatever the record's representation.
@Test func aWriteRefusesALookAlikeName() {
    for record in [Record(pairs: [("id", 1), ("e\u{301}", .bytes([1]))]), Record(["id": 1, "e\u{301}": .bytes([1])])] {
        #expect { try normalizingEntity.normalize(record) } throws: { ($0 as? StoreError)?.code == .unknownAttribute }
    }
}

@Test func aLiteralsLastRepeatedNameWins() {
    let record: Record = ["a": 1, "b": 2, "a": 3]
    #expect(record.count == 2)
    #expect(record["a"] == 3)
    #expect(record == Record(["a": 3, "b": 2]))
}

private let keyGenerator = Generator<(Value, Value), [(Value, Value)]>(
    run: { rng in
        func key(_ kind: UInt64, _ rng: inout some RandomNumberGenerator) -> Value {
            switch kind {
            case 0:
                let edges: [Int64] = [.min, .min + 1, -1, 0, 1, .max - 1, .max]
                return .int(rng.next() % 2 == 0 ? edges[Int(rng.next() % 7)] : Int64(bitPattern: rng.next()))
            case 1:
                let pieces = ["", "a", "ab", "\u{0}", "é", "e\u{301}", "\u{7F}", "\u{80}", "\u{10FFFF}", "z"]
                return .string((0..<Int(rng.next() % 4)).map { _ in pieces[Int(rng.next() % 10)] }.joined())
            default:
                var bytes = (0..<16).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                if rng.next() % 2 == 0 { bytes[Int(rng.next() % 16)] = 0; bytes[15] = 0xFF }
                return .uuid(UUID(bytes: bytes) ?? UUID())
            }
        }
        let kind = rng.next() % 3
        let a = key(kind, &rng)
        return (a, rng.next() % 8 == 0 ? a : key(kind, &rng))
    },
    shrink: { _ in [] })

@Test func keysCompareWithoutEncodingInTheirEncodedOrder() async {
    await propertyCheck(count: 5_000, input: keyGenerator) { a, b in
        let encoded = Value.compareBytes(try KeyEncoding.encodeKey(a), try KeyEncoding.encodeKey(b))
        #expect(try KeyEncoding.compareKeys(a, b) == encoded, "\(a) against \(b)")
        #expect((try KeyEncoding.compareKeys(a, b) == 0) == (a == b))
    }
    #expect(throws: StoreError.self) { try KeyEncoding.compareKeys(.double(1), .double(2)) }
}

@Test func aRecordIsTwoReferences() {
    // Every copy of a record (into a fetch's array, out of a page, into a batch) retains what
    // it holds: the representation is kept to two references, its names and its values'
    // storage, plus the tag that says which kind of names (the standard library's collections
    // leave the compiler no spare bits for it) and the values' run in their storage (which
    // records of one result share, ``RecordArena``).
    #expect(MemoryLayout<Record>.size <= 4 * MemoryLayout<AnyObject>.size)
}

/// Records of one layout built in one arena: a row's values, and whether the row's read fails
/// after how many values.
private let arenaRowsGenerator = Generator<[([Value], Int?)], [[([Value], Int?)]]>(
    run: { rng in
        (0..<Int(rng.next() % 300)).map { _ in
            let values = (0..<3).map { _ in randomValue(&rng) }
            return (values, rng.next() % 10 == 0 ? Int(rng.next() % 4) : nil)
        }
    },
    shrink: { rows in rows.isEmpty ? [] : [Array(rows.dropLast()), Array(rows.dropFirst())] })

@Test func recordsSharingAnArenaChangeIndependently() async {
    // Records a store returns together share their values' storage; the app must not be able
    // to tell: a change to one (a value set, a name added, a refill) leaves the others as they
    // were, a row that cannot be read leaves no record and no values behind, and a record kept
    // after its siblings and the arena are gone keeps its values.
    await propertyCheck(count: 200, input: arenaRowsGenerator) { rows in
        let layout = RecordLayout(["a", "b", "c"])
        var arena = RecordArena()
        var records: [Record] = []
        var expected: [[Value]] = []
        for (values, failAfter) in rows {
            let record = arena.record(layout: layout) { sink in
                for (i, value) in values.enumerated() {
                    if i == failAfter { return false }
                    sink.append(value)
                }
                return failAfter != 3  // 3: every value appended, the row still refused
            }
            if failAfter == nil {
                #expect(record != nil)
            } else {
                #expect(record == nil, "a failed row made no record")
            }
            if let record {
                records.append(record)
                expected.append(values)
            }
        }
        let unchanged = records  // copies: the changes below must not reach them
        let original = expected
        for i in records.indices where i % 3 == 0 {
            switch i % 4 {
            case 0: records[i]["b"] = .string("changed \(i)"); expected[i][1] = .string("changed \(i)")
            case 1:
                _ = records[i].refill(layout: layout) { buffer in
                    for j in buffer.indices { buffer[j] = .int(Int64(i * 10 + j)) }
                    return true
                }
                expected[i] = (0..<3).map { .int(Int64(i * 10 + $0)) }
            default:
                records[i]["new"] = .bool(true)
            }
        }
        for i in records.indices {
            #expect(Array(records[i].values(in: layout)) == expected[i], "record \(i)")
            if i % 3 == 0 && i % 4 >= 2 { #expect(records[i]["new"] == .bool(true)) }
            #expect(Array(unchanged[i].values(in: layout)) == original[i], "the copy of record \(i)")
            #expect(unchanged[i].count == 3)
        }
        // The last record alone outlives the rest.
        let survivor = records.last
        let survivorValues = expected.last
        let survivorCopy = survivor.map { Record($0.values) }  // a dictionary: storage of its own
        records.removeAll()
        arena = RecordArena()
        if let survivor, let survivorValues, let survivorCopy {
            #expect(Array(survivor.values(in: layout)) == survivorValues)
            #expect(survivor == survivorCopy)
        }
    }
}

@Test func anArenaRecordEqualsAndHashesAsItsLiteral() {
    let layout = RecordLayout(["id", "name"])
    var arena = RecordArena()
    let first = arena.record(layout: layout) { sink in
        sink.append(.int(1)); sink.append(.string("one")); return true
    }
    let second = arena.record(layout: layout) { sink in
        sink.append(.int(2)); sink.append(.string("two")); return true
    }
    let literal: Record = ["id": 1, "name": "one"]
    #expect(first == literal)
    #expect(first?.hashValue == literal.hashValue)
    #expect(second != literal)
    #expect(second?["name"] == .string("two"))
}

/// Edge values of every type: the extremes, both zeros, the infinities, a subnormal, text that is
/// canonically equivalent but not the same bytes, a NUL, long text and bytes (past the one-byte
/// LEB128 length), empty ones.
private let edgeValues: [Value] = [
    .null, .bool(false), .bool(true), .int(.min), .int(-1), .int(0), .int(.max),
    .double(0), .double(-0.0), .double(.infinity), .double(-.infinity), .double(.leastNonzeroMagnitude),
    .double(.greatestFiniteMagnitude), .string(""), .string("\u{E9}"), .string("e\u{301}"), .string("a\u{0}b"),
    .string(String(repeating: "\u{1F600}", count: 100)), .bytes([]), .bytes([0]), .bytes((0..<300).map { UInt8($0 % 256) }),
    .date(Timestamp(microsecondsSinceEpoch: .min)), .date(Timestamp(microsecondsSinceEpoch: 0)),
    .date(Timestamp(microsecondsSinceEpoch: .max)), .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
    .uuid(UUID(uuid: (255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 255))),
]

@Test func aCompactRecordIsItsDictionaryOnEdgeValues() throws {
    var rng = EdgeRandom(state: 7)
    let layout = RecordLayout(["id", "a", "b", "c"])
    var arena = CompactArena()
    for round in 0..<400 {
        let values = (0..<4).map { _ in edgeValues[Int(rng.next() % UInt64(edgeValues.count))] }
        let model = Record(Dictionary(uniqueKeysWithValues: zip(layout.names, values)))
        let made = arena.record(layout: layout, values: values)
        let compact = try #require(made, "round \(round)")
        #expect(compact == model, "round \(round): \(values)")
        #expect(model == compact)
        #expect(compact.hashValue == model.hashValue)
        #expect(compact.count == 4 && compact.attributeNames == layout.names)
        #expect(compact.values == model.values)
        #expect(compact.description == model.description)
        for (name, value) in zip(layout.names, values) { #expect(compact.value(ifPresent: name) == value) }
        #expect(compact.value(ifPresent: "missing") == nil)
        #expect(Array(compact.values(in: layout)) == values)
        // Another compact record of the same values is equal (by bytes); a changed one is not,
        // and the change leaves the record it was copied from as it was.
        let madeAgain = arena.record(layout: layout, values: values)
        let again = try #require(madeAgain)
        #expect(again == compact && again.hashValue == compact.hashValue)
        var changed = compact
        let other = edgeValues[Int(rng.next() % UInt64(edgeValues.count))]
        changed["b"] = other
        var changedModel = model
        changedModel["b"] = other
        #expect(changed == changedModel)
        #expect((changed == compact) == (other == values[2]))
        #expect(compact == model)
        // A filter reads the compact record's fields as it reads the dictionary's.
        for value in edgeValues {
            let filter = Field("a") == value
            #expect(CompiledFilter(filter, layout: layout).matches(compact) == filter.matches(model), "\(value)")
        }
    }
}

@Test func compactRecordsOfOneResultShareChunksAndOutliveTheArena() throws {
    var records: [Record] = []
    do {
        var arena = CompactArena()
        let layout = RecordLayout(["id", "text"])
        for i in 0..<5_000 {
            let text = String(repeating: "x", count: i % 70)
            let made = arena.record(layout: layout, values: [.int(Int64(i)), .string(text)])
            records.append(try #require(made))
        }
    }
    for (i, record) in records.enumerated() {
        #expect(record["id"] == .int(Int64(i)) && record["text"] == .string(String(repeating: "x", count: i % 70)))
    }
    // A layout the values do not fit makes no record.
    var arena = CompactArena()
    let unfit = arena.record(layout: RecordLayout(["id"]), values: [.int(1), .int(2)])
    #expect(unfit == nil)
}

/// SplitMix64, for a sequence that one seed names.
private struct EdgeRandom: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A record made from a dictionary lists its names by name, not in the dictionary's order (which
/// changes from one process to the next): what a `Decodable`'s `allKeys` sees over it too.
@Test func aDictionaryRecordListsItsNamesInOrder() {
    let names = (0..<12).map { "field\($0)" }
    let record = Record(Dictionary(uniqueKeysWithValues: names.map { ($0, Value.int(1)) }))
    #expect(record.attributeNames == names.sorted())
}

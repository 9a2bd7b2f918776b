@_spi(Backend) import DataStoreAPI
import Foundation
import Testing

@Test(arguments: [
    ([Int64.min, -1_000_000, -1, 0, 1, 255, 256, Int64.max]),
])
func intKeysEncodeInSignedOrder(_ ints: [Int64]) throws {
    let encoded = try ints.map { try KeyEncoding.encodeKey(.int($0)) }
    #expect(encoded == encoded.sorted { $0.lexicographicallyPrecedes($1) })
    for (i, e) in zip(ints, encoded) {
        #expect((try? KeyEncoding.decodeKey(e, as: .int)) == .int(i))
    }
}

@Test func tupleEncodingOrdersDoublesAndNullsCanonically() {
    let values: [Value] = [.null, .double(-.infinity), .double(-2.5), .double(-0.0), .double(1e-300), .double(3),
                           .double(.infinity)]
    let encoded = values.map { KeyEncoding.encodeTuple([$0]) }
    #expect(encoded == encoded.sorted { $0.lexicographicallyPrecedes($1) })
    #expect(KeyEncoding.encodeTuple([.double(-0.0)]) == KeyEncoding.encodeTuple([.double(0.0)]))
}

@Test func tupleStringsWithNulSortBeforeLongerStrings() {
    let strings = ["a", "a\u{0}", "a\u{0}b", "ab", "b"]
    let encoded = strings.map { KeyEncoding.encodeTuple([.string($0), .int(1)]) }
    #expect(encoded == encoded.sorted { $0.lexicographicallyPrecedes($1) })
}

@Test func valuesAreEqualOnlyWhenStoredTheSame() {
    #expect(Value.string("\u{E9}") != Value.string("e\u{301}"))
    #expect(Value.double(-0.0) != Value.double(0.0))
    #expect(Value.compareCanonical(.double(-0.0), .double(0.0)) == 0)
    #expect(Set<Value>([.string("\u{E9}"), .string("e\u{301}")]).count == 2)
    #expect(Value.bytes([]) != Value.null)
}

@Test func valuesRoundTripThroughJSON() throws {
    let values: [Value] = [.null, .bool(true), .int(.min), .double(-0.0), .double(.infinity), .string("a\u{0}"),
                           .bytes([0, 255]), .date(Timestamp(microsecondsSinceEpoch: -5)), .uuid(UUID())]
    let data = try JSONEncoder().encode(values)
    #expect(try JSONDecoder().decode([Value].self, from: data) == values)
}

@Test func timestampsRoundToTheNearestMicrosecond() throws {
    #expect(try Timestamp(Date(timeIntervalSince1970: 0.000_000_4)).microsecondsSinceEpoch == 0)
    #expect(try Timestamp(Date(timeIntervalSince1970: -0.000_000_6)).microsecondsSinceEpoch == -1)
    #expect(throws: StoreError.self) { try Timestamp(Date(timeIntervalSince1970: .nan)) }
}

@Test func attributeDictionariesAreSugarForPredicates() {
    let filter = Filter.matching(["a": 1, "b": [1, 2], "c": nil, "d": .range(1...3)])
    #expect(filter == .and([
        .compare("a", .equal, 1), .among("b", [1, 2]), .isNull("c"),
        .and([.compare("d", .greaterOrEqual, 1), .compare("d", .lessOrEqual, 3)]),
    ]))
}

@Test(arguments: [Value.null, .bool(true), .double(1), .bytes([1]), .date(Timestamp(microsecondsSinceEpoch: 1))])
func aValueThatCannotBeAKeyIsAnErrorNotEmptyBytes(_ value: Value) {
    #expect(throws: StoreError.self) { try KeyEncoding.encodeKey(value) }
    #expect(throws: StoreError.self) { try PrimaryKey(value) }
}

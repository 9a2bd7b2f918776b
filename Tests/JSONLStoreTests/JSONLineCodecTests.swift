@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import Foundation
import JSONLStore
import PropertyBased
import Testing

/// A schema with one attribute of every type, all optional.
let everyType = Schema(version: 1, entities: [
    EntitySchema("Thing", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("b", .bool, optional: true), Attribute("i", .int, optional: true),
        Attribute("d", .double, optional: true), Attribute("s", .string, optional: true),
        Attribute("y", .bytes, optional: true), Attribute("t", .date, optional: true),
        Attribute("u", .uuid, optional: true),
    ]),
])

func roundTrip(_ record: Record, _ entity: EntitySchema, in schema: Schema) throws -> Record {
    let line = JSONLineCodec.encode(record, of: entity)
    #expect(!line.contains(0x0A), "a line never holds a newline")
    return try JSONLineCodec.decode(line, schema: schema, lineNumber: 1).record
}

/// Bit-exact equality: `Value`'s `==` takes -0.0 for 0.0.
func identical(_ a: Record, _ b: Record, _ entity: EntitySchema) -> Bool {
    entity.attributes.allSatisfy { attribute in
        switch (a[attribute.name], b[attribute.name]) {
        case let (.double(x), .double(y)): return x.bitPattern == y.bitPattern
        case let (x, y): return x == y
        }
    }
}

@Test func everyEdgeValueRoundTripsBitForBit() throws {
    let entity = everyType.entities[0]
    let doubles: [Double] = [-0.0, 0.0, .infinity, -.infinity, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
                             .leastNormalMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 0.1,
                             1e300, 9_007_199_254_740_992, 123_456_789.123_456_789]
    let strings = ["", "\u{0}", "a\u{0}b", "e\u{301}", "\u{E9}", "\"\\/\n\r\t\u{8}\u{C}\u{1F}\u{7F}", "\u{10FFFF}",
                   "\u{1F600}", "\u{FEFF}x", "\u{2028}\u{2029}"]
    let dates: [Int64] = [0, -1, 1, 1_700_000_000_123_456, -62_135_596_800_000_000, -62_135_596_800_000_001,
                          253_402_300_799_999_999, 253_402_300_800_000_000, .max, .min]
    var n: Int64 = 0
    func check(_ record: Record) throws {
        var full = record
        full["id"] = .int(n)
        for attribute in entity.attributes where full[attribute.name] == .null { full[attribute.name] = .null }
        n += 1
        let back = try roundTrip(full, entity, in: everyType)
        #expect(identical(back, full, entity), "\(full) came back as \(back)")
        // A compact record of the same values (what SQLite and LMDB return) writes the same line.
        var arena = CompactArena()
        let compact = arena.record(layout: entity.layout, values: entity.attributes.map { full[$0.name] })
        #expect(compact.map { JSONLineCodec.encode($0, of: entity) } == JSONLineCodec.encode(full, of: entity),
                "the compact form of \(full)")
    }
    for d in doubles { try check(["d": .double(d)]) }
    for s in strings { try check(["s": .string(s)]) }
    for t in dates { try check(["t": .date(Timestamp(microsecondsSinceEpoch: t))]) }
    for i: Int64 in [.min, .min + 1, -1, 0, 1, .max] { try check(["i": .int(i)]) }
    for y: [UInt8] in [[], [0], [0xFF], Array(0...255)] { try check(["y": .bytes(y)]) }
    try check(["b": .bool(true), "u": .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)))])
    try check(["b": .bool(false), "s": .string(""), "y": .bytes([])])
    // Empty and null stay apart.
    let empty = try roundTrip(["id": 1, "s": "", "y": .bytes([]), "b": .null, "i": .null, "d": .null, "t": .null,
                               "u": .null], entity, in: everyType)
    #expect(empty["s"] == .string("") && empty["y"] == .bytes([]) && empty["i"] == .null)
}

@Test func theEdgeDomainAndTheSuiteItemsRoundTrip() throws {
    for (name, records) in EdgeDomain.items(200, seed: 4) {
        let entity = try #require(EdgeDomain.schema.entity(named: name))
        for record in records {
            let back = try roundTrip(record, entity, in: EdgeDomain.schema)
            #expect(identical(back, record, entity), "\(record) came back as \(back)")
        }
    }
    let item = try #require(Fixtures.schema.entity(named: "Item"))
    for record in Fixtures.items(300) {
        #expect(identical(try roundTrip(record, item, in: Fixtures.schema), record, item))
    }
}

@Test func randomDoublesAndStringsRoundTrip() async {
    let entity = everyType.entities[0]
    let input = Generator<(UInt64, [UInt32]), [(UInt64, [UInt32])]>(
        run: { rng in
            (rng.next(), (0..<Int(rng.next() % 12)).map { _ in UInt32(truncatingIfNeeded: rng.next() % 0x110000) })
        },
        shrink: { _ in [] })
    await propertyCheck(count: 2_000, input: input) { bits, scalars in
        let d = Double(bitPattern: bits)
        let text = String(String.UnicodeScalarView(scalars.compactMap(Unicode.Scalar.init)))
        var record: Record = ["id": 1, "s": .string(text), "d": d.isNaN ? .null : .double(d)]
        for attribute in entity.attributes where record[attribute.name] == .null { record[attribute.name] = .null }
        let back = try roundTrip(record, entity, in: everyType)
        #expect(identical(back, record, entity), "\(record) came back as \(back)")
    }
}

@Test func theSameItemAlwaysGivesTheSameBytes() {
    let entity = everyType.entities[0]
    let record: Record = ["id": 7, "b": true, "i": -3, "d": -0.0, "s": "x", "y": .bytes([1, 2]),
                          "t": .date(Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_001)),
                          "u": .uuid(UUID(uuid: (255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)))]
    let line = String(decoding: JSONLineCodec.encode(record, of: entity), as: UTF8.self)
    #expect(line == #"{"entity":"Thing","item":{"id":7,"b":true,"i":-3,"d":-0.0,"s":"x","y":"AQI=","#
        + #""t":"2023-11-14T22:13:20.000001Z","u":"ff000000-0000-0000-0000-000000000001"}}"#)
}

@Test func badLinesAreOneLineErrorsNamingTheLine() {
    let cases: [(String, String)] = [
        (#"{"entity":"Thing","item":{"id":1"#, "not valid JSON"),
        (#"{"entity":"Other","item":{"id":1}}"#, "unknown entity 'Other'"),
        (#"{"entity":"Thing","item":{"id":"one","b":null,"i":null,"d":null,"s":null,"y":null,"t":null,"u":null}}"#,
         "'Thing.id' holds the string \"one\", not a int"),
        (#"{"entity":"Thing","item":{"id":1}}"#, "lacks attribute 'b'"),
        (#"{"entity":"Thing","item":{"id":1,"zz":2}}"#, "has no attribute 'zz'"),
        (#"{"entity":"Thing","item":{"id":9223372036854775808,"b":null,"i":null,"d":null,"s":null,"y":null,"t":null,"u":null}}"#,
         "not a int"),
        (#"{"entity":"Thing","item":{"id":1,"b":null,"i":null,"d":1e999,"s":null,"y":null,"t":null,"u":null}}"#,
         "not a double"),
        ("{\"entity\":\"Thing\",\"item\":{\"s\":\"\u{1}\"}}", "control character"),
        (#"{"entity":"Thing","item":{"s":"\ud800"}}"#, "lone surrogate"),
        ("", "unexpected end"),
    ]
    for (line, naming) in cases {
        do {
            _ = try JSONLineCodec.decode(Array(line.utf8), schema: everyType, lineNumber: 42)
            Issue.record("\(line) decoded")
        } catch let error as StoreError {
            #expect(error.code == .corrupt)
            #expect(error.message.hasPrefix("line 42: ") && error.message.contains(naming), "\(error.message)")
            #expect(!error.message.contains("\n"))
        } catch {
            Issue.record("\(error)")
        }
    }
    // Bytes that are not UTF-8 inside a string.
    var bad = Array(#"{"entity":"Thing","item":{"s":""#.utf8)
    bad += [0xFF, 0x22, 0x7D, 0x7D]
    #expect(throws: StoreError.self) { try JSONLineCodec.decode(bad, schema: everyType, lineNumber: 3) }
}

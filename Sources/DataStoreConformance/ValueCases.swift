import DataStoreAPI
import Foundation

enum ValueCases {
    /// Writes each value into `attribute` of its own item, then checks every one reads back equal
    /// (bit for bit), before and after reopening the store.
    static func roundTrip(_ c: ConformanceContext, _ attribute: String, _ values: [Value]) throws {
        let store = try c.open()
        try store.writeSync { w in
            for (i, v) in values.enumerated() {
                try w.insert(["id": .int(Int64(i)), "name": "v", attribute: v], into: "Item")
            }
        }
        for (i, v) in values.enumerated() {
            let got = try store.read { try $0.get("Item", key: .int(Int64(i))) }?[attribute]
            c.expectEqual(got, v, "\(attribute) value \(v) did not round-trip")
        }
        try store.close()
        let reopened = try c.open()
        let all = try reopened.read { try $0.fetch(FetchRequest("Item")) }.map { $0[attribute] }
        c.expectEqual(all, values, "\(attribute) values after reopening")
    }

    static func intExtremesRoundTrip(_ c: ConformanceContext) throws {
        try roundTrip(c, "score", [.int(.min), .int(.max), .int(0), .int(-1), .int(1 << 53 + 1)])
    }

    static func doubleEdgesRoundTripBitForBit(_ c: ConformanceContext) throws {
        try roundTrip(
            c, "ratio",
            [
                .double(-0.0), .double(0.0), .double(.infinity), .double(-.infinity),
                .double(.greatestFiniteMagnitude), .double(-.greatestFiniteMagnitude),
                .double(.leastNonzeroMagnitude), .double(.pi), .double(1.0),
                .double(-2.0), .double(9_007_199_254_740_992.0.nextUp),
            ])
    }

    static func unicodeStringsRoundTripUnnormalized(_ c: ConformanceContext) throws {
        try roundTrip(
            c, "label",
            [
                .string("\u{E9}"), .string("e\u{301}"), .string("a\u{0}b\u{0}"),
                .string("\u{1F600}\u{200D}"), .string("\u{FEFF}x"), .string("\u{10FFFF}"),
                .string(String(repeating: "\u{1F600}", count: 1000)),
            ])
    }

    static func precomposedAndDecomposedAreDifferentKeysAndValues(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { w in
            try w.insert(["key": "\u{E9}", "note": "\u{E9}"], into: "Keyed")
            try w.insert(["key": "e\u{301}", "note": "e\u{301}"], into: "Keyed")
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 2)
        let matched = try store.read {
            try $0.fetch(FetchRequest("Keyed", filter: Field("note") == "\u{E9}"))
        }
        c.expectEqual(matched.map(\.["key"]), [.string("\u{E9}")])
    }

    static func emptyStringAndNullAreDistinct(_ c: ConformanceContext) throws {
        try roundTrip(c, "label", [.string(""), .null, .string(" ")])
        let store = try c.open()
        c.expectEqual(try store.read { try $0.count(FetchRequest("Item", filter: Field("label") == "")) }, 1)
        c.expectEqual(try store.read { try $0.count(FetchRequest("Item", filter: Field("label").isNull)) }, 1)
    }

    static func emptyBytesAndNullAreDistinct(_ c: ConformanceContext) throws {
        try roundTrip(c, "blob", [.bytes([]), .null, .bytes([0]), .bytes([0, 0, 255])])
    }

    static func largeBytesRoundTrip(_ c: ConformanceContext) throws {
        var rng = SplitMix64(seed: 7)
        let big = (0..<(3 << 20)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        try roundTrip(c, "blob", [.bytes(big), .bytes(Array(big.prefix(4097)))])
    }

    static func datesRoundToWholeMicroseconds(_ c: ConformanceContext) throws {
        let date = Date(timeIntervalSince1970: 1_700_000_000.123_456_7)
        let stamp = try Timestamp(date)
        c.expectEqual(stamp.microsecondsSinceEpoch, 1_700_000_000_123_457)
        try roundTrip(
            c, "when",
            [
                .date(stamp), .date(Timestamp(microsecondsSinceEpoch: .min)),
                .date(Timestamp(microsecondsSinceEpoch: .max)),
                .date(Timestamp(microsecondsSinceEpoch: -1)),
            ])
        c.expectError(.invalidValue, naming: "date") { _ = try Timestamp(Date(timeIntervalSince1970: 1e300)) }
    }

    static func uuidsAndBoolsRoundTrip(_ c: ConformanceContext) throws {
        try roundTrip(
            c, "ref",
            [
                .uuid(UUID()), .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
                .null,
            ])
        let store = try c.open()
        try store.writeSync { w in
            try w.save(["id": 0, "name": "t", "flag": true], into: "Item")
            try w.save(["id": 1, "name": "f", "flag": false], into: "Item")
        }
        c.expectEqual(
            try store.read { try $0.fetch(FetchRequest("Item")).map(\.["flag"]) }, [true, false, nil])
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Values", "intExtremesRoundTrip", intExtremesRoundTrip),
        ConformanceCase("Values", "doubleEdgesRoundTripBitForBit", doubleEdgesRoundTripBitForBit),
        ConformanceCase("Values", "unicodeStringsRoundTripUnnormalized", unicodeStringsRoundTripUnnormalized),
        ConformanceCase(
            "Values", "precomposedAndDecomposedAreDifferentKeysAndValues",
            precomposedAndDecomposedAreDifferentKeysAndValues),
        ConformanceCase("Values", "emptyStringAndNullAreDistinct", emptyStringAndNullAreDistinct),
        ConformanceCase("Values", "emptyBytesAndNullAreDistinct", emptyBytesAndNullAreDistinct),
        ConformanceCase("Values", "largeBytesRoundTrip", largeBytesRoundTrip),
        ConformanceCase("Values", "datesRoundToWholeMicroseconds", datesRoundToWholeMicroseconds),
        ConformanceCase("Values", "uuidsAndBoolsRoundTrip", uuidsAndBoolsRoundTrip),
    ]
}

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

    /// Texts and blobs of sizes around the points where a backend may change how it passes them
    /// to its engine (none, a few bytes, a kilobyte, past 16 KiB in one row), several in one
    /// row and sizes alternating from row to row, written in one transaction, read back whole
    /// and found by equality filters that carry them.
    static func textsAndBlobsOfEverySizeRoundTripInRowsAndFilters(_ c: ConformanceContext) throws {
        let sizes = [0, 1, 15, 16, 255, 1023, 1024, 1025, 4096, 16_383, 16_385, 20_000]
        var rng = SplitMix64(seed: 21)
        func text(_ n: Int) -> String {
            String(decoding: (0..<n).map { _ in UInt8(0x21 + rng.next() % 90) }, as: UTF8.self)
        }
        var items: [Record] = []
        for (i, size) in sizes.enumerated() {
            let other = sizes[(i * 7 + 3) % sizes.count]
            items.append([
                "id": .int(Int64(i)), "name": .string(text(size) + "#\(i)"), "label": .string(text(other)),
                "code": .string(text(sizes[(i + 5) % sizes.count])),
                "blob": .bytes((0..<other).map { _ in UInt8(truncatingIfNeeded: rng.next()) }),
                "ref": .uuid(UUID()),
            ])
        }
        let store = try c.open()
        try store.writeSync { w in
            for item in items { try w.insert(item, into: "Item") }
        }
        try store.read { r in
            let fetched = try r.fetch(FetchRequest("Item"))
            c.expectEqual(fetched.count, items.count, "items of every text and blob size")
            for item in items {
                let got = try r.get("Item", key: item["id"])
                for name in ["name", "label", "code", "blob", "ref"] {
                    c.expectEqual(got?[name], item[name], "\(name) of item \(item["id"]) read back")
                }
                let found = try r.fetch(FetchRequest("Item", filter: Field("name") == item["name"]))
                c.expectEqual(found.map(\.["id"]), [item["id"]], "item \(item["id"]) found by its name")
                let byBoth = try r.count(FetchRequest("Item", filter: Field("label") == item["label"] && Field("blob") == item["blob"]))
                c.expect(byBoth >= 1, "item \(item["id"]) found by its label and blob")
            }
        }
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
        ConformanceCase(
            "Values", "textsAndBlobsOfEverySizeRoundTripInRowsAndFilters",
            textsAndBlobsOfEverySizeRoundTripInRowsAndFilters),
        ConformanceCase("Values", "datesRoundToWholeMicroseconds", datesRoundToWholeMicroseconds),
        ConformanceCase("Values", "uuidsAndBoolsRoundTrip", uuidsAndBoolsRoundTrip),
    ]
}

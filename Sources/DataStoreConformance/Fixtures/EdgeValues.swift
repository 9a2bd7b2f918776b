import DataStoreAPI
import Foundation

extension Fixtures {
    /// Items of the fixture schema at the edges of the value domain, for migration round trips:
    /// Int64 and double extremes, -0.0, infinity, the smallest subnormal, NUL in a string,
    /// unnormalized Unicode, empty versus null, a 300 KB blob, dates at the Int64 microsecond
    /// extremes, keys that are empty, differently normalized, hold NUL or are as long as allowed,
    /// and 50 random uuid keys.
    public static func writeEdgeValues(into store: any DataStore) throws {
        try store.writeSync { w in
            let edges: [Record] = [
                ["id": 100_000, "name": "", "score": .int(.min), "ratio": -0.0, "blob": .bytes([])],
                ["id": 100_001, "name": "e\u{301}", "score": .int(.max), "ratio": .double(.infinity), "label": ""],
                ["id": 100_002, "name": "a\u{0}b", "ratio": .double(-.greatestFiniteMagnitude),
                 "blob": .bytes((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
                 "when": .date(Timestamp(microsecondsSinceEpoch: .min))],
                ["id": .int(.min), "name": .string(String(repeating: "\u{1F600}", count: 400)),
                 "ratio": .double(.leastNonzeroMagnitude)],
            ]
            for record in edges { try w.insert(record, into: "Item") }
            for key in ["", "\u{E9}", "e\u{301}", "a\u{0}", String(repeating: "k", count: Limits.maxStringKeyBytes)] {
                try w.insert(["key": .string(key), "value": .int(Int64(key.utf8.count)), "note": .string(key)], into: "Keyed")
            }
            for _ in 0..<50 { try w.insert(["id": .uuid(UUID()), "payload": .bytes([1, 2])], into: "Ident") }
        }
    }
}

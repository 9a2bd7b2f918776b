import DataStoreAPI
import Foundation

/// The schema and data the suite runs on.
public enum Fixtures {
    /// `Item` (int keys, every value type, a non-unique, a unique and an optional index),
    /// `Keyed` (string keys, a default), `Ident` (uuid keys).
    public static let schema = Schema(version: 1, entities: [
        EntitySchema("Item", primaryKey: "id", attributes: [
            Attribute("id", .int),
            Attribute("name", .string),
            Attribute("label", .string, optional: true),
            Attribute("score", .int, optional: true),
            Attribute("ratio", .double, optional: true),
            Attribute("flag", .bool, optional: true),
            Attribute("blob", .bytes, optional: true),
            Attribute("when", .date, optional: true),
            Attribute("ref", .uuid, optional: true),
            Attribute("code", .string, optional: true),
        ], indexes: [
            Index("byName", on: ["name"]),
            Index("byScore", on: ["score"]),
            Index("byCode", on: ["code"], unique: true),
        ]),
        EntitySchema("Keyed", primaryKey: "key", attributes: [
            Attribute("key", .string),
            Attribute("value", .int, default: .int(0)),
            Attribute("note", .string, optional: true),
        ], indexes: [Index("byValue", on: ["value"])]),
        EntitySchema("Ident", primaryKey: "id", attributes: [
            Attribute("id", .uuid),
            Attribute("payload", .bytes, optional: true),
        ]),
    ])

    /// Strings chosen to break any sort that is not by UTF-8 bytes: case, precomposed and
    /// decomposed accents, NUL, emoji, the empty string, shared prefixes.
    static let names = ["alpha", "Alpha", "beta", "\u{E9}", "e\u{301}", "zeta", "Zeta", "", "a\u{0}b", "a",
                        "\u{DF}ig", "\u{1F600}", "apple", "Apple pie", "APPLE"]
    static let ratios: [Value] = [.double(-1.5), .double(-0.0), .double(0.0), .double(2.5), .double(.infinity),
                                  .double(-.infinity), .double(Double.leastNormalMagnitude / 4), .null]
    static let refs: [Value] = [.uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1))),
                                .uuid(UUID(uuid: (255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))), .null]

    /// A complete `Item` record; every attribute present so that it equals what a store returns.
    static func item(_ id: Int64, using rng: inout SplitMix64) -> Record {
        func pick<T>(_ values: [T]) -> T { values[Int(rng.next() % UInt64(values.count))] }
        let score: Value = rng.next() % 5 == 0 ? .null : .int(Int64(rng.next() % 11) - 5)
        let label: Value = rng.next() % 4 == 0 ? .null : .string(pick(names))
        let flag: Value = pick([.bool(true), .bool(false), .null])
        let blob: Value = pick([.bytes([]), .bytes([0, 1, 2]), .bytes([255]), .null])
        let when: Value = pick([.date(Timestamp(microsecondsSinceEpoch: -1_000_000)),
                                .date(Timestamp(microsecondsSinceEpoch: 1_700_000_000_123_456)), .null,
                                .date(Timestamp(microsecondsSinceEpoch: .min)),
                                .date(Timestamp(microsecondsSinceEpoch: .max))])
        return [
            "id": .int(id), "name": .string(pick(names)), "label": label, "score": score,
            "ratio": pick(ratios), "flag": flag, "blob": blob, "when": when, "ref": pick(refs),
            "code": rng.next() % 3 == 0 ? .string("code-\(id)") : .null,
        ]
    }

    /// `count` items with ids spread over negative and positive values.
    public static func items(_ count: Int, seed: UInt64 = 1) -> [Record] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { item(Int64($0 * 7 % count) - Int64(count / 2), using: &rng) }
    }

    /// Inserts `items` in one write.
    public static func load(_ items: [Record], into store: any DataStore) throws {
        try store.writeSync { writer in
            for item in items { try writer.insert(item, into: "Item") }
        }
    }
}

/// A small, seeded, portable random number generator (SplitMix64).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

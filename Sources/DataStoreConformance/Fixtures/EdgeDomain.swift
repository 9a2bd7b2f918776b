import DataStoreAPI
import Foundation

/// Data and requests from the edges of the value domain (DESIGN section 9): strings and bytes
/// holding NUL and 0xFF, values that are proper prefixes of a query's bounds, primary keys whose
/// encodings begin with 0x00 and 0xFF, unnormalized Unicode, -0.0 and the infinities, Int64
/// extremes and `Int.max` offsets and limits.
///
/// Three entities with the same attributes and different primary-key types, each indexed on
/// the strings and bytes that the range plans of a backend may use.
public enum EdgeDomain {
    static let attributeNames = ["s", "b", "t", "n", "d", "u"]
    static let stringAttributes: Set<String> = ["s", "t", "u"]

    static func entity(_ name: String, key: ValueType) -> EntitySchema {
        EntitySchema(
            name, primaryKey: "id",
            attributes: [
                Attribute("id", key),
                Attribute("s", .string, optional: true),
                Attribute("b", .bytes, optional: true),
                Attribute("t", .string, optional: true),
                Attribute("n", .int, optional: true),
                Attribute("d", .double, optional: true),
                Attribute("u", .string, optional: true),
            ],
            indexes: [
                Index("byS", on: ["s"]),
                Index("byB", on: ["b"]),
                Index("byU", on: ["u"], unique: true),
                Index("bySN", on: ["s", "n"]),
            ])
    }

    /// `EdgeInt` (int keys), `EdgeText` (string keys), `EdgeUUID` (uuid keys).
    public static let schema = Schema(
        version: 1,
        entities: [
            entity("EdgeInt", key: .int), entity("EdgeText", key: .string), entity("EdgeUUID", key: .uuid),
        ])

    static let entityNames = schema.entities.map(\.name)

    /// Pieces that strings are built from: every pair of them is a test of byte order.
    static let stringPieces = [
        "", "\u{0}", "a", "b", "A", "ab", "\u{7F}", "\u{80}", "\u{E9}", "e\u{301}",
        "\u{FFFF}", "\u{10FFFF}", "\u{0}\u{0}", "Z", "_",
    ]
    static let bytePieces: [[UInt8]] = [
        [], [0x00], [0xFF], [0x01], [0x7F, 0x80], [0xFF, 0x00], [0x00, 0x00],
    ]
    static let ints: [Int64] = [.min, .min + 1, -256, -1, 0, 1, 255, 256, .max - 1, .max]
    static let doubles: [Double] = [
        -0.0, 0.0, .infinity, -.infinity, .leastNonzeroMagnitude,
        -.leastNonzeroMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
        1.5, -1.5, 9_007_199_254_740_994, 9.223372036854776e18,
    ]

    static func pick<T>(_ values: [T], _ rng: inout some RandomNumberGenerator) -> T {
        values[Int(rng.next() % UInt64(values.count))]
    }

    static func chance(_ percent: UInt64, _ rng: inout some RandomNumberGenerator) -> Bool {
        rng.next() % 100 < percent
    }

    static func string(_ rng: inout some RandomNumberGenerator) -> String {
        (0..<Int(rng.next() % 4)).map { _ in pick(stringPieces, &rng) }.joined()
    }

    static func bytes(_ rng: inout some RandomNumberGenerator) -> [UInt8] {
        (0..<Int(rng.next() % 4)).flatMap { _ in pick(bytePieces, &rng) }
    }

    static func int(_ rng: inout some RandomNumberGenerator) -> Int64 {
        switch rng.next() % 4 {
        case 0: return pick(ints, &rng)
        case 1: return Int64.max - Int64(rng.next() % 1_000)
        case 2: return Int64.min + Int64(rng.next() % 1_000)
        default: return Int64(bitPattern: rng.next())
        }
    }

    /// A uuid whose bytes start with 0x00 or 0xFF half of the time.
    static func uuid(_ rng: inout some RandomNumberGenerator) -> UUID {
        var bytes = (0..<16).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        switch rng.next() % 4 {
        case 0: bytes[0] = 0x00
        case 1: bytes[0] = 0xFF
        default: break
        }
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    static func key(for entity: String, _ rng: inout some RandomNumberGenerator) -> Value {
        switch entity {
        case "EdgeInt": return .int(int(&rng))
        case "EdgeText": return .string(string(&rng))
        default: return .uuid(uuid(&rng))
        }
    }

    /// A value of the attribute's type from the edges, or null.
    static func value(_ attribute: String, _ rng: inout some RandomNumberGenerator) -> Value {
        if chance(15, &rng) { return .null }
        switch attribute {
        case "s", "t", "u": return .string(string(&rng))
        case "b": return .bytes(bytes(&rng))
        case "n": return .int(int(&rng))
        default: return .double(pick(doubles, &rng))
        }
    }

    /// A complete item (every attribute present, as a store returns it).
    static func item(_ entity: String, key: Value, _ rng: inout some RandomNumberGenerator) -> Record {
        var record: Record = ["id": key]
        for name in attributeNames where name != "u" { record[name] = value(name, &rng) }
        record["u"] = .null
        return record
    }

    /// `count` items per entity with distinct keys, and distinct `u` values where not null.
    public static func items(_ count: Int, seed: UInt64) -> [String: [Record]] {
        var rng = SplitMix64(seed: seed)
        var result: [String: [Record]] = [:]
        for entity in entityNames {
            var keys = Set<Value>()
            var uniques = Set<Value>()
            var records: [Record] = []
            var attempts = 0
            while records.count < count && attempts < count * 20 {
                attempts += 1
                let key = key(for: entity, &rng)
                guard keys.insert(key).inserted else { continue }
                var record = item(entity, key: key, &rng)
                let u = value("u", &rng)
                if u.isNull || uniques.insert(u).inserted { record["u"] = u }
                records.append(record)
            }
            result[entity] = records
        }
        return result
    }

    /// A bound near what is stored: a stored value, the same value one step past it (a string or
    /// bytes value extended by NUL, 0xFF or a piece, or cut short; an int or double next to it),
    /// or a value from the edges.
    static func bound(
        _ attribute: String, near stored: [Value], _ rng: inout some RandomNumberGenerator
    ) -> Value {
        let roll = rng.next() % 10
        if roll < 7, !stored.isEmpty {
            let base = pick(stored, &rng)
            if roll < 3 { return base }
            switch base {
            case .string(let s):
                switch rng.next() % 4 {
                case 0: return .string(s + "\u{0}")
                case 1: return .string(s + pick(stringPieces, &rng))
                case 2: return .string(String(s.unicodeScalars.dropLast().map(Character.init)))
                default: return .string(s + "\u{FFFF}")
                }
            case .bytes(let b):
                switch rng.next() % 3 {
                case 0: return .bytes(b + [0x00])
                case 1: return .bytes(b + [0xFF])
                default: return .bytes(Array(b.dropLast()))
                }
            case .int(let i): return .int(rng.next() % 2 == 0 ? i &+ 1 : i &- 1)
            case .double(let d): return .double(rng.next() % 2 == 0 ? d.nextUp : d.nextDown)
            case .uuid: return .uuid(uuid(&rng))
            default: return base
            }
        }
        if attribute == "id" { return .null }
        return value(attribute, &rng)
    }
}

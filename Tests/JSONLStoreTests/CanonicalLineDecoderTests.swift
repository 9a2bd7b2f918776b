import DataStoreAPI
import DataStoreConformance
import Foundation
@testable import JSONLStore
import Testing

/// The canonical decoder (the import's fast path) against the general parser: on every line the
/// codec writes, it decodes the same item, bit for bit, and it gives way on every line it does
/// not handle exactly as the general parser does.
@Suite struct CanonicalLineDecoderTests {
    /// Lines of every edge value and of the suite's items, each with its schema.
    static func encodedLines() -> [(line: [UInt8], schema: Schema)] {
        var lines: [(line: [UInt8], schema: Schema)] = []
        for (name, records) in EdgeDomain.items(300, seed: 11) {
            let entity = EdgeDomain.schema.entity(named: name)!
            lines += records.map { (JSONLineCodec.encode($0, of: entity), EdgeDomain.schema) }
        }
        let item = Fixtures.schema.entity(named: "Item")!
        lines += Fixtures.items(300).map { (JSONLineCodec.encode($0, of: item), Fixtures.schema) }
        let thing = everyType.entities[0]
        let values: [[String: Value]] = [
            ["i": .int(.min)], ["i": .int(.max)], ["i": .int(0)], ["d": .double(-0.0)], ["d": .double(.infinity)],
            ["d": .double(.leastNonzeroMagnitude)], ["d": .double(-.greatestFiniteMagnitude)],
            ["t": .date(Timestamp(microsecondsSinceEpoch: .min))], ["t": .date(Timestamp(microsecondsSinceEpoch: 1))],
            ["s": .string("é\u{10FFFF}")], ["s": .string("a\"b")], ["y": .bytes(Array(0...255))], ["b": .bool(false)],
            ["u": .uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)))],
        ]
        for (n, given) in values.enumerated() {
            var record = Record()
            for attribute in thing.attributes { record[attribute.name] = given[attribute.name] ?? .null }
            record["id"] = .int(Int64(n))
            lines.append((JSONLineCodec.encode(record, of: thing), everyType))
        }
        return lines
    }

    @Test func everyLineTheCodecWritesDecodesAsTheGeneralParserDecodesIt() throws {
        var fast = 0
        for (line, schema) in Self.encodedLines() {
            let general = try JSONLineCodec.decode(line, schema: schema, lineNumber: 1)
            guard let canonical = CanonicalLineDecoder(schema: schema).decode(line) else {
                // Only a string with an escape leaves the fast path.
                #expect(line.contains(UInt8(ascii: "\\")), "\(String(decoding: line, as: UTF8.self))")
                continue
            }
            fast += 1
            #expect(canonical.entity == general.entity)
            #expect(identical(canonical.record, general.record, general.entity),
                    "\(canonical.record) against \(general.record)")
        }
        #expect(fast > 500, "the fast path decoded \(fast) lines")
    }

    /// Damaged lines (a byte changed, dropped or added, from the characters JSON gives meaning
    /// to): the fast path decodes a line only when the general parser decodes it to the same item,
    /// and gives way on every line the general parser refuses.
    @Test func aDamagedLineIsDecodedAlikeOrLeftToTheGeneralParser() throws {
        var random = SplitMix64(seed: 45)
        let alphabet = Array(#"{}[]":,\-+.0123456789eEnulltruefalse Ia"#.utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xFF]
        var decodedAlike = 0
        var refused = 0
        let lines = Self.encodedLines()
        for round in 0..<20_000 {
            var (line, schema) = lines[round % lines.count]
            let at = Int(random.next() % UInt64(line.count))
            let byte = alphabet[Int(random.next() % UInt64(alphabet.count))]
            switch random.next() % 3 {
            case 0: line[at] = byte
            case 1: line.remove(at: at)
            default: line.insert(byte, at: at)
            }
            let canonical = CanonicalLineDecoder(schema: schema).decode(line)
            do {
                let general = try JSONLineCodec.decode(line, schema: schema, lineNumber: 1)
                if let canonical {
                    decodedAlike += 1
                    #expect(canonical.entity == general.entity && identical(canonical.record, general.record, general.entity),
                            "\(String(decoding: line, as: UTF8.self))")
                }
            } catch {
                refused += 1
                #expect(canonical == nil, "the fast path decoded a line the parser refuses: \(String(decoding: line, as: UTF8.self))")
            }
        }
        #expect(decodedAlike > 1_000 && refused > 1_000, "\(decodedAlike) decoded alike, \(refused) refused")
    }
}

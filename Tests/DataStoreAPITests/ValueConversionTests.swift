@_spi(Backend) import DataStoreAPI
import Foundation
import Testing

/// Dates at the ends of the Int64 microsecond range convert to text and back without trapping
/// (the floor division of `iso8601` overflowed at `Int64.min`; the JSON Lines codec's edge test
/// found it).
@Test(arguments: [Int64.min, .min + 1, -1, 0, 1, 999_999, -999_999, -1_000_000, .max - 1, .max])
func datesAtTheEdgesConvertToTextWithoutTrapping(_ micros: Int64) {
    let timestamp = Timestamp(microsecondsSinceEpoch: micros)
    let text = ValueConversion.iso8601Text(timestamp)
    #expect(text.hasSuffix("Z"))
    #expect(ValueConversion.convert(.date(timestamp), to: .string) == .string(text))
    // Inside years 1 to 9999 the text reads back to the same instant.
    if micros > -62_135_596_800_000_000 && micros < 253_402_300_800_000_000 {
        #expect(ValueConversion.parseISO8601Text(text) == timestamp, "\(text)")
    }
}

/// Every conversion the table defines, over values at the edges of each type's domain: it
/// never traps, and where it converts, converting back (where the table promises a way back)
/// gives the same value.
@Test func everyConversionOverTheDomainsEdgesComesBackOrRefuses() {
    let edges: [ValueType: [Value]] = [
        .int: [.int(.min), .int(.min + 1), .int(-(1 << 53) - 1), .int(-1), .int(0), .int(1), .int(1 << 53),
               .int((1 << 53) + 1), .int(1 << 62), .int(.max - 1), .int(.max)],
        .double: [.double(-.infinity), .double(-.greatestFiniteMagnitude), .double(-1.5), .double(-0.0), .double(0),
                  .double(.leastNonzeroMagnitude), .double(9_223_372_036_854_775_808), .double(.infinity)],
        .string: [.string(""), .string("0"), .string("-9223372036854775808"), .string("true"), .string("é"),
                  .string("e\u{301}"), .string("a\u{0}b"), .string("1970-01-01T00:00:00Z"),
                  .string("+294247-01-10T04:00:54.775807Z"), .string("-290308-12-21T19:59:05.224192Z"),
                  .string("+294247-01-10T04:00:54.775808Z"), .string("00000000-0000-0000-0000-000000000000")],
        .bool: [.bool(false), .bool(true)],
        .date: [.date(Timestamp(microsecondsSinceEpoch: .min)), .date(Timestamp(microsecondsSinceEpoch: -1)),
                .date(Timestamp(microsecondsSinceEpoch: 0)), .date(Timestamp(microsecondsSinceEpoch: 1_000_000)),
                .date(Timestamp(microsecondsSinceEpoch: .max))],
        .uuid: [.uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
                .uuid(UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)))],
        .bytes: [.bytes([]), .bytes([0xFF]), .bytes(Array("text".utf8)), .bytes([UInt8](repeating: 7, count: 16))],
    ]
    // The pairs whose way back the table promises for every value that converts.
    let reversible: Set<[ValueType]> = [[.int, .double], [.int, .string], [.int, .date], [.double, .string],
                                        [.bool, .int], [.bool, .string], [.date, .int], [.date, .string],
                                        [.uuid, .string], [.uuid, .bytes], [.string, .bytes]]
    for from in ValueType.allCases {
        for to in ValueType.allCases where from != to && ValueConversion.isDefined(from: from, to: to) {
            for value in edges[from] ?? [] {
                guard let converted = ValueConversion.convert(value, to: to) else { continue }
                #expect(converted.type == to, "\(value) to \(to): \(converted)")
                if reversible.contains([from, to]) {
                    #expect(ValueConversion.convert(converted, to: from) == value, "\(value) to \(to) and back")
                }
            }
        }
    }
    // Exactness, not a bound, decides int to double.
    #expect(ValueConversion.convert(.int(.min), to: .double) == .double(-9_223_372_036_854_775_808))
    #expect(ValueConversion.convert(.int((1 << 53) + 1), to: .double) == nil)
    #expect(ValueConversion.convert(.int(.max), to: .double) == nil)
    // A text one microsecond past the range has no date.
    #expect(ValueConversion.convert(.string("+294247-01-10T04:00:54.775808Z"), to: .date) == nil)
    #expect(ValueConversion.convert(.date(Timestamp(microsecondsSinceEpoch: 0)), to: .string)
            == .string("1970-01-01T00:00:00.000000Z"))
}

/// A wrong type's error names the attribute and the type, and shows at most 80 characters of
/// the value (a 64 KiB string is not copied into the message).
@Test func aTypeMismatchShowsTheValueBriefly() throws {
    let entity = EntitySchema("E", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("n", .int)])
    do {
        _ = try entity.checkValue(.string(String(repeating: "x", count: 65_536)), for: entity.attributes[1])
        Issue.record("a string was accepted for an int")
    } catch {
        #expect(error.code == .typeMismatch)
        #expect(error.message.contains("'E.n' is int") && error.message.contains("65538 bytes"), "\(error.message)")
        #expect(error.message.count < 200)
    }
}

import DataStoreAPI
import Foundation
import Testing

private let schema = Schema(version: 1, entities: [
    EntitySchema("User", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("score", .double, optional: true),
        Attribute("active", .bool), Attribute("joinedAt", .date), Attribute("token", .uuid, optional: true),
    ], relationships: [.toOne("company", to: "Company")]),
    EntitySchema("Company", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)]),
])
private let user = schema.entity(named: "User")!

@Test(arguments: [
    ("id == 3", Filter.compare("id", .equal, 3)),
    ("id = 3", .compare("id", .equal, 3)),
    ("score >= 2", .compare("score", .greaterOrEqual, .double(2))),
    ("name != 'O\\'Brien'", .compare("name", .notEqual, "O'Brien")),
    (#"name hasPrefix "A" and not active == true"#, .and([.hasPrefix("name", "A"), .not(.compare("active", .equal, true))])),
    ("id in [1, 2, -3] or score is null", .or([.among("id", [1, 2, -3]), .isNull("score")])),
    ("token is not null", .not(.isNull("token"))),
    (#"joinedAt < "2024-01-02T00:00:00Z""#,
     .compare("joinedAt", .less, .date(Timestamp(microsecondsSinceEpoch: 1_704_153_600_000_000)))),
    ("(id > 1 || id < -1) && name contains 'x'", .and([.or([.compare("id", .greater, 1), .compare("id", .less, -1)]),
                                                      .contains("name", "x")])),
    ("company.name == 'Acme'", .compare("company.name", .equal, "Acme")),
])
func aFilterWrittenAsTextReadsAsTheFilterItSays(_ text: String, _ expected: Filter) throws {
    #expect(try Filter(parsing: text, for: user, in: schema) == expected)
}

@Test(arguments: [
    ("", "a comparison expected"),
    ("ratng > 3", "no attribute 'ratng'"),
    ("active == 3", "'active' is a bool"),
    ("id == 'three'", "'id' is an int"),
    ("id >", "a value expected"),
    ("id == 3 and", "an attribute name expected"),
    ("(id == 3", "')' expected"),
    ("name == 'open", "unterminated string"),
    ("id ~ 3", "unexpected '~'"),
    ("id == 3 4", "unexpected number 4"),
    ("nope.name == 1", "no to-one relationship 'nope'"),
])
func aFilterThatCannotBeReadNamesWhatIsWrong(_ text: String, _ expected: String) {
    do {
        _ = try Filter(parsing: text, for: user, in: schema)
        Issue.record("'\(text)' should not parse")
    } catch {
        #expect(error.message.contains(expected), "\(text): \(error.message)")
    }
}

@Test func swiftValuesOfEveryStoredTypeStandForTheirValue() {
    let minimum = 3
    #expect((Field("id") >= minimum) == .compare("id", .greaterOrEqual, 3))
    let ratio = 0.5
    #expect((Field("score") < ratio) == .compare("score", .less, .double(0.5)))
    let flag = true
    #expect((Field("active") == flag) == .compare("active", .equal, true))
    let token = UUID()
    #expect((Field("token") == token) == .compare("token", .equal, .uuid(token)))
    let none: UUID? = nil
    #expect((Field("token") == none) == .compare("token", .equal, .null))
    let bytes = Data([1, 2])
    #expect((Field("blob") == bytes) == .compare("blob", .equal, .bytes([1, 2])))
    let date = Date(timeIntervalSince1970: 1.5)
    #expect((Field("joinedAt") > date) == .compare("joinedAt", .greater, .date(Timestamp(microsecondsSinceEpoch: 1_500_000))))
    #expect((Field("joinedAt") > Date.distantFuture.addingTimeInterval(1e15))
        == .compare("joinedAt", .greater, .date(Timestamp(microsecondsSinceEpoch: .max))),
            "a date past the store's range stands for its end")
    let name = "Ada"
    #expect(Value("\(name)!") == .string("Ada!"))
    #expect(Field("id").among([1, 2]) == .among("id", [1, 2]))
}

/// A date's text, written digit by digit, is the text `gmtime` and `String(format:)` give, over
/// the whole range and at its edges, and parses back to the same date.
@Test func aDatesTextIsWhatTheCLibraryGivesOverTheWholeRange() {
    func reference(_ t: Timestamp) -> String {
        let (quotient, remainder) = t.microsecondsSinceEpoch.quotientAndRemainder(dividingBy: 1_000_000)
        let seconds = remainder < 0 ? quotient - 1 : quotient
        let fraction = remainder < 0 ? remainder + 1_000_000 : remainder
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let year = Int(parts.tm_year) + 1900
        let yearText = (0...9999).contains(year) ? String(format: "%04d", year)
            : (year < 0 ? "-" : "+") + String(format: "%06d", abs(year))
        return yearText + String(format: "-%02d-%02dT%02d:%02d:%02d.%06dZ", Int(parts.tm_mon) + 1,
                                 Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec),
                                 Int(fraction))
    }
    var generator = SystemRandomNumberGenerator()
    var samples: [Int64] = [.min, .max, 0, -1, 1, -999_999, -1_000_000, -1_000_001, 951_782_400_000_000,
                            -62_135_596_800_000_000, -62_135_596_800_000_001, 253_402_300_799_999_999,
                            253_402_300_800_000_000]
    for _ in 0..<20_000 { samples.append(Int64.random(in: .min ... .max, using: &generator)) }
    for _ in 0..<20_000 { samples.append(Int64.random(in: -4_000_000_000_000_000...4_000_000_000_000_000, using: &generator)) }
    for micros in samples {
        let t = Timestamp(microsecondsSinceEpoch: micros)
        let text = ValueConversion.iso8601Text(t)
        #expect(text == reference(t), "\(micros)")
        #expect(ValueConversion.parseISO8601Text(text) == t, "\(micros): \(text)")
    }
}

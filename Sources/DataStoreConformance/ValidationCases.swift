import DataStoreAPI
import Foundation

enum ValidationCases {
    static func unknownEntityIsNamed(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.unknownEntity, naming: "Pancake") {
            _ = try store.read { try $0.get("Pancake", key: 1) }
        }
        c.expectError(.unknownEntity, naming: "Pancake") {
            try store.writeSync { try $0.insert(["id": 1], into: "Pancake") }
        }
    }

    static func unknownAttributeInRecordIsNamed(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.unknownAttribute, naming: "colour") {
            try store.writeSync { try $0.insert(["key": "a", "colour": "red"], into: "Keyed") }
        }
    }

    static func unknownAttributeInFilterOrSortIsNamed(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.unknownAttribute, naming: "colour") {
            _ = try store.read { try $0.fetch(FetchRequest("Keyed", filter: Field("colour") == "red")) }
        }
        c.expectError(.unknownAttribute, naming: "colour") {
            _ = try store.read { try $0.fetch(FetchRequest("Keyed", sort: [.ascending("colour")])) }
        }
    }

    /// Names are compared by their bytes: a Unicode look-alike of a name (KELVIN SIGN for `K`,
    /// which Swift's `String ==` takes for `K`) is an unknown name everywhere, never the name.
    static func aLookAlikeNameIsUnknown(_ c: ConformanceContext) throws {
        let kelvin = "\u{212A}"
        let schema = Schema(version: 1, entities: [
            EntitySchema("Kx", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("K", .int)]),
        ])
        let store = try c.open(schema, name: "lookalike")
        try store.writeSync { try $0.insert(["id": 1, "K": 7], into: "Kx") }
        c.expectEqual(try store.read { try $0.fetch(FetchRequest("Kx", filter: Field("K") == 7)) }.count, 1,
                      "the name itself")
        c.expectError(.unknownAttribute, naming: kelvin, "in a filter") {
            _ = try store.read { try $0.fetch(FetchRequest("Kx", filter: Field(kelvin) == 7)) }
        }
        c.expectError(.unknownAttribute, naming: kelvin, "in a sort") {
            _ = try store.read { try $0.fetch(FetchRequest("Kx", sort: [.ascending(kelvin)])) }
        }
        c.expectError(.unknownAttribute, naming: kelvin, "in a row") {
            try store.read { try $0.visit(FetchRequest("Kx")) { row in _ = try row.int(kelvin) } }
        }
        c.expectError(.unknownAttribute, naming: kelvin, "in a record") {
            try store.writeSync { try $0.insert(["id": 2, kelvin: 8], into: "Kx") }
        }
        c.expectError(.unknownEntity, naming: kelvin + "x", "as an entity") {
            _ = try store.read { try $0.get(kelvin + "x", key: 1) }
        }
        try store.close()
    }

    static func wrongTypeInRecordIsTypeMismatch(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.typeMismatch, naming: "value") {
            try store.writeSync { try $0.insert(["key": "a", "value": "five"], into: "Keyed") }
        }
        c.expectError(.typeMismatch, naming: "key") {
            try store.writeSync { try $0.insert(["key": 5], into: "Keyed") }
        }
        c.expectError(.typeMismatch, naming: "Keyed") { _ = try store.read { try $0.get("Keyed", key: 5) } }
    }

    static func wrongTypeInFilterIsTypeMismatchNotEmptyResult(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "a", "value": 5], into: "Keyed") }
        c.expectError(.typeMismatch, naming: "value") {
            _ = try store.read { try $0.fetch(FetchRequest("Keyed", filter: Field("value") == "5")) }
        }
        c.expectError(.typeMismatch, naming: "value") {
            _ = try store.read {
                try $0.count(FetchRequest("Keyed", filter: Field("value").among([1, "x"])))
            }
        }
    }

    static func nanIsRejectedOnWrite(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.invalidValue, naming: "NaN") {
            try store.writeSync {
                try $0.insert(["id": 1, "name": "n", "ratio": .double(.nan)], into: "Item")
            }
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Item")) }, 0)
    }

    static func nullForRequiredAttributeIsRejected(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.invalidValue, naming: "name") {
            try store.writeSync { try $0.insert(["id": 1], into: "Item") }
        }
        c.expectError(.invalidValue, naming: "name") {
            try store.writeSync { try $0.insert(["id": 1, "name": nil], into: "Item") }
        }
    }

    static func negativeOffsetOrLimitIsRejected(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.invalidArgument, naming: "Item") {
            _ = try store.read { try $0.fetch(FetchRequest("Item", limit: -1)) }
        }
        c.expectError(.invalidArgument, naming: "Item") {
            _ = try store.read { try $0.fetch(FetchRequest("Item", offset: -2)) }
        }
    }

    static func prefixOnNonStringAndFoldingNonStringAreTypeMismatch(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.typeMismatch, naming: "score") {
            _ = try store.read { try $0.fetch(FetchRequest("Item", filter: Field("score").hasPrefix("1"))) }
        }
        c.expectError(.typeMismatch, naming: "score") {
            _ = try store.read {
                try $0.fetch(FetchRequest("Item", sort: [.ascending("score", caseInsensitive: true)]))
            }
        }
    }

    static func invalidSchemaIsRejectedAtOpen(_ c: ConformanceContext) throws {
        let badKey = Schema(entities: [
            EntitySchema("E", primaryKey: "x", attributes: [Attribute("x", .double)])
        ])
        c.expectError(.invalidArgument, naming: "x") { _ = try c.open(badKey, name: "bad1") }
        let badName = Schema(entities: [
            EntitySchema(
                "has space", primaryKey: "id",
                attributes: [Attribute("id", .int)])
        ])
        c.expectError(.invalidArgument, naming: "has space") { _ = try c.open(badName, name: "bad2") }
        let badIndex = Schema(entities: [
            EntitySchema(
                "E", primaryKey: "id", attributes: [Attribute("id", .int)],
                indexes: [Index("i", on: ["nope"])])
        ])
        c.expectError(.unknownAttribute, naming: "nope") { _ = try c.open(badIndex, name: "bad3") }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Validation", "unknownEntityIsNamed", unknownEntityIsNamed),
        ConformanceCase("Validation", "unknownAttributeInRecordIsNamed", unknownAttributeInRecordIsNamed),
        ConformanceCase(
            "Validation", "unknownAttributeInFilterOrSortIsNamed", unknownAttributeInFilterOrSortIsNamed),
        ConformanceCase("Validation", "aLookAlikeNameIsUnknown", aLookAlikeNameIsUnknown),
        ConformanceCase("Validation", "wrongTypeInRecordIsTypeMismatch", wrongTypeInRecordIsTypeMismatch),
        ConformanceCase(
            "Validation", "wrongTypeInFilterIsTypeMismatchNotEmptyResult",
            wrongTypeInFilterIsTypeMismatchNotEmptyResult),
        ConformanceCase("Validation", "nanIsRejectedOnWrite", nanIsRejectedOnWrite),
        ConformanceCase(
            "Validation", "nullForRequiredAttributeIsRejected", nullForRequiredAttributeIsRejected),
        ConformanceCase("Validation", "negativeOffsetOrLimitIsRejected", negativeOffsetOrLimitIsRejected),
        ConformanceCase(
            "Validation", "prefixOnNonStringAndFoldingNonStringAreTypeMismatch",
            prefixOnNonStringAndFoldingNonStringAreTypeMismatch),
        ConformanceCase("Validation", "invalidSchemaIsRejectedAtOpen", invalidSchemaIsRejectedAtOpen),
    ]
}

import DataStoreAPI
import Foundation

enum PersistenceCases {
    static func dataSurvivesCloseAndReopen(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(40)
        try Fixtures.load(items, into: store)
        try store.writeSync { w in
            try w.insert(["key": "k", "value": 3], into: "Keyed")
            try w.setMetadata([7], forKey: "app.version")
        }
        let before = try store.read { try $0.fetch(FetchRequest("Item")) }
        try store.close()
        let reopened = try c.open()
        c.expectEqual(try reopened.read { try $0.fetch(FetchRequest("Item")) }, before)
        c.expectEqual(try reopened.read { try $0.get("Keyed", key: "k")?["value"] }, 3)
        c.expectEqual(try reopened.read { try $0.metadata(forKey: "app.version") }, [7])
    }

    /// A store the app releases without `close()` (an error thrown past it, a forgotten close)
    /// releases what it holds without trapping, and keeps every acknowledged commit.
    static func aStoreReleasedWithoutCloseKeepsItsCommitsAndReopens(_ c: ConformanceContext) throws {
        do {
            let store = try c.open()
            try Fixtures.load(Fixtures.items(20), into: store)
            _ = try store.read { try $0.count(FetchRequest("Item")) }
            store.enqueueWrite { try $0.insert(["key": "async"], into: "Keyed") }
            try store.waitForPendingWrites()
        }
        let reopened = try c.open()
        c.expectEqual(try reopened.read { try $0.count(FetchRequest("Item")) }, 20)
        c.expectEqual(try reopened.read { try $0.get("Keyed", key: "async") != nil }, true)
        try reopened.close()
    }

    static func reopeningWithAnotherSchemaThrowsSchemaMismatch(_ c: ConformanceContext) throws {
        try c.open().close()
        var changed = Fixtures.schema
        changed.entities[1].attributes.append(Attribute("extra", .int, optional: true))
        c.expectError(.schemaMismatch, naming: "Keyed.extra") { _ = try c.open(changed) }
        let store = try c.open()
        c.expectEqual(store.schema, Fixtures.schema, "the store is still usable with its own schema")
        try store.close()
        // A new version number with nothing changed needs no step; the older app is then refused.
        var bumped = Fixtures.schema
        bumped.version = 2
        let upgraded = try c.open(bumped)
        c.expectEqual(upgraded.schema.version, 2)
        try upgraded.close()
        c.expectError(.newerSchemaVersion, naming: "version 2") { _ = try c.open() }
    }

    static func openingWithoutASchemaUsesTheStoredOne(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "k"], into: "Keyed") }
        try store.close()
        let described = try c.open(nil)
        c.expectEqual(described.schema, Fixtures.schema)
        c.expectEqual(try described.read { try $0.count(FetchRequest("Keyed")) }, 1)
        c.expectError(.notFound) { _ = try c.open(nil, name: "nothing-here") }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Persistence", "dataSurvivesCloseAndReopen", dataSurvivesCloseAndReopen),
        ConformanceCase("Persistence", "aStoreReleasedWithoutCloseKeepsItsCommitsAndReopens",
                        aStoreReleasedWithoutCloseKeepsItsCommitsAndReopens),
        ConformanceCase(
            "Persistence", "reopeningWithAnotherSchemaThrowsSchemaMismatch",
            reopeningWithAnotherSchemaThrowsSchemaMismatch),
        ConformanceCase(
            "Persistence", "openingWithoutASchemaUsesTheStoredOne", openingWithoutASchemaUsesTheStoredOne),
    ]
}

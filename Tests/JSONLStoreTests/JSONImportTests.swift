import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import InMemoryStore
import JSONLStore
import LMDBStore
import SQLiteStore
import Testing

let userSchema = Schema(version: 1, entities: [
    EntitySchema("User", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("firstName", .string), Attribute("emailAddress", .string, optional: true),
        Attribute("createdAt", .date, optional: true), Attribute("score", .double, default: .double(0)),
        Attribute("isAdmin", .bool, default: .bool(false)),
    ], indexes: [Index("byEmail", on: ["emailAddress"], unique: true)]),
])

/// An API's users: inserts, updates, deletes (users no longer listed), snake_case keys, ISO 8601
/// and Unix-epoch dates, nulls, an unknown key, and five malformed objects.
let fixture = #"""
[
  {"id": 1, "first_name": "Ada", "email_address": "ada@example.com", "created_at": "2024-01-02T03:04:05.123456Z"},
  {"id": 2, "first_name": "Grace", "email_address": null, "created_at": 1700000000, "score": 9.5},
  {"id": 3, "first_name": "Linus", "created_at": 1700000000.25, "is_admin": true, "unknown_key": [1, 2]},
  {"id": 4, "first_name": "Updated", "email_address": "four@example.com"},
  {"id": 11},
  {"first_name": "No key"},
  {"id": "six", "first_name": "Text key"},
  {"id": 5, "first_name": 42},
  {"id": 1, "first_name": "Ada again"}
]
"""#

@Test(arguments: Kind.allCases)
func anAPIsJSONIsImportedWithSyncSemantics(_ kind: Kind) throws {
    let dir = try TemporaryDirectory()
    let store = try kind.open(dir, "users", userSchema)
    defer { try? store.close() }
    try store.writeSync { w in
        try w.insert(["id": 4, "firstName": "Old", "emailAddress": "old4@example.com", "score": 1.0], into: "User")
        try w.insert(["id": 9, "firstName": "Gone"], into: "User")
        try w.insert(["id": 5, "firstName": "Kept by its malformed object"], into: "User")
    }
    let input = dir.path("users.json")
    _ = FileManager.default.createFile(atPath: input, contents: Data(fixture.utf8))
    let rejects = dir.path("rejects.jsonl")
    let report = try JSONImport.run(input, into: store, entity: "User", rejects: rejects)
    #expect(report.objects == 9)
    #expect(report.inserted == 3)
    #expect(report.updated == 1)
    #expect(report.deleted == 0, "user 9, which the JSON no longer lists, is kept: two objects name no user")
    #expect(report.deletesSkipped?.contains("2 values name no User by its key, the first at value 6") == true,
            "\(report.deletesSkipped ?? "nil")")
    #expect(report.rejected.map(\.position) == [5, 6, 7, 8, 9], "\(report.rejected)")
    let reasons = report.rejected.map(\.reason)
    #expect(reasons.count == 5)
    if reasons.count == 5 {
        #expect(reasons[0].contains("firstName"), "a new user without a first name: \(reasons[0])")
        #expect(reasons[1].contains("no primary key"), "\(reasons[1])")
        #expect(reasons[2].contains("holds the string \"six\""), "\(reasons[2])")
        #expect(reasons[3].contains("holds the number 42"), "\(reasons[3])")
        #expect(reasons[4].contains("given by an earlier object"), "\(reasons[4])")
    }
    let users = try store.read { try $0.fetch(FetchRequest("User")) }
    #expect(users.map(\.["id"]) == [1, 2, 3, 4, 5, 9], "\(users.map(\.["id"]))")
    let byID = Dictionary(uniqueKeysWithValues: users.map { ($0["id"], $0) })
    #expect(byID[1]?["firstName"] == "Ada")
    #expect(byID[1]?["createdAt"] == .date(Timestamp(microsecondsSinceEpoch: 1_704_164_645_123_456)))
    #expect(byID[2]?["createdAt"] == .date(Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000)))
    #expect(byID[2]?["emailAddress"] == .null && byID[2]?["score"] == .double(9.5))
    #expect(byID[3]?["createdAt"] == .date(Timestamp(microsecondsSinceEpoch: 1_700_000_000_250_000)))
    #expect(byID[3]?["isAdmin"] == .bool(true) && byID[3]?["score"] == .double(0))
    #expect(byID[4]?["firstName"] == "Updated" && byID[4]?["score"] == .double(1.0),
            "an update changes only the attributes given")
    #expect(byID[5]?["firstName"] == "Kept by its malformed object",
            "an object rejected for a bad value still keeps its item from the delete pass")
    let lines = try String(contentsOfFile: rejects, encoding: .utf8).split(separator: "\n")
    #expect(lines.count == 5)
    #expect(lines.allSatisfy { $0.hasPrefix(#"{"position":"#) && $0.contains(#""object":"#) })
    // The same import again changes nothing.
    let again = try JSONImport.run(input, into: store, entity: "User")
    #expect(again.inserted == 0 && again.updated == 0 && again.deleted == 0 && again.unchanged == 4)
    // Sync's operation options.
    try store.writeSync { try $0.insert(["id": 10, "firstName": "Extra"], into: "User") }
    let keep = try JSONImport.run(input, into: store, entity: "User",
                                  options: JSONImport.Options(operations: [.insert, .update]))
    #expect(keep.deleted == 0)
    #expect(try store.read { try $0.get("User", key: 10) } != nil)
}

@Test func inputThatIsNotJSONImportsNothing() throws {
    let dir = try TemporaryDirectory()
    let store = try InMemoryStore(schema: userSchema)
    for (name, text) in [("truncated", #"[{"id": 1, "first_name": "A"}, {"id": 2"#), ("bad object", #"{"id": 1,,}"#), ("not JSON", "id,first_name\n1,Ada\n"),
                         ("lines", "{\"id\": 1, \"first_name\": \"A\"}\n{\"id\": 2,\n")] {
        let path = dir.path(name + ".json")
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        #expect(throws: StoreError.self) { try JSONImport.run(path, into: store, entity: "User") }
    }
    #expect(try store.read { try $0.count(FetchRequest("User")) } == 0)
}

/// An object that would break a unique index is rejected; the others of its batch are written.
@Test(arguments: Kind.allCases)
func anObjectThatBreaksAUniqueIndexIsRejectedAndItsBatchGoesOn(_ kind: Kind) throws {
    let dir = try TemporaryDirectory()
    let store = try kind.open(dir, "unique", userSchema)
    defer { try? store.close() }
    let input = dir.path("clash.json")
    _ = FileManager.default.createFile(atPath: input, contents: Data(#"""
        [{"id": 1, "first_name": "A", "email_address": "same@example.com"},
         {"id": 2, "first_name": "B", "email_address": "same@example.com"},
         {"id": 3, "first_name": "C"}]
        """#.utf8))
    let report = try JSONImport.run(input, into: store, entity: "User")
    #expect(report.inserted == 2)
    #expect(report.rejected.map(\.position) == [2])
    #expect(report.rejected.first?.reason.contains("byEmail") == true, "\(report.rejected)")
    #expect(try store.read { try $0.fetch(FetchRequest("User")).map(\.["id"]) } == [1, 3])
}

/// An import stopped after a batch keeps its checkpoint in the store; the same import run again
/// goes on from it and ends with the store and report an uninterrupted run gives. Another input
/// starts from the beginning.
@Test(arguments: Kind.allCases)
func anInterruptedImportGoesOnFromItsCheckpoint(_ kind: Kind) throws {
    let dir = try TemporaryDirectory()
    var objects: [String] = []
    for id in 1...230 {
        // Every 50th object clashes with the unique e-mail of the one before it.
        let email = id % 50 == 0 ? "user\(id - 1)@example.com" : "user\(id)@example.com"
        objects.append(#"{"id": \#(id), "first_name": "U\#(id)", "email_address": "\#(email)"}"#)
    }
    let input = dir.path("many.json")
    _ = FileManager.default.createFile(atPath: input, contents: Data(("[" + objects.joined(separator: ",\n") + "]").utf8))
    func seeded(_ name: String) throws -> any DataStore {
        let store = try kind.open(dir, name, userSchema)
        try store.writeSync { w in
            for id in [3, 500, 501] { try w.insert(["id": .int(Int64(id)), "firstName": "Before"], into: "User") }
        }
        return store
    }
    let options = JSONImport.Options(batchSize: 40)
    let whole = try seeded("whole")
    defer { try? whole.close() }
    let expected = try JSONImport.run(input, into: whole, entity: "User", options: options)
    #expect(expected.inserted == 225 && expected.updated == 1 && expected.deleted == 2 && expected.rejected.count == 4)

    let store = try seeded("stopped")
    defer { try? store.close() }
    var batches = 0
    do {
        _ = try JSONImport.run(input, into: store, entity: "User", options: options,
                               shouldStop: { batches += 1; return batches == 3 })
        Issue.record("the import did not stop")
    } catch let stopped as JSONImport.Interrupted {
        #expect(stopped.report.inserted + stopped.report.updated == 120 - 2, "three batches of 40, two refused")
    }
    #expect(try store.read { try $0.count(FetchRequest("User")) } == 3 + 120 - 1 - 2)
    let resumed = try JSONImport.run(input, into: store, entity: "User", options: options)
    #expect(resumed.resumedAfter == 120)
    var comparable = resumed
    comparable.resumedAfter = nil
    #expect(comparable == expected)
    #expect(try store.read { try $0.fetch(FetchRequest("User")) } == whole.read { try $0.fetch(FetchRequest("User")) })
    // Done: the checkpoint is gone, and the next run is a whole new one.
    let again = try JSONImport.run(input, into: store, entity: "User", options: options)
    #expect(again.resumedAfter == nil && again.unchanged == 226)
}

/// An item a self-cascade deletes with an item the input leaves out counts among the imported
/// entity's deletions (a category and its subcategories: leaving the top one out deletes three).
@Test(arguments: Kind.allCases)
func aSelfCascadeCountsAmongTheImportedEntitysDeletions(_ kind: Kind) throws {
    let schema = Schema(version: 1, entities: [
        EntitySchema("Category", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toOne("parent", to: "Category", inverse: "children"),
                                     .toMany("children", to: "Category", inverse: "parent", deleteRule: .cascade)]),
    ])
    let dir = try TemporaryDirectory()
    let store = try kind.open(dir, "categories", schema)
    defer { try? store.close() }
    try store.writeSync { w in
        try w.insert(["id": 1], into: "Category")
        try w.insert(["id": 2, "parent": 1], into: "Category")
        try w.insert(["id": 3, "parent": 2], into: "Category")
        try w.insert(["id": 4], into: "Category")
    }
    let input = dir.path("categories.json")
    _ = FileManager.default.createFile(atPath: input, contents: Data(#"[{"id": 4}]"#.utf8))
    let dry = try JSONImport.run(input, into: store, entity: "Category", options: JSONImport.Options(dryRun: true))
    let report = try JSONImport.run(input, into: store, entity: "Category")
    #expect(dry.deleted == 3 && report.deleted == 3, "dry run \(dry.deleted), run \(report.deleted)")
    #expect(try store.read { try $0.count(FetchRequest("Category")) } == 1)
}

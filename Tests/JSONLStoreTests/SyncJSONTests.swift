import DataStoreAPI
import DataStoreTestSupport
import Foundation
import InMemoryStore
import JSONLStore
import Testing

/// Sync's README examples, and export and import against each other and against a model of
/// Sync's semantics, on the in-memory, SQLite and LMDB backends (PostgreSQL runs them in its own
/// test target).
@Test(arguments: Kind.allCases, (SyncJSONCases.all + SyncRoundTripCases.all).map(\.name))
func syncsJSONCasesHoldOnEveryBackend(_ kind: Kind, _ name: String) throws {
    let dir = try TemporaryDirectory()
    let run = try #require((SyncJSONCases.all + SyncRoundTripCases.all).first { $0.name == name }).run
    try run({ name, schema in try kind.open(dir, name, schema) }, dir)
}

/// Sync's attribute mapping: acronyms, reserved names, remote keys for nested entities, and the
/// key forms of relationships.
@Test func jsonKeysMapOntoAttributesAndRelationshipsAsSyncMapsThem() throws {
    let dir = try TemporaryDirectory()
    let schema = Schema(version: 1, entities: [
        EntitySchema("User", primaryKey: "remoteID", attributes: [
            Attribute("remoteID", .int), Attribute("userID", .int, optional: true),
            Attribute("avatarURL", .string, optional: true), Attribute("userDescription", .string, optional: true),
            Attribute("userType", .string, optional: true), Attribute("firstName", .string, optional: true),
        ], relationships: [.toMany("notes", to: "Note", inverse: "author")]),
        EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("body", .string)],
                     relationships: [.toOne("author", to: "User", inverse: "notes")]),
    ])
    let store = try InMemoryStore(schema: schema)
    let path = dir.path("users.json")
    try Data(#"""
        [{"id": 1, "user_id": 7, "avatar_url": "https://x/a.png", "description": "d", "type": "admin",
          "firstName": "Ada", "notes": [{"id": 10, "text": "hello"}]}]
        """#.utf8).write(to: URL(fileURLWithPath: path))
    let report = try JSONImport.run(path, into: store, entity: "User",
                                    options: .init(mapping: ["Note.text": "body"]))
    #expect(report.rejected.isEmpty, "\(report.rejected)")
    let user = try #require(try store.read { try $0.get("User", key: 1) })
    #expect(user["userID"] == 7 && user["avatarURL"] == "https://x/a.png")
    #expect(user["userDescription"] == "d" && user["userType"] == "admin" && user["firstName"] == "Ada")
    let note = try #require(try store.read { try $0.get("Note", key: 10) })
    #expect(note["body"] == "hello" && note["author"] == 1)
    // A mapping that names what the entity does not have is refused before anything is read.
    #expect(throws: StoreError.self) {
        try JSONImport.run(path, into: store, entity: "User", options: .init(mapping: ["Note.text": "nope"]))
    }
}

import DataStoreAPI
import Foundation
import JSONLStore
import Testing

/// The examples of the Sync library's README, imported with ``JSONImport`` into a store of any
/// backend, each checking the store afterwards item by item and relationship by relationship.
public enum SyncJSONCases {
    /// Opens a new store of the backend under test, named `name`, with `schema`.
    public typealias Open = (_ name: String, _ schema: Schema) throws -> any DataStore

    /// Sync's demo model: users with a company, notes that belong to a user (deleted with it, and
    /// when its user's array no longer lists them) and tags shared by notes.
    public static let schema = Schema(version: 1, entities: [
        EntitySchema("User", primaryKey: "remoteID", attributes: [
            Attribute("remoteID", .int), Attribute("name", .string), Attribute("email", .string, optional: true),
            Attribute("createdAt", .date, optional: true), Attribute("updatedAt", .date, optional: true),
            Attribute("active", .bool, default: .bool(true)),
        ], relationships: [
            .toOne("company", to: "Company", inverse: "users"),
            .toMany("notes", to: "Note", inverse: "user", deleteRule: .cascade),
        ]),
        EntitySchema("Note", primaryKey: "remoteID", attributes: [
            Attribute("remoteID", .int), Attribute("text", .string), Attribute("createdAt", .date, optional: true),
        ], relationships: [
            .toOne("user", to: "User", inverse: "notes", optional: false),
            .toMany("tags", to: "Tag", inverse: "notes"),
        ]),
        EntitySchema("Company", primaryKey: "remoteID", attributes: [
            Attribute("remoteID", .int), Attribute("name", .string),
        ], relationships: [.toMany("users", to: "User", inverse: "company")]),
        EntitySchema("Tag", primaryKey: "remoteID", attributes: [
            Attribute("remoteID", .int), Attribute("name", .string),
        ], relationships: [.toMany("notes", to: "Note", inverse: "tags")]),
    ])

    /// Every case, by name.
    public static let all: [(name: String, run: @Sendable (Open, TemporaryDirectory) throws -> Void)] = [
        ("aUserWithNestedNotes", aUserWithNestedNotes),
        ("notesIDs", notesIDs),
        ("aCompanyNestedAndByCompanyID", aCompanyNestedAndByCompanyID),
        ("datesInEveryDocumentedFormat", datesInEveryDocumentedFormat),
        ("aPredicateScopedSync", aPredicateScopedSync),
        ("manyToManyTagsNestedAndByIDs", manyToManyTagsNestedAndByIDs),
        ("keepMissingDeletesAndUnlinksNothing", keepMissingDeletesAndUnlinksNothing),
        ("aDryRunChangesNothingAndCountsWhatTheRunDoes", aDryRunChangesNothingAndCountsWhatTheRunDoes),
        ("aDryRunReportsWhatTheRealRunDoes", aDryRunReportsWhatTheRealRunDoes),
        ("orderedArraysKeepTheirOrder", orderedArraysKeepTheirOrder),
    ]

    /// Users with a unique email, a company, and notes (deleted with them) that locks protect
    /// (delete rule deny).
    static let guardedSchema = Schema(version: 1, entities: [
        EntitySchema("Company", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)],
                     relationships: [.toMany("users", to: "User", inverse: "company")]),
        EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("email", .string)],
                     indexes: [Index("byEmail", on: ["email"], unique: true)],
                     relationships: [.toOne("company", to: "Company", inverse: "users"),
                                     .toMany("notes", to: "Note", inverse: "user", deleteRule: .cascade)]),
        EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("text", .string)],
                     relationships: [.toOne("user", to: "User", inverse: "notes", optional: false),
                                     .toMany("locks", to: "Lock", inverse: "note", deleteRule: .deny)]),
        EntitySchema("Lock", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toOne("note", to: "Note", inverse: "locks")]),
    ])

    /// A dry run is the real run rolled back: on the same store and input it reports exactly
    /// what the real run then does, and writes nothing. Three inputs where it once did not: a
    /// nested array that drops a note a lock protects (the dry run said deleted, the run
    /// rejected the user); a delete pass that meets the lock (the dry run said deleted; the run
    /// failed half-applied, where now it keeps the note and says so); an object refused after
    /// it wrote its nested company, which a later object names (rejected once in the dry run,
    /// while the run also lost the later object's link).
    static func aDryRunReportsWhatTheRealRunDoes(_ open: Open, _ dir: TemporaryDirectory) throws {
        func load(_ store: any DataStore) throws {
            try store.writeSync { w in
                try w.insert(["id": 1, "email": "ann@example.com"], into: "User")
                try w.insert(["id": 5, "email": "taken@example.com"], into: "User")
                try w.insert(["id": 10, "text": "locked", "user": 1], into: "Note")
                try w.insert(["id": 11, "text": "free", "user": 1], into: "Note")
                try w.insert(["id": 100, "note": 10], into: "Lock")
            }
        }
        let inputs: [(what: String, entity: String, json: String)] = [
            ("a nested array drops a locked note", "User",
             #"[{"id": 1, "email": "ann@example.com", "notes": [{"id": 11, "text": "free"}]}, {"id": 5, "email": "taken@example.com"}]"#),
            ("the delete pass meets a locked note", "Note", #"[{"id": 11, "text": "free", "user_id": 1}]"#),
            ("a refused object wrote a company a later one names", "User", #"""
                [{"id": 1, "email": "ann@example.com", "notes_ids": [10, 11]},
                 {"id": 2, "email": "taken@example.com", "company": {"id": 7, "name": "Globex"}},
                 {"id": 3, "email": "cy@example.com", "company_id": 7},
                 {"id": 5, "email": "taken@example.com"}]
                """#),
        ]
        for (number, input) in inputs.enumerated() {
            let dryStore = try open("dry-\(number)", guardedSchema)
            defer { try? dryStore.close() }
            try load(dryStore)
            let before = try snapshot(dryStore)
            let dry = try sync(input.json, dryStore, dir, entity: input.entity, options: .init(dryRun: true))
            #expect(try snapshot(dryStore) == before, "\(input.what): the dry run wrote nothing")
            let realStore = try open("real-\(number)", guardedSchema)
            defer { try? realStore.close() }
            try load(realStore)
            let real = try sync(input.json, realStore, dir, entity: input.entity)
            #expect(dry == real, "\(input.what): dry run \(dry)\nreal run \(real)")
            #expect(try realStore.read { try $0.metadata(forKey: "datastore.import.checkpoint") } == nil,
                    "\(input.what): the real run finished, with no checkpoint left behind")
            switch number {
            case 0:
                #expect(real.rejected.map(\.position) == [1], "\(input.what): \(real.rejected)")
            case 1:
                #expect(real.keptByDeleteRules.count == 1 && real.keptByDeleteRules[0].hasPrefix("10: "),
                        "\(input.what): \(real.keptByDeleteRules)")
            default:
                #expect(real.rejected.map(\.position) == [2], "\(input.what): \(real.rejected)")
                #expect(real.missingLinks.map(\.position) == [3], "\(input.what): \(real.missingLinks)")
            }
        }
    }

    /// Imports `json` into `entity`.
    public static func sync(_ json: String, _ store: any DataStore, _ dir: TemporaryDirectory, entity: String = "User",
                            options: JSONImport.Options = .init()) throws -> JSONImport.Report {
        let path = dir.path("payload-\(UUID().uuidString).json")
        _ = FileManager.default.createFile(atPath: path, contents: Data(json.utf8))
        defer { unlink(path) }
        return try JSONImport.run(path, into: store, entity: entity, options: options)
    }

    /// The items of `entity` by key.
    public static func items(_ store: any DataStore, _ entity: String) throws -> [Value: Record] {
        try store.read { reader in
            let records = try reader.fetch(FetchRequest(entity))
            return Dictionary(uniqueKeysWithValues: records.map { ($0["remoteID"], $0) })
        }
    }

    /// The keys of the items related to `key` through `relationship`, in key order.
    public static func related(_ store: any DataStore, _ entity: String, _ key: Value,
                               _ relationship: String) throws -> [Value] {
        try store.read { try $0.related(entity, key: key, relationship).map { $0["remoteID"] } }
    }

    /// The keys of `items`, in order.
    static func keys(_ items: [Value: Record]) -> [Value] {
        items.keys.sorted { a, b in
            if case .int(let x) = a, case .int(let y) = b { return x < y }
            return "\(a)" < "\(b)"
        }
    }

    static func date(_ text: String) -> Value {
        .date(ValueConversion.parseISO8601Text(text) ?? Timestamp(microsecondsSinceEpoch: 0))
    }

    /// Sync's first example, a user with nested notes, then the same user with a note changed,
    /// one dropped and one added, and the other user gone.
    static func aUserWithNestedNotes(_ open: Open, _ dir: TemporaryDirectory) throws {
        let store = try open("nested", schema)
        defer { try? store.close() }
        let firstPayload = #"""
            [
              {"id": 6, "name": "Shawn Merrill", "email": "shawn@ovium.com",
               "created_at": "2014-02-14T04:30:10+00:00", "updated_at": "2014-02-17T10:01:12+00:00",
               "notes": [
                 {"id": 0, "text": "Shawn Merril's diary, episode 1", "created_at": "2014-03-11T19:11:00+00:00"},
                 {"id": 1, "text": "Shawn Merril's diary, episode 2", "created_at": "2014-04-18T22:01:00+00:00"}
               ]},
              {"id": 7, "name": "Melisa White", "notes": [{"id": 2, "text": "Melisa's note"}]}
            ]
            """#
        let first = try sync(firstPayload, store, dir)
        #expect(first.rejected.isEmpty, "\(first.rejected)")
        #expect(first.entities["User"]?.inserted == 2 && first.entities["Note"]?.inserted == 3, "\(first.entities)")
        var users = try items(store, "User")
        #expect(keys(users) == [6, 7])
        #expect(users[6]?["name"] == "Shawn Merrill" && users[6]?["email"] == "shawn@ovium.com")
        #expect(users[6]?["createdAt"] == date("2014-02-14T04:30:10Z"))
        #expect(users[6]?["updatedAt"] == date("2014-02-17T10:01:12Z"))
        #expect(users[7]?["email"] == .null && users[7]?["active"] == true)
        var notes = try items(store, "Note")
        #expect(keys(notes) == [0, 1, 2])
        #expect(notes[0]?["text"] == "Shawn Merril's diary, episode 1" && notes[0]?["user"] == 6)
        #expect(notes[1]?["createdAt"] == date("2014-04-18T22:01:00Z") && notes[1]?["user"] == 6)
        #expect(notes[2]?["user"] == 7)
        #expect(try related(store, "User", 6, "notes") == [0, 1])
        // The same payload again writes nothing: the change feed records no item.
        let token = try store.read { try $0.changeToken() }
        let same = try sync(firstPayload, store, dir)
        #expect(same.entities["User"] == counts(unchanged: 2) && same.entities["Note"] == counts(unchanged: 3),
                "\(same.entities)")
        let changed = try store.read { try $0.changes(since: token) }.flatMap(\.items)
        #expect(changed.isEmpty, "an unchanged import changed \(changed)")

        let second = try sync(#"""
            [{"id": 6, "name": "Shawn Merrill", "email": "shawn@ovium.com",
              "created_at": "2014-02-14T04:30:10+00:00", "updated_at": "2014-02-17T10:01:12+00:00",
              "notes": [{"id": 0, "text": "Episode 1, revised"}, {"id": 3, "text": "Episode 3"}]}]
            """#, store, dir)
        #expect(second.rejected.isEmpty, "\(second.rejected)")
        #expect(second.entities["User"] == counts(unchanged: 1, deleted: 1), "\(second.entities)")
        #expect(second.entities["Note"] == counts(inserted: 1, updated: 1, deleted: 2),
                "note 1 dropped from the array, note 2 gone with its user (counted): \(second.entities)")
        users = try items(store, "User")
        notes = try items(store, "Note")
        #expect(keys(users) == [6])
        #expect(keys(notes) == [0, 3], "note 1 was dropped, note 2 went with user 7")
        #expect(notes[0]?["text"] == "Episode 1, revised")
        #expect(notes[0]?["createdAt"] == date("2014-03-11T19:11:00Z"), "an update keeps what the JSON leaves out")
        #expect(notes[3]?["user"] == 6)
        #expect(try related(store, "User", 6, "notes") == [0, 3])
    }

    static func counts(inserted: Int = 0, updated: Int = 0, unchanged: Int = 0, deleted: Int = 0, unlinked: Int = 0,
                       linked: Int = 0) -> JSONImport.EntityCounts {
        JSONImport.EntityCounts(inserted: inserted, updated: updated, unchanged: unchanged, deleted: deleted,
                                unlinked: unlinked, linked: linked)
    }

    /// `notes_ids`: notes given by key move to the user that lists them; a key that names no
    /// note is reported with its object, imported without it.
    static func notesIDs(_ open: Open, _ dir: TemporaryDirectory) throws {
        let store = try open("ids", schema)
        defer { try? store.close() }
        try store.writeSync { w in
            try w.insert(["remoteID": 1, "name": "A"], into: "User")
            try w.insert(["remoteID": 2, "name": "B"], into: "User")
            for id in 0...3 { try w.insert(["remoteID": .int(Int64(id)), "text": .string("n\(id)"), "user": 1], into: "Note") }
        }
        let report = try sync(#"""
            [{"id": 2, "name": "B", "notes_ids": [0, 1]},
             {"id": 1, "name": "A", "notes_ids": [2, 3]},
             {"id": 3, "name": "C", "notes_ids": [99]}]
            """#, store, dir)
        // Imported without the note nothing holds: a missing link, not a rejected object.
        #expect(report.rejected.isEmpty && report.missingLinks.map(\.position) == [3], "\(report)")
        #expect(report.missingLinks.first?.reason.contains("Note 99") == true, "\(report.missingLinks)")
        #expect(try related(store, "User", 1, "notes") == [2, 3])
        #expect(try related(store, "User", 2, "notes") == [0, 1])
        #expect(try keys(items(store, "User")) == [1, 2, 3], "user 3 is imported without the note nothing holds")
        #expect(try keys(items(store, "Note")) == [0, 1, 2, 3], "moved notes are updated, not deleted")
    }

    /// A company nested as an object and named by `company_id`, including one further on in the
    /// input; `company: null` clears it, and a key nothing holds is reported.
    static func aCompanyNestedAndByCompanyID(_ open: Open, _ dir: TemporaryDirectory) throws {
        let store = try open("company", schema)
        defer { try? store.close() }
        let report = try sync(#"""
            [{"id": 1, "name": "A", "company": {"id": 10, "name": "Facebook"}},
             {"id": 2, "name": "B", "company_id": 10},
             {"id": 3, "name": "C", "company_id": 12},
             {"id": 4, "name": "D", "company": {"id": 12, "name": "Globex"}},
             {"id": 5, "name": "E", "company": null},
             {"id": 6, "name": "F", "company_id": 404}]
            """#, store, dir)
        let companies = try items(store, "Company")
        #expect(keys(companies) == [10, 12])
        #expect(companies[10]?["name"] == "Facebook" && companies[12]?["name"] == "Globex")
        let users = try items(store, "User")
        #expect(keys(users) == [1, 2, 3, 4, 5, 6])
        #expect(users[1]?["company"] == 10 && users[2]?["company"] == 10)
        #expect(users[3]?["company"] == 12, "a company further on in the input")
        #expect(users[4]?["company"] == 12 && users[5]?["company"] == .null && users[6]?["company"] == .null)
        #expect(try related(store, "Company", 10, "users") == [1, 2])
        #expect(report.rejected.isEmpty && report.missingLinks.map(\.position) == [6], "\(report)")
        #expect(report.missingLinks.first?.reason.contains("404") == true, "\(report.missingLinks)")
        // The same input again writes nothing.
        let again = try sync(#"[{"id": 1, "name": "A", "company": {"id": 10, "name": "Facebook"}}]"#, store, dir,
                             options: .init(operations: [.insert, .update]))
        #expect(again.entities["User"] == counts(unchanged: 1) && again.entities["Company"] == counts(unchanged: 1),
                "\(again.entities)")
    }

    /// Dates in each form the Sync README documents, and Unix timestamps in seconds and
    /// milliseconds, as numbers and as text.
    static func datesInEveryDocumentedFormat(_ open: Open, _ dir: TemporaryDirectory) throws {
        let store = try open("dates", schema)
        defer { try? store.close() }
        let forms: [(String, String)] = [
            (#""2014-01-02""#, "2014-01-02T00:00:00Z"),
            (#""2014-01-02T00:00:00+00:00""#, "2014-01-02T00:00:00Z"),
            (#""2014-02-14T04:30:10+00:00""#, "2014-02-14T04:30:10Z"),
            (#""2014-01-02T00:00:00.000Z""#, "2014-01-02T00:00:00Z"),
            (#""2014-01-02T00:00:00.000000Z""#, "2014-01-02T00:00:00Z"),
            (#""2015-06-23T12:40:08.123""#, "2015-06-23T12:40:08.123Z"),
            (#""2015-06-23T19:04:19.911+0200""#, "2015-06-23T17:04:19.911Z"),
            (#""2014-01-01T00:00:00.1234567+00:00""#, "2014-01-01T00:00:00.123456Z"),
            (#""2014-01-01 10:00:00-05:00""#, "2014-01-01T15:00:00Z"),
            ("1441843200", "2015-09-10T00:00:00Z"),
            ("1441843200000", "2015-09-10T00:00:00Z"),
            (#""1441843200""#, "2015-09-10T00:00:00Z"),
        ]
        let json = "[" + forms.enumerated().map { #"{"id": \#($0.offset), "name": "u", "created_at": \#($0.element.0)}"# }
            .joined(separator: ",") + "]"
        let report = try sync(json, store, dir)
        #expect(report.rejected.isEmpty, "\(report.rejected)")
        let users = try items(store, "User")
        for (index, (text, expected)) in forms.enumerated() {
            #expect(users[.int(Int64(index))]?["createdAt"] == date(expected), "\(text)")
        }
        let bad = try sync(#"[{"id": 50, "name": "u", "created_at": "2014-13-02"}]"#, store, dir,
                           options: .init(operations: [.insert]))
        #expect(bad.rejected.first?.reason.contains("createdAt") == true || bad.rejected.first?.reason
            .contains("created_at") == true, "\(bad.rejected)")
    }

    /// A sync scoped by a predicate deletes only the absent items that match it.
    static func aPredicateScopedSync(_ open: Open, _ dir: TemporaryDirectory) throws {
        let store = try open("scope", schema)
        defer { try? store.close() }
        try store.writeSync { w in
            try w.insert(["remoteID": 1, "name": "A", "active": true], into: "User")
            try w.insert(["remoteID": 2, "name": "B", "active": false], into: "User")
            try w.insert(["remoteID": 3, "name": "C", "active": true], into: "User")
        }
        let scope = try Filter(parsing: "active == true", for: schema.entity(named: "User")!)
        let report = try sync(#"[{"id": 1, "name": "A2"}, {"id": 4, "name": "D"}]"#, store, dir,
                              options: .init(scope: scope))
        #expect(report.deleted == 1 && report.inserted == 1 && report.updated == 1, "\(report)")
        let users = try items(store, "User")
        #expect(keys(users) == [1, 2, 4], "user 3 matched the scope and was absent; user 2 is outside it")
        #expect(users[1]?["name"] == "A2")
    }

    /// Many-to-many: tags nested as objects and given by `tags_ids`; a tag a note no longer lists
    /// is unlinked, never deleted.
    static func manyToManyTagsNestedAndByIDs(_ open: Open, _ dir: TemporaryDirectory) throws {
        let store = try open("tags", schema)
        defer { try? store.close() }
        _ = try sync(#"""
            [{"id": 1, "name": "A", "notes": [
               {"id": 10, "text": "x", "tags": [{"id": 100, "name": "red"}, {"id": 101, "name": "blue"}]},
               {"id": 11, "text": "y", "tags_ids": [100]}]}]
            """#, store, dir)
        #expect(try related(store, "Note", 10, "tags") == [100, 101])
        #expect(try related(store, "Note", 11, "tags") == [100])
        #expect(try related(store, "Tag", 100, "notes") == [10, 11], "the inverse agrees")
        let report = try sync(#"""
            [{"id": 1, "name": "A", "notes": [
               {"id": 10, "text": "x", "tags_ids": [101]},
               {"id": 11, "text": "y", "tags": [{"id": 100, "name": "red"}, {"id": 102, "name": "green"}]}]}]
            """#, store, dir)
        #expect(report.entities["Tag"] == counts(inserted: 1, unchanged: 1, unlinked: 1, linked: 1),
                "\(report.entities)")
        #expect(try related(store, "Note", 10, "tags") == [101])
        #expect(try related(store, "Note", 11, "tags") == [100, 102])
        #expect(try related(store, "Tag", 100, "notes") == [11])
        #expect(try keys(items(store, "Tag")) == [100, 101, 102], "an unlinked tag stays")
    }

    /// Sync's model with both of the user's to-manys ordered: an array's order is the list's,
    /// nested or by key, and a later array reorders it; the export gives it back in that order.
    static func orderedArraysKeepTheirOrder(_ open: Open, _ dir: TemporaryDirectory) throws {
        var ordered = schema
        ordered.entities[0].relationships[1] = .toMany("notes", to: "Note", inverse: "user", deleteRule: .cascade,
                                                      ordered: true)
        ordered.entities[1].relationships[1] = .toMany("tags", to: "Tag", inverse: "notes", ordered: true)
        let store = try open("ordered", ordered)
        defer { try? store.close() }
        _ = try sync(#"""
            [{"id": 1, "name": "A", "notes": [
               {"id": 12, "text": "c", "tags": [{"id": 102, "name": "green"}, {"id": 100, "name": "red"}]},
               {"id": 10, "text": "a", "tags_ids": [102]},
               {"id": 11, "text": "b"}]}]
            """#, store, dir)
        #expect(try related(store, "User", 1, "notes") == [12, 10, 11])
        #expect(try related(store, "Note", 12, "tags") == [102, 100])
        _ = try sync(#"""
            [{"id": 1, "name": "A", "notes": [
               {"id": 11, "text": "b"},
               {"id": 12, "text": "c", "tags_ids": [100, 102]},
               {"id": 13, "text": "d"}]}]
            """#, store, dir)
        #expect(try related(store, "User", 1, "notes") == [11, 12, 13], "note 10 deleted, the rest reordered")
        #expect(try related(store, "Note", 12, "tags") == [100, 102])
        let path = dir.path("ordered-export.json")
        _ = try JSONExport.run(from: store, entity: "User", to: path)
        let users = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [[String: Any]]
        let notes = users?.first?["notes"] as? [[String: Any]]
        #expect(notes?.map { $0["remoteID"] as? Int } == [11, 12, 13], "the export lists the notes in their order")
    }

    /// With deletes off, nothing absent is deleted or unlinked.
    static func keepMissingDeletesAndUnlinksNothing(_ open: Open, _ dir: TemporaryDirectory) throws {
        let store = try open("keep", schema)
        defer { try? store.close() }
        _ = try sync(#"""
            [{"id": 1, "name": "A", "notes": [{"id": 10, "text": "x", "tags_ids": []}, {"id": 11, "text": "y"}]},
             {"id": 2, "name": "B"}]
            """#, store, dir)
        let report = try sync(#"[{"id": 1, "name": "A", "notes": [{"id": 12, "text": "z"}]}]"#, store, dir,
                              options: .init(operations: [.insert, .update]))
        #expect(report.entities.values.allSatisfy { $0.deleted == 0 && $0.unlinked == 0 }, "\(report.entities)")
        #expect(try keys(items(store, "User")) == [1, 2])
        #expect(try related(store, "User", 1, "notes") == [10, 11, 12])
    }

    /// A dry run leaves every item as it was and reports what the real run then does.
    static func aDryRunChangesNothingAndCountsWhatTheRunDoes(_ open: Open, _ dir: TemporaryDirectory) throws {
        let store = try open("dry", schema)
        defer { try? store.close() }
        _ = try sync(#"""
            [{"id": 1, "name": "A", "company": {"id": 5, "name": "Acme"},
              "notes": [{"id": 10, "text": "x", "tags": [{"id": 100, "name": "red"}]}, {"id": 11, "text": "y"}]},
             {"id": 2, "name": "B", "notes": [{"id": 12, "text": "z"}]}]
            """#, store, dir)
        let payload = #"""
            [{"id": 1, "name": "A!", "company_id": 6,
              "notes": [{"id": 10, "text": "x", "tags_ids": []}, {"id": 13, "text": "w"}]},
             {"id": 3, "name": "C", "company": {"id": 6, "name": "Initech"}},
             {"id": 4, "name": 4}]
            """#
        let before = try snapshot(store)
        let dry = try sync(payload, store, dir, options: .init(dryRun: true))
        #expect(try snapshot(store) == before, "a dry run writes nothing")
        let real = try sync(payload, store, dir)
        #expect(dry.entities == real.entities, "dry run \(dry.entities), real run \(real.entities)")
        #expect(dry.rejected == real.rejected && dry.rejected.map(\.position) == [3])
        #expect(real.entities["Note"]?.deleted == 2 && real.entities["Tag"]?.unlinked == 1,
                "note 11 dropped from the array, note 12 gone with user 2 by its delete rule: \(real.entities)")
        #expect(try items(store, "User")[1]?["company"] == 6, "a company further on in the input")
    }

    /// Every item of every entity, as text.
    public static func snapshot(_ store: any DataStore) throws -> [String] {
        try store.read { reader in
            try reader.schema.entities.flatMap { entity in
                try reader.fetch(FetchRequest(entity.name)).map { "\(entity.name) \($0)" }
            }
        }
    }
}

import DataStoreAPI
import DataStoreConformance
import Foundation
import JSONLStore
import Testing

/// Export and import against each other on any backend: an export imported into an empty store
/// gives back the same store, and a random graph exported, mutated and imported equals a model
/// of Sync's semantics.
public enum SyncRoundTripCases {
    public typealias Open = SyncJSONCases.Open

    public static let all: [(name: String, run: @Sendable (Open, TemporaryDirectory) throws -> Void)] = [
        ("anExportImportedGivesBackTheSameStore", anExportImportedGivesBackTheSameStore),
        ("aMutatedExportImportedEqualsSyncsModel", aMutatedExportImportedEqualsSyncsModel),
        ("anExportOfOneEntityImportedAloneKeepsEveryLink", anExportOfOneEntityImportedAloneKeepsEveryLink),
    ]

    /// An export of the users alone, nested, imported into an empty store gives back the users,
    /// their notes and tags, and the companies they belong to, every to-one link kept: the
    /// company travels as an object (it was written only as a key, and the import brought the
    /// users in without it while it called them rejected). Exported by keys alone, the same
    /// import says which links it could not make, and does not call the objects rejected.
    static func anExportOfOneEntityImportedAloneKeepsEveryLink(_ open: Open, _ dir: TemporaryDirectory) throws {
        let source = try open("alone-source", SyncJSONCases.schema)
        defer { try? source.close() }
        try seed(source, seed: 11)
        let companies = Set(try SyncJSONCases.items(source, "User").values.map { $0["company"] }.filter { !$0.isNull })
        let usedTags = Set(try source.read { r in
            try r.fetch(FetchRequest("Note")).flatMap { try r.related("Note", key: $0["remoteID"], "tags") }
        }.map { $0["remoteID"] })
        let exports = try [false, true].map { snakeCase in
            try export(source, "User", .init(relationships: .nested, snakeCase: snakeCase), dir)
        }
        let path = try export(source, "User", .init(relationships: .ids), dir)
        // What the exports hold: the companies no user belongs to and the tags no note has stay
        // behind.
        try source.writeSync { w in
            for company in try w.fetch(FetchRequest("Company")) where !companies.contains(company["remoteID"]) {
                _ = try w.delete("Company", key: company["remoteID"])
            }
            for tag in try w.fetch(FetchRequest("Tag")) where !usedTags.contains(tag["remoteID"]) {
                _ = try w.delete("Tag", key: tag["remoteID"])
            }
        }
        let expected = try contents(source)
        for (snakeCase, path) in zip([false, true], exports) {
            let target = try open("alone-\(snakeCase)", SyncJSONCases.schema)
            defer { try? target.close() }
            let report = try JSONImport.run(path, into: target, entity: "User")
            #expect(report.rejected.isEmpty && report.missingLinks.isEmpty,
                    "snake_case \(snakeCase): \(report.rejected.prefix(3)) \(report.missingLinks.prefix(3))")
            #expect(try contents(target) == expected, "snake_case \(snakeCase)")
        }
        let byKeys = try open("alone-ids", SyncJSONCases.schema)
        defer { try? byKeys.close() }
        let report = try JSONImport.run(path, into: byKeys, entity: "User")
        let linked = try SyncJSONCases.items(source, "User").values.filter { !$0["company"].isNull }.count
        #expect(report.rejected.isEmpty, "\(report.rejected.prefix(3))")
        let companyLinks = report.missingLinks.filter { $0.reason.contains("'User.company' names Company") }
        #expect(companyLinks.count == linked, "\(companyLinks.count) of \(linked)")
    }

    /// A random graph of ``SyncJSONCases/schema``: companies, users with a company or none,
    /// notes of users, tags shared by notes, and every kind of value the attributes hold.
    static func seed(_ store: any DataStore, seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        try store.writeSync { w in
            for id in 0..<5 { try w.insert(["remoteID": .int(Int64(id)), "name": .string("company \(id)")], into: "Company") }
            for id in 0..<8 { try w.insert(["remoteID": .int(Int64(id)), "name": .string("tag \"\(id)\"\n")], into: "Tag") }
            var note: Int64 = 0
            for id in 0..<40 {
                let company: Value = Int.random(in: 0..<4, using: &random) == 0 ? .null
                    : .int(Int64.random(in: 0..<5, using: &random))
                try w.insert(["remoteID": .int(Int64(id)), "name": .string("user é \(id)"),
                              "email": id % 3 == 0 ? .null : .string("u\(id)@example.com"),
                              "createdAt": .date(Timestamp(microsecondsSinceEpoch: Int64.random(
                                  in: -1_000_000_000_000...2_000_000_000_000_000, using: &random))),
                              "active": .bool(Bool.random(using: &random)), "company": company], into: "User")
                for _ in 0..<Int.random(in: 0...4, using: &random) {
                    try w.insert(["remoteID": .int(note), "text": .string("note \(note) of \(id)"), "user": .int(Int64(id))],
                                 into: "Note")
                    for tag in (0..<8).shuffled(using: &random).prefix(Int.random(in: 0...3, using: &random)) {
                        try w.link("Note", key: .int(note), "tags", to: .int(Int64(tag)))
                    }
                    note += 1
                }
            }
        }
    }

    /// Every item of every entity and every pair, as text.
    static func contents(_ store: any DataStore) throws -> [String] {
        let items = try SyncJSONCases.snapshot(store).filter { !$0.hasPrefix("Note_tags ") && !$0.hasPrefix("Tag_notes ") }
        let pairs = try store.read { reader in
            try reader.fetch(FetchRequest("Note")).flatMap { note in
                try reader.related("Note", key: note["remoteID"], "tags").map { "pair \(note["remoteID"]) \($0["remoteID"])" }
            }
        }
        return items + pairs
    }

    static func export(_ store: any DataStore, _ entity: String, _ options: JSONExport.Options,
                       _ dir: TemporaryDirectory) throws -> String {
        let path = dir.path("\(entity)-\(options.relationships)-\(options.snakeCase).json")
        try JSONExport.run(from: store, entity: entity, options: options, to: path)
        return path
    }

    /// Exports in each form, imported into a new store in an order that needs no forward
    /// reference, give back the same items and pairs; imported into the store they came from,
    /// they change nothing.
    static func anExportImportedGivesBackTheSameStore(_ open: Open, _ dir: TemporaryDirectory) throws {
        let source = try open("source", SyncJSONCases.schema)
        defer { try? source.close() }
        try seed(source, seed: 7)
        let expected = try contents(source)
        for snakeCase in [false, true] {
            // Nested: the users carry their notes, which carry their tags.
            let nested = try open("nested-\(snakeCase)", SyncJSONCases.schema)
            defer { try? nested.close() }
            for (entity, form) in [("Tag", JSONExport.Relationships.none), ("Company", .none), ("User", .nested)] {
                let path = try export(source, entity, .init(relationships: form, snakeCase: snakeCase), dir)
                let report = try JSONImport.run(path, into: nested, entity: entity)
                #expect(report.rejected.isEmpty, "\(entity) \(form) snake_case \(snakeCase): \(report.rejected.prefix(3))")
                let again = try JSONImport.run(path, into: source, entity: entity)
                #expect(again.entities.values.allSatisfy { $0.inserted + $0.updated + $0.deleted + $0.unlinked
                    + $0.linked == 0 }, "\(entity) into its own source: \(again.entities)")
            }
            #expect(try contents(nested) == expected, "nested, snake_case \(snakeCase)")
            // Keys: every entity on its own, the references set from either side.
            let ids = try open("ids-\(snakeCase)", SyncJSONCases.schema)
            defer { try? ids.close() }
            for entity in ["Company", "Tag", "User", "Note"] {
                let path = try export(source, entity, .init(relationships: .ids, snakeCase: snakeCase), dir)
                _ = try JSONImport.run(path, into: ids, entity: entity)
            }
            #expect(try contents(ids) == expected, "ids, snake_case \(snakeCase)")
        }
        #expect(try contents(source) == expected, "importing its own exports changed the source")
    }

    /// A random graph exported with nested notes and tags, mutated (users, notes and tags added,
    /// changed and dropped, notes moved to another user, tag lists changed), then imported: the
    /// users are the payload's; the notes are exactly those the payload nests, each under the
    /// user that lists it; each note's tags are exactly those it lists; tags are never deleted.
    static func aMutatedExportImportedEqualsSyncsModel(_ open: Open, _ dir: TemporaryDirectory) throws {
        for round in 0..<3 {
            let store = try open("model-\(round)", SyncJSONCases.schema)
            defer { try? store.close() }
            try seed(store, seed: UInt64(100 + round))
            let path = try export(store, "User", .init(relationships: .nested, snakeCase: true), dir)
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            guard var users = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
                Issue.record("the export is not an array of objects")
                return
            }
            var random = SplitMix64(seed: UInt64(200 + round))
            var nextNote = 10_000
            func newNote() -> [String: Any] {
                nextNote += 1
                let tags: [Any] = (0..<Int.random(in: 0...2, using: &random)).map { _ in
                    let tag = Int.random(in: 0..<12, using: &random)
                    return ["remote_id": tag, "name": "tag \(tag) from the payload"] as [String: Any]
                }
                return ["remote_id": nextNote, "text": "new note \(nextNote)", "tags": tags]
            }
            // Mutations: drop users, change them, add users, drop, add, change and move notes, change tags.
            users.removeAll { _ in Int.random(in: 0..<6, using: &random) == 0 }
            for index in users.indices {
                var user = users[index]
                if Bool.random(using: &random) { user["name"] = "renamed \(index)" }
                // A nested export carries the company as an object, under its own name.
                if Int.random(in: 0..<4, using: &random) == 0 { user["company"] = NSNull() }
                var notes = user["notes"] as? [[String: Any]] ?? []
                notes.removeAll { _ in Int.random(in: 0..<4, using: &random) == 0 }
                for position in notes.indices where Int.random(in: 0..<3, using: &random) == 0 {
                    notes[position]["text"] = "changed"
                    let kept = Array((notes[position]["tags"] as? [Any] ?? []).dropLast())
                    notes[position]["tags"] = kept + [["remote_id": 1, "name": "tag one"] as [String: Any]]
                }
                if Bool.random(using: &random) { notes.append(newNote()) }
                user["notes"] = notes
                users[index] = user
            }
            // Move a note from one user to another.
            for _ in 0..<5 {
                let from = Int.random(in: 0..<users.count, using: &random)
                let to = Int.random(in: 0..<users.count, using: &random)
                guard var fromNotes = users[from]["notes"] as? [[String: Any]], !fromNotes.isEmpty, from != to else { continue }
                let moved = fromNotes.removeLast()
                users[from]["notes"] = fromNotes
                users[to]["notes"] = (users[to]["notes"] as? [[String: Any]] ?? []) + [moved]
            }
            for id in 500..<503 {
                users.append(["remote_id": id, "name": "new user \(id)", "company_id": 2, "notes": [newNote()]])
            }
            let mutated = dir.path("mutated-\(round).json")
            try JSONSerialization.data(withJSONObject: users).write(to: URL(fileURLWithPath: mutated))

            // The model.
            let before = try SyncJSONCases.items(store, "Tag")
            var expectedUsers: [Int: String] = [:]
            var expectedNotes: [Int: (text: String, user: Int)] = [:]
            var expectedPairs: Set<[Int]> = []
            var expectedTags: [Int: String] = [:]
            for (key, record) in before {
                if case .int(let id) = key, case .string(let name) = record["name"] { expectedTags[Int(id)] = name }
            }
            for user in users {
                let id = user["remote_id"] as? Int ?? -1
                expectedUsers[id] = user["name"] as? String
                for note in user["notes"] as? [[String: Any]] ?? [] {
                    let noteID = note["remote_id"] as? Int ?? -1
                    expectedNotes[noteID] = (note["text"] as? String ?? "", id)
                    expectedPairs = expectedPairs.filter { $0[0] != noteID }
                    for tag in note["tags"] as? [[String: Any]] ?? [] {
                        let tagID = tag["remote_id"] as? Int ?? -1
                        expectedTags[tagID] = tag["name"] as? String
                        expectedPairs.insert([noteID, tagID])
                    }
                }
            }

            let report = try JSONImport.run(mutated, into: store, entity: "User")
            #expect(report.rejected.isEmpty, "round \(round): \(report.rejected.prefix(3))")
            let stored = try SyncJSONCases.items(store, "User")
            #expect(stored.count == expectedUsers.count, "round \(round): users")
            for (id, name) in expectedUsers {
                #expect(stored[.int(Int64(id))]?["name"] == .string(name), "round \(round): user \(id)")
            }
            let notes = try SyncJSONCases.items(store, "Note")
            #expect(notes.count == expectedNotes.count, "round \(round): notes \(notes.count), model \(expectedNotes.count)")
            for (id, note) in expectedNotes {
                #expect(notes[.int(Int64(id))]?["text"] == .string(note.text), "round \(round): note \(id)")
                #expect(notes[.int(Int64(id))]?["user"] == .int(Int64(note.user)), "round \(round): note \(id)'s user")
            }
            let tags = try SyncJSONCases.items(store, "Tag")
            #expect(tags.count == expectedTags.count, "round \(round): tags")
            for (id, name) in expectedTags {
                #expect(tags[.int(Int64(id))]?["name"] == .string(name), "round \(round): tag \(id)")
            }
            var pairs: Set<[Int]> = []
            for key in notes.keys {
                guard case .int(let note) = key else { continue }
                for tag in try SyncJSONCases.related(store, "Note", key, "tags") {
                    if case .int(let t) = tag { pairs.insert([Int(note), Int(t)]) }
                }
            }
            #expect(pairs == expectedPairs, "round \(round): pairs")
        }
    }
}

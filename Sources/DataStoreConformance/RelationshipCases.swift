import DataStoreAPI
import Foundation

/// Relationships: the schema they resolve to, the invariant checked at commit, delete rules,
/// many-to-many pairs, filters across relationships, eager loading and child stores.
enum RelationshipCases {
    /// Users with managers (a self-reference), notes (cascade) and projects (deny); notes with
    /// tags (many-to-many); a tree of categories (cascade down a self-reference).
    static let schema = Schema(version: 1, entities: [
        EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)],
                     relationships: [.toOne("manager", to: "User", inverse: "reports"),
                                     .toMany("reports", to: "User", inverse: "manager"),
                                     .toMany("notes", to: "Note", inverse: "author", deleteRule: .cascade),
                                     .toMany("projects", to: "Project", inverse: "owner", deleteRule: .deny)]),
        EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("title", .string)],
                     relationships: [.toOne("author", to: "User", inverse: "notes", optional: false),
                                     .toMany("tags", to: "Tag", inverse: "notes")]),
        EntitySchema("Tag", primaryKey: "name", attributes: [Attribute("name", .string)],
                     relationships: [.toMany("notes", to: "Note", inverse: "tags")]),
        EntitySchema("Project", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toOne("owner", to: "User", inverse: "projects")]),
        EntitySchema("Category", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toOne("parent", to: "Category", inverse: "children"),
                                     .toMany("children", to: "Category", inverse: "parent", deleteRule: .cascade)]),
    ])

    static func ids(_ records: [Record], _ name: String = "id") -> [Value] { records.map { $0[name] } }

    static func loadUsers(_ store: any DataStore) throws {
        try store.writeSync { w in
            try w.insert(["id": 1, "name": "Ann"], into: "User")
            try w.insert(["id": 2, "name": "Bob", "manager": 1], into: "User")
            try w.insert(["id": 3, "name": "Cy", "manager": 1], into: "User")
            for (id, author) in [(10, 1), (11, 1), (12, 2), (13, 3), (14, 3), (15, 3)] {
                try w.insert(["id": .int(Int64(id)), "title": .string("n\(id)"), "author": .int(Int64(author))],
                             into: "Note")
            }
            for tag in ["swift", "c", "db"] { try w.insert(["name": .string(tag)], into: "Tag") }
            try w.link("Note", key: 10, "tags", to: "swift")
            try w.link("Note", key: 10, "tags", to: "db")
            try w.link("Tag", key: "db", "notes", to: 13)
            try w.link("Note", key: 12, "tags", to: "c")
        }
    }

    static func theSchemaHoldsTheGraph(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        let note = store.schema.entity(named: "Note")
        c.expectEqual(note?.attribute(named: "author"), Attribute("author", .int))
        c.expect(note?.indexes.contains { $0.attributes == ["author"] } == true, "an index on Note.author")
        let join = store.schema.entity(named: Schema.joinEntityName("Note", .toMany("tags", to: "Tag", inverse: "notes")))
        c.expectEqual(join?.name, "Note_tags")
        c.expectEqual(join?.attribute(named: "source")?.type, .int)
        c.expectEqual(join?.attribute(named: "target")?.type, .string)
        try store.close()
        let reopened = try c.open(nil)
        c.expectEqual(reopened.schema, store.schema, "the stored schema describes the graph")
        c.expectEqual(reopened.schema.entity(named: "User")?.relationship(named: "notes")?.deleteRule, .cascade)
        try reopened.close()
        // The app's declared schema (unresolved) opens the store it created.
        try c.open(schema).close()
    }

    static func aReferenceToNothingRollsTheTransactionBack(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try store.writeSync { try $0.insert(["id": 1, "name": "Ann"], into: "User") }
        c.expectError(.referenceViolation, naming: "'Note' 7 refers through 'author' to 'User' 99") {
            try store.writeSync { w in
                try w.insert(["id": 2, "name": "Bob"], into: "User")
                try w.insert(["id": 7, "title": "x", "author": 99], into: "Note")
            }
        }
        c.expectEqual(try store.read { try ids($0.fetch(FetchRequest("User"))) }, [1], "nothing of it committed")
        c.expectError(.referenceViolation, naming: "'User' 5") {
            _ = try store.writeSync { try $0.update("User", key: 1, set: ["manager": 5]) }
        }
        c.expectError(.referenceViolation, naming: "'Note_tags'") {
            try store.writeSync { w in
                try w.insert(["id": 8, "title": "y", "author": 1], into: "Note")
                try w.link("Note", key: 8, "tags", to: "missing")
            }
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Note")) }, 0)
        c.expectError(.invalidValue, naming: "author") {
            try store.writeSync { try $0.insert(["id": 9, "title": "z"], into: "Note") }
        }
    }

    static func aTransactionMayInsertAnItemBeforeWhatItRefersTo(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try store.writeSync { w in
            try w.insert(["id": 7, "title": "first", "author": 2], into: "Note")
            try w.insert(["id": 1, "name": "Ann", "manager": 2], into: "User")
            try w.insert(["id": 2, "name": "Bob", "manager": 1], into: "User")
        }
        // Swap the two: each refers to the other through the whole transaction.
        try store.writeSync { w in
            try w.update("Note", key: 7, set: ["author": 1])
            try w.update("User", key: 1, set: ["manager": .null])
            _ = try w.delete("User", key: 2)
            try w.insert(["id": 2, "name": "Bo", "manager": 1], into: "User")
        }
        c.expectEqual(try store.read { try $0.get("User", key: 2)?["name"] }, "Bo")
        c.expectEqual(try store.read { try $0.get("Note", key: 7)?["author"] }, 1)
    }

    static func cascadeDeletesRelatedItemsAndTheFeedListsThem(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        let token = try store.currentChangeToken()
        try store.writeSync { _ = try $0.delete("User", key: 3) }
        try store.read { r in
            c.expectEqual(try ids(r.fetch(FetchRequest("Note"))), [10, 11, 12])
            c.expectEqual(try r.count(FetchRequest("Note_tags")), 3, "Cy's note 13 left Tag db")
            c.expectEqual(try ids(r.related("Tag", key: "db", "notes")), [10])
        }
        let changes: [ItemChange] = try store.changes(since: token, limit: 10).flatMap { $0.items }
        let notes = changes.filter { $0.entity == "Note" }
        c.expectEqual(notes.map { $0.key }, [13, 14, 15])
        c.expect(notes.allSatisfy { $0.kind == .deleted }, "\(changes)")
        c.expect(changes.contains { $0.entity == "User" && $0.key == 3 && $0.kind == .deleted }, "\(changes)")
        c.expectEqual(changes.filter { $0.entity == "Note_tags" }.count, 1, "the pair of note 13 and db")
    }

    static func nullifyClearsReferencesAndTheFeedListsThem(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        let token = try store.currentChangeToken()
        try store.writeSync { w in
            _ = try w.delete(FetchRequest("Note", filter: Field("author") == 1))
            _ = try w.delete("User", key: 1)
        }
        try store.read { r in
            c.expectEqual(try r.fetch(FetchRequest("User")).map { $0["manager"] }, [.null, .null])
            c.expectEqual(try r.count(FetchRequest("Note_tags", filter: Field("source") == 10)), 0,
                          "a deleted note's pairs go (nullify on a many-to-many)")
            c.expectEqual(try r.count(FetchRequest("Tag")), 3, "the tags stay")
        }
        let changes: [ItemChange] = try store.changes(since: token, limit: 10).flatMap { $0.items }
        let kinds: [ItemChange.Kind] = changes.filter { $0.entity == "User" }.map { $0.kind }
        c.expectEqual(kinds, [.deleted, .updated, .updated])
    }

    static func denyRefusesTheDeleteUntilNothingIsRelated(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        try store.writeSync { try $0.insert(["id": 100, "owner": 2], into: "Project") }
        c.expectError(.referenceViolation, naming: "'User' 2 cannot be deleted") {
            try store.writeSync { _ = try $0.delete("User", key: 2) }
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Note", filter: Field("author") == 2)) }, 1,
                      "the cascade rolled back with the delete")
        // Checked at commit: the project may go after its owner in the same transaction.
        try store.writeSync { w in
            _ = try w.delete("User", key: 2)
            _ = try w.delete("Project", key: 100)
        }
        c.expectEqual(try store.read { try $0.get("User", key: 2) }, nil)
    }

    static func manyToManyPairsFollowLinksAndDeletes(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        try store.read { r in
            c.expectEqual(try ids(r.related("Note", key: 10, "tags"), "name"), ["db", "swift"])
            c.expectEqual(try ids(r.related("Tag", key: "db", "notes")), [10, 13])
            c.expectEqual(try ids(r.related("Note", key: 10, "author")), [1])
            c.expectEqual(try ids(r.related("User", key: 1, "reports")), [2, 3])
        }
        try store.writeSync { w in
            try w.link("Note", key: 10, "tags", to: "db")  // already there: no second pair
            c.expect(try w.unlink("Tag", key: "swift", "notes", from: 10), "the pair existed")
            c.expect(!(try w.unlink("Tag", key: "swift", "notes", from: 10)), "and is gone")
            try w.link("User", key: 3, "reports", to: 2)
        }
        try store.read { r in
            c.expectEqual(try ids(r.related("Note", key: 10, "tags"), "name"), ["db"])
            c.expectEqual(try r.count(FetchRequest("Note_tags")), 3)
            c.expectEqual(try r.get("User", key: 2)?["manager"], 3)
        }
        try store.writeSync { _ = try $0.delete("Tag", key: "db") }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Note_tags")) }, 1, "db's pairs went with it")
        c.expectEqual(try store.read { try $0.count(FetchRequest("Note")) }, 6, "its notes stay (nullify)")
    }

    static func cyclesAndDeepChainsDelete(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        let depth = 3_000
        try store.writeSync { w in
            try w.insert(["id": 0], into: "Category")
            for id in 1..<depth { try w.insert(["id": .int(Int64(id)), "parent": .int(Int64(id - 1))], into: "Category") }
            for id in 0..<300 { try w.insert(["id": .int(Int64(depth + id)), "parent": 5], into: "Category") }
            // A cycle of managers.
            try w.insert(["id": 1, "name": "a", "manager": 2], into: "User")
            try w.insert(["id": 2, "name": "b", "manager": 1], into: "User")
            try w.insert(["id": 3, "name": "c", "manager": 3], into: "User")
        }
        try store.writeSync { _ = try $0.delete("Category", key: 1) }
        c.expectEqual(try store.read { try ids($0.fetch(FetchRequest("Category"))) }, [0],
                      "the chain below 1, 3,000 deep, and the 300 children of 5 went with it")
        try store.writeSync { w in
            _ = try w.delete("User", key: 1)
            _ = try w.delete("User", key: 3)
        }
        let users: [Record] = try store.read { try $0.fetch(FetchRequest("User")) }
        c.expectEqual(users, [["id": 2, "name": "b", "manager": .null]])
    }

    static func deleteAllAndDeleteByRequestRunTheRules(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        c.expectEqual(try store.writeSync { try $0.delete(FetchRequest("User", filter: Field("name") == "Bob")) }, 1)
        c.expectEqual(try store.read { try ids($0.fetch(FetchRequest("Note"))) }, [10, 11, 13, 14, 15])
        c.expectEqual(try store.writeSync { try $0.deleteAll("User") }, 2)
        try store.read { r in
            c.expectEqual(try r.count(FetchRequest("Note")), 0)
            c.expectEqual(try r.count(FetchRequest("Note_tags")), 0)
            c.expectEqual(try r.count(FetchRequest("Tag")), 3)
        }
    }

    /// A cascade down a self-reference deletes items of the entity being deleted: `deleteAll`
    /// and `delete(FetchRequest)` count them, with or without a filter (they once counted only
    /// the deletes they made themselves: 1 for a tree of 7).
    static func deletesCountTheItemsACascadeTookFromTheSameEntity(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        func loadTree() throws {
            try store.writeSync { w in
                try w.insert(["id": 1], into: "Category")
                for (id, parent) in [(2, 1), (3, 1), (4, 2), (5, 2), (6, 3), (7, 3)] {
                    try w.insert(["id": .int(Int64(id)), "parent": .int(Int64(parent))], into: "Category")
                }
            }
        }
        try loadTree()
        c.expectEqual(try store.writeSync { try $0.deleteAll("Category") }, 7, "deleteAll")
        try loadTree()
        c.expectEqual(try store.writeSync { try $0.delete(FetchRequest("Category")) }, 7, "delete(request), no filter")
        try loadTree()
        c.expectEqual(try store.writeSync { try $0.delete(FetchRequest("Category", filter: Field("id") >= 1)) }, 7,
                      "delete(request) with a filter")
        try loadTree()
        c.expectEqual(try store.writeSync { try $0.delete(FetchRequest("Category", filter: Field("id") == 2)) }, 1,
                      "a filter counts the items it matched; the cascade below 2 is not among them")
        c.expectEqual(try store.read { try ids($0.fetch(FetchRequest("Category"))) }, [1, 3, 6, 7])
        try store.close()
    }

    static func filtersFollowKeyPathsAndToManyRelationships(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        try store.writeSync { try $0.insert(["id": 4, "name": "Di"], into: "User") }
        try store.read { r in
            func notes(_ filter: Filter) throws -> [Value] { try ids(r.fetch(FetchRequest("Note", filter: filter))) }
            func users(_ filter: Filter) throws -> [Value] { try ids(r.fetch(FetchRequest("User", filter: filter))) }
            c.expectEqual(try notes(Field("author.name") == "Ann"), [10, 11])
            c.expectEqual(try notes(Field("author.manager.name") == "Ann"), [12, 13, 14, 15])
            c.expectEqual(try notes(Field("author.manager.name") == .null), [10, 11], "Ann has no manager")
            c.expectEqual(try notes(Field("author.name").hasPrefix("B") || Field("title") == "n15"), [12, 15])
            c.expectEqual(try users(Field("manager.name") != "Ann"), [1, 4], "null compares as a value")
            c.expectEqual(try users(.any("notes", Field("title") == "n12")), [2])
            c.expectEqual(try users(.any("notes", .all)), [1, 2, 3])
            c.expectEqual(try users(.every("notes", Field("title") != "n13")), [1, 2, 4])
            c.expectEqual(try users(.relatedCount("notes", .greaterOrEqual, 2)), [1, 3])
            c.expectEqual(try users(.relatedCount("notes", .equal, 0)), [4])
            c.expectEqual(try users(.relatedCount("reports", .equal, 2)), [1])
            c.expectEqual(try users(.any("notes", .any("tags", Field("name") == "db"))), [1, 3])
            c.expectEqual(try ids(r.fetch(FetchRequest("Tag", filter: .any("notes", Field("author.name") == "Cy"))),
                                  "name"), ["db"])
            c.expectEqual(try r.count(FetchRequest("User", filter: .relatedCount("notes", .less, 2))), 2)
        }
        c.expectError(.invalidArgument, naming: "'User' has no relationship 'posts'") {
            _ = try store.read { try $0.fetch(FetchRequest("User", filter: .any("posts", .all))) }
        }
        c.expectError(.invalidArgument, naming: "to-many") {
            _ = try store.read { try $0.fetch(FetchRequest("User", filter: Field("notes.title") == "x")) }
        }
        c.expectError(.typeMismatch, naming: "User.name") {
            _ = try store.read { try $0.fetch(FetchRequest("Note", filter: Field("author.name") == 3)) }
        }
    }

    static func eagerLoadingReturnsEveryLevel(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        let users = try store.read { r in
            try r.fetch(FetchRequest("User", sort: [.descending("name")]),
                        including: [Include("notes", including: ["tags"]), "manager", "reports"])
        }
        c.expectEqual(users.map { $0.record["id"] }, [3, 2, 1])
        c.expectEqual(users[0]["notes"].map { $0.record["id"] }, [13, 14, 15])
        c.expectEqual(users[0]["notes"][0]["tags"].map { $0.record["name"] }, ["db"])
        c.expectEqual(users[0]["manager"].map { $0.record["id"] }, [1])
        c.expectEqual(users[2]["manager"].count, 0)
        c.expectEqual(users[2]["reports"].map { $0.record["id"] }, [2, 3])
        c.expectEqual(users[2]["notes"][0]["tags"].map { $0.record["name"] }, ["db", "swift"])
        c.expectError(.invalidArgument, naming: "no relationship 'posts'") {
            _ = try store.read { try $0.fetch(FetchRequest("User"), including: ["posts"]) }
        }
    }

    static func childStoresMergeRelationshipChangesCheckedOnTheFinalState(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        let child = try store.makeChild()
        try child.writeSync { w in
            _ = try w.delete("User", key: 3)
            try w.insert(["id": 20, "title": "new", "author": 2], into: "Note")
        }
        c.expectEqual(try child.read { try $0.count(FetchRequest("Note", filter: Field("author") == 3)) }, 0)
        c.expectEqual(try store.read { try $0.count(FetchRequest("Note", filter: Field("author") == 3)) }, 3,
                      "the parent sees nothing before the merge")
        // Meanwhile the parent relates a new note to the user the child deleted.
        try store.writeSync { try $0.insert(["id": 30, "title": "late", "author": 3], into: "Note") }
        _ = try store.merge(child)
        try store.read { r in
            c.expectEqual(try ids(r.fetch(FetchRequest("Note"))), [10, 11, 12, 20])
            c.expectEqual(try r.get("User", key: 3), nil)
        }
        // A child relates a project to a user the parent deletes meanwhile: the merge is
        // checked on the final state and refused whole.
        let bad = try store.makeChild()
        try bad.writeSync { w in
            try w.insert(["id": 40, "owner": 2], into: "Project")
            try w.update("User", key: 1, set: ["name": "A"])
        }
        try store.writeSync { _ = try $0.delete("User", key: 2) }
        c.expectError(.referenceViolation, naming: "'Project' 40 refers through 'owner' to 'User' 2") {
            _ = try store.merge(bad)
        }
        c.expectEqual(try store.read { try $0.get("User", key: 1)?["name"] }, "Ann", "nothing of the merge applied")
    }

    /// A child moves an item from one parent to another and then deletes the first parent,
    /// whose children cascade: the merge gives what the child's transaction gave, the moved item
    /// and what hangs off it kept, whatever the entities are called (with the parent entity
    /// named `Aparent` the merge once ran the parent's cascade before writing the moved item).
    static func aMergeGivesTheChildsStateWhateverTheEntitiesAreCalled(_ c: ConformanceContext) throws {
        for parent in ["Aparent", "Zparent"] {
            let schema = Schema(version: 1, entities: [
                EntitySchema(parent, primaryKey: "id", attributes: [Attribute("id", .int)],
                             relationships: [.toMany("children", to: "Bchild", inverse: "parent", deleteRule: .cascade)]),
                EntitySchema("Bchild", primaryKey: "id", attributes: [Attribute("id", .int)],
                             relationships: [.toOne("parent", to: parent, inverse: "children"),
                                             .toMany("toys", to: "Toy", inverse: "owner", deleteRule: .cascade)]),
                EntitySchema("Toy", primaryKey: "id", attributes: [Attribute("id", .int)],
                             relationships: [.toOne("owner", to: "Bchild", inverse: "toys")]),
            ])
            let store = try c.open(schema, name: parent)
            try store.writeSync { w in
                try w.insert(["id": 1], into: parent)
                try w.insert(["id": 2], into: parent)
                try w.insert(["id": 10, "parent": 1], into: "Bchild")
                try w.insert(["id": 11, "parent": 1], into: "Bchild")
                try w.insert(["id": 100, "owner": 10], into: "Toy")
                try w.insert(["id": 101, "owner": 11], into: "Toy")
            }
            let child = try store.makeChild()
            try child.writeSync { w in
                try w.update("Bchild", key: 10, set: ["parent": 2])
                _ = try w.delete(parent, key: 1)
            }
            func state(_ s: any DataStore) throws -> [[Value]] {
                try s.read { r in
                    [try ids(r.fetch(FetchRequest(parent))), try ids(r.fetch(FetchRequest("Bchild"))),
                     try ids(r.fetch(FetchRequest("Toy")))]
                }
            }
            let childState = try state(child)
            c.expectEqual(childState, [[2], [10], [100]], "\(parent): the child's own state")
            let report = try store.merge(child)
            c.expectEqual(try state(store), childState, "\(parent): the merge gives the child's state")
            c.expectEqual(try store.read { try $0.get("Bchild", key: 10)?["parent"] }, 2, "\(parent)")
            c.expectEqual([report.inserted, report.updated, report.deleted], [0, 1, 3], "\(parent): the report")
            try store.close()
        }
    }

    /// A child clears, moves or leaves alone an item's to-one and then deletes the item: the
    /// merge gives the parent what the child shows, under each delete rule of the to-one and in
    /// either order of entity names. (The merge once ran the to-one's rule on the parent's older
    /// copy of the item: a cascade deleted the item the child had let go, a deny refused a valid
    /// child.)
    static func aMergeRunsNoRuleOfAToOneTheChildLetGo(_ c: ConformanceContext) throws {
        for rule in [Relationship.DeleteRule.cascade, .nullify, .deny] {
            for before in ["cleared", "moved", "left alone"] {
                for (target, holder) in [("C", "D"), ("Zc", "Ad")] {
                    let label = "\(holder).target \(rule), \(before)"
                    let schema = Schema(version: 1, entities: [
                        EntitySchema(target, primaryKey: "id", attributes: [Attribute("id", .int)]),
                        EntitySchema(holder, primaryKey: "id", attributes: [Attribute("id", .int)],
                                     relationships: [.toOne("target", to: target, deleteRule: rule)]),
                    ])
                    let store = try c.open(schema, name: "\(holder)-\(rule)-\(before.prefix(4))")
                    try store.writeSync { w in
                        try w.insert(["id": 10], into: target)
                        try w.insert(["id": 11], into: target)
                        try w.insert(["id": 1, "target": 10], into: holder)
                    }
                    let child = try store.makeChild()
                    var childRefused = false
                    do {
                        try child.writeSync { w in
                            if before == "cleared" { _ = try w.update(holder, key: 1, set: ["target": .null]) }
                            if before == "moved" { _ = try w.update(holder, key: 1, set: ["target": 11]) }
                            _ = try w.delete(holder, key: 1)
                        }
                    } catch let error as StoreError {
                        childRefused = true
                        c.expectEqual(error.code, .referenceViolation, "\(label): the child's refusal")
                    }
                    func state(_ s: any DataStore) throws -> [[Value]] {
                        try s.read { r in [try ids(r.fetch(FetchRequest(target))), try ids(r.fetch(FetchRequest(holder)))] }
                    }
                    let childState = try state(child)
                    c.expect(childRefused == (rule == .deny && before != "cleared"),
                             "\(label): only a deny with a target still set refuses the delete")
                    let expected: [[Value]] = rule == .cascade
                        ? [before == "cleared" ? [10, 11] : before == "moved" ? [10] : [11], []]
                        : childRefused ? [[10, 11], [1]] : [[10, 11], []]
                    c.expectEqual(childState, expected, "\(label): the child's own state")
                    try store.merge(child)
                    c.expectEqual(try state(store), childState, "\(label): the merge gives the child's state")
                    try store.close()
                }
            }
        }
    }

    /// 26 terms across a to-one relationship over 10,000 related items, within every documented
    /// limit: each term stands for up to 10,000 related keys, more values than SQLite binds in
    /// one statement (it answered "too many SQL variables"); every backend returns the items.
    static func aFilterAcrossARelationshipOverManyRelatedItemsIsAnswered(_ c: ConformanceContext) throws {
        let schema = Schema(version: 1, entities: [
            EntitySchema("U", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("rank", .int)],
                         relationships: [.toMany("ps", to: "P", inverse: "u")]),
            EntitySchema("P", primaryKey: "id", attributes: [Attribute("id", .int)],
                         relationships: [.toOne("u", to: "U", inverse: "ps")]),
        ])
        let store = try c.open(schema, name: "wide")
        try store.writeSync { w in
            for id in 0..<10_000 { try w.insert(["id": .int(Int64(id)), "rank": .int(Int64(id))], into: "U") }
            for id in 0..<100 { try w.insert(["id": .int(Int64(id)), "u": .int(Int64(id * 100))], into: "P") }
        }
        let filter = Filter.and((0..<26).map { Field("u.rank") >= .int(Int64($0 * 100)) })
        let found = try store.read { try ids($0.fetch(FetchRequest("P", filter: filter))) }
        c.expectEqual(found, (25..<100).map { .int(Int64($0)) }, "u.rank >= 2,500")
        c.expectEqual(try store.read { try $0.count(FetchRequest("P", filter: filter)) }, 75)
        c.expectEqual(try store.writeSync { try $0.delete(FetchRequest("P", filter: filter)) }, 75)
        try store.close()
    }

    static func invalidRelationshipsAreRefusedWithTheirNames(_ c: ConformanceContext) throws {
        func refused(_ entities: [EntitySchema], _ code: StoreError.Code, naming: String) {
            c.expectError(code, naming: naming) { _ = try c.open(Schema(entities: entities), name: "bad") }
        }
        let user = EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int)])
        func note(_ relationships: [Relationship], _ attributes: [Attribute] = []) -> EntitySchema {
            EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int)] + attributes,
                         relationships: relationships)
        }
        refused([note([.toOne("author", to: "Person")])], .unknownEntity, naming: "'Person'")
        refused([user, note([.toOne("author", to: "User", inverse: "notes")])], .invalidArgument,
                naming: "'User.notes', which 'User' does not declare")
        var withNotes = user
        withNotes.relationships = [.toMany("notes", to: "Note", inverse: "author")]
        refused([withNotes, note([.toOne("author", to: "User", inverse: "notes", optional: false)])],
                .invalidArgument, naming: "nullify")
        refused([withNotes, note([.toOne("author", to: "User", inverse: "notes")], [Attribute("author", .string)])],
                .invalidArgument, naming: "'Note.author' holds the to-one relationship")
        var oneToOne = user
        oneToOne.relationships = [.toOne("note", to: "Note", inverse: "author")]
        refused([oneToOne, note([.toOne("author", to: "User", inverse: "note")])], .invalidArgument,
                naming: "both to-one")
        refused([user, note([.toMany("readers", to: "User", inverse: "read")])], .invalidArgument,
                naming: "'Note.readers'")
    }

    struct Author: DataObject, Equatable {
        static let entityName = "Author"
        static let primaryKey = "id"
        static let relationships: [Relationship] = [
            .toMany("posts", to: "Post", inverse: "author", deleteRule: .cascade),
        ]
        var id: Int
        var name: String
    }

    struct Post: DataObject, Equatable {
        static let entityName = "Post"
        static let primaryKey = "id"
        static let defaultSort = [SortKey.ascending("title")]
        static let relationships: [Relationship] = [.toOne("author", to: "Author", inverse: "posts", optional: false)]
        var id: Int
        var title: String
        var author: Int
    }

    static func typedModelsDeclareLoadAndCascadeRelationships(_ c: ConformanceContext) throws {
        let store = try c.open(try Schema(models: [Author.self, Post.self]))
        c.expectEqual(store.schema.entity(named: "Post")?.relationship(named: "author")?.destination, "Author")
        c.expectEqual(try Post.schemaDifferences(in: store).count, 0, "the derived entity matches the stored one")
        let ann = Author(id: 1, name: "Ann")
        try store.writeSync { w in
            try w.insert(Post(id: 10, title: "b", author: 1))
            try w.insert(ann)
            try w.insert(Author(id: 2, name: "Bob"))
            try w.insert(Post(id: 11, title: "a", author: 1))
            try w.insert(Post(id: 12, title: "c", author: 2))
        }
        c.expectEqual(try store.read { try $0.related(Post.self, of: ann, "posts") }.map(\.id), [10, 11])
        c.expectEqual(try store.read { try $0.related(Author.self, of: Post(id: 12, title: "c", author: 2), "author") },
                      [Author(id: 2, name: "Bob")])
        let authors = try store.read { try $0.fetch(Author.self, including: ["posts"]) }
        c.expectEqual(authors.map(\.object.name), ["Ann", "Bob"])
        c.expectEqual(try authors[0].related("posts", as: Post.self).map(\.title), ["b", "a"], "primary-key order")
        let posts = try store.read { try $0.fetch(Post.self, where: Field("author.name") == "Ann") }
        c.expectEqual(posts.map(\.id), [11, 10], "the type's default sort")
        try store.writeSync { _ = try $0.delete(ann) }
        c.expectEqual(try store.read { try $0.fetch(Post.self) }.map(\.id), [12])
        c.expectError(.referenceViolation, naming: "'Author' 3") {
            try store.writeSync { try $0.insert(Post(id: 13, title: "d", author: 3)) }
        }
    }

    struct Writer: DataObject, Equatable {
        static let entityName = "Writer"
        static let primaryKey = "id"
        static let books = toMany("books", Book.self, inverse: "writer", deleteRule: .cascade)
        static let relationships = [books.relationship]
        var id: Int
        var name: String
    }

    struct Book: DataObject, Equatable {
        static let entityName = "Book"
        static let primaryKey = "id"
        static let defaultSort = [SortKey.ascending("title")]
        static let writer = toOne("writer", Writer.self, inverse: "books", optional: false)
        static let shelves = toMany("shelves", Shelf.self, inverse: "books")
        static let relationships = [writer.relationship, shelves.relationship]
        var id: Int
        var title: String
        var writer: Int
    }

    struct Shelf: DataObject, Equatable {
        static let entityName = "Shelf"
        static let primaryKey = "id"
        static let books = toMany("books", Book.self, inverse: "shelves")
        static let relationships = [books.relationship]
        var id: Int
        var label: String
    }

    /// Relationships declared as typed values (`Writer.books`, `Book.writer`): eager loading at
    /// two levels, related objects of one object, filters and sorts across a to-one, filters
    /// over a to-many, typed links, and a live query with its related objects, each answering
    /// what the string form answers.
    static func typedRelationshipsLoadFilterSortAndLink(_ c: ConformanceContext) async throws {
        let store = try c.open(try Schema(models: [Writer.self, Book.self, Shelf.self]))
        let ann = Writer(id: 1, name: "Ann")
        let bob = Writer(id: 2, name: "Bob")
        let fiction = Shelf(id: 1, label: "fiction")
        let new = Shelf(id: 2, label: "new")
        let books = [Book(id: 10, title: "b", writer: 1), Book(id: 11, title: "a", writer: 1),
                     Book(id: 12, title: "c", writer: 2)]
        try store.writeSync { w in
            try w.insert(ann)
            try w.insert(bob)
            try w.insert(fiction)
            try w.insert(new)
            for book in books { try w.insert(book) }
            try w.link(books[0], Book.shelves, to: fiction)
            try w.link(books[0], Book.shelves, to: new)
            try w.link(books[2], Book.shelves, to: new)
        }
        let writers = try store.read { try $0.fetch(Writer.self, including: Writer.books.including(Book.shelves)) }
        c.expectEqual(writers.map(\.object.name), ["Ann", "Bob"])
        c.expectEqual(try writers[0].related(Writer.books).map(\.id), [10, 11], "primary-key order")
        c.expectEqual(try writers[0].relatedGraphs(Writer.books).map { try $0.related(Book.shelves).map(\.label) },
                      [["fiction", "new"], []])
        let untyped = try store.read { try $0.fetch(Writer.self, including: [Include("books", including: ["shelves"])]) }
        c.expectEqual(untyped.map(\.graph), writers.map(\.graph), "the same graph as the string form")
        c.expectEqual(try store.read { try $0.related(Writer.books, of: bob) }, [books[2]])
        c.expectEqual(try store.read { try $0.related(Book.writer, of: books[2]) }, bob)
        let withWriter = try store.read { try $0.fetch(Book.self, including: Book.writer) }
        c.expectEqual(try withWriter.map { try $0.related(Book.writer)?.name }, ["Ann", "Ann", "Bob"])

        let annsBooks = try store.read { try $0.fetch(Book.self, where: Book.writer[\.name] == "Ann") }
        c.expectEqual(annsBooks.map(\.id), [11, 10], "the type's default sort")
        let sorted = try store.read {
            try $0.fetch(Book.self, where: Book.writer[\.name] >= "A",
                         sortedBy: [.descending(Book.writer[\.name]), .ascending(\.title)])
        }
        c.expectEqual(sorted.map(\.id), [12, 11, 10])
        let withA = try store.read { try $0.fetch(Writer.self, where: .any(Writer.books, \.title == "a")) }
        c.expectEqual(withA.map(\.id), [1])
        let prolific = try store.read { try $0.fetch(Writer.self, where: .relatedCount(Writer.books, .greaterOrEqual, 2)) }
        c.expectEqual(prolific.map(\.id), [1])
        let allShelved = try store.read { try $0.fetch(Writer.self, where: .every(Writer.books, \.title != "a")) }
        c.expectEqual(allShelved.map(\.id), [2])

        var live = try store.observe(Writer.self, where: \.id == 2, including: Writer.books).makeAsyncIterator()
        c.expectEqual(try await ChangeFeedCases.next(&live, c)?.first?["books"].map { $0.record["id"] }, [12])
        try store.writeSync { w in
            try w.insert(Book(id: 13, title: "d", writer: 2))
            _ = try w.unlink(books[2], Book.shelves, from: new)
        }
        c.expectEqual(try await ChangeFeedCases.next(&live, c)?.first?["books"].map { $0.record["id"] }, [12, 13])
        c.expectEqual(try store.read { try $0.related(Shelf.books, of: new) }.map(\.id), [10])
        try store.close()
    }

    /// Version 1 has users and notes related by nothing but a plain `owner` value; version 2
    /// adds the relationships (a required to-one with a default target, a many-to-many), version
    /// 3 changes a delete rule and removes one. A step that would leave a reference dangling is
    /// refused and changes nothing.
    static func schemaStepsAddChangeAndRemoveRelationships(_ c: ConformanceContext) throws {
        let user = EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int)])
        let note = EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int)])
        let tag = EntitySchema("Tag", primaryKey: "name", attributes: [Attribute("name", .string)])
        let v1 = Schema(version: 1, entities: [user, note, tag])
        let store = try c.open(v1)
        try store.writeSync { w in
            for id in 1...3 { try w.insert(["id": .int(Int64(id))], into: "User") }
            for id in 10...14 { try w.insert(["id": .int(Int64(id))], into: "Note") }
            try w.insert(["name": "a"], into: "Tag")
        }
        try store.close()
        var v2 = v1
        v2.version = 2
        v2.entities[0].relationships = [.toMany("notes", to: "Note", inverse: "author", deleteRule: .cascade)]
        v2.entities[1].relationships = [.toOne("author", to: "User", inverse: "notes", optional: false),
                                        .toMany("tags", to: "Tag", inverse: "notes")]
        v2.entities[2].relationships = [.toMany("notes", to: "Note", inverse: "tags")]
        func steps(defaultTarget: Value) -> SchemaUpgrades {
            var upgrades = SchemaUpgrades()
            upgrades.version(2,
                .addRelationship(entity: "Note", relationship: .toOne("author", to: "User", inverse: "notes", optional: false),
                                 inverse: .toMany("notes", to: "Note", inverse: "author", deleteRule: .cascade),
                                 defaultTarget: defaultTarget),
                .addRelationship(entity: "Note", relationship: .toMany("tags", to: "Tag", inverse: "notes"),
                                 inverse: .toMany("notes", to: "Note", inverse: "tags")))
            return upgrades
        }
        c.expectError(.referenceViolation, naming: "'Note' 10 refers through 'author' to 'User' 9") {
            _ = try c.open(v2, upgrades: steps(defaultTarget: 9))
        }
        let unchanged = try c.open(nil)
        c.expectEqual(unchanged.schema.version, 1, "the refused migration changed nothing")
        try unchanged.close()
        c.expectError(.invalidArgument, naming: "default target") {
            var upgrades = SchemaUpgrades()
            upgrades.version(2, .addRelationship(entity: "Note", relationship: .toOne("author", to: "User",
                inverse: "notes", optional: false), inverse: .toMany("notes", to: "Note", inverse: "author",
                deleteRule: .cascade)), .addRelationship(entity: "Note", relationship: .toMany("tags", to: "Tag",
                inverse: "notes"), inverse: .toMany("notes", to: "Note", inverse: "tags")))
            _ = try c.open(v2, upgrades: upgrades)
        }
        let upgraded = try c.open(v2, upgrades: steps(defaultTarget: 2))
        try upgraded.writeSync { w in
            try w.link("Note", key: 10, "tags", to: "a")
            try w.update("Note", key: 11, set: ["author": 3])
        }
        try upgraded.read { r in
            c.expectEqual(try ids(r.related("User", key: 2, "notes")), [10, 12, 13, 14])
            c.expectEqual(try ids(r.related("Tag", key: "a", "notes")), [10])
        }
        try upgraded.writeSync { _ = try $0.delete("User", key: 3) }
        c.expectEqual(try upgraded.read { try ids($0.fetch(FetchRequest("Note"))) }, [10, 12, 13, 14], "cascade")
        try upgraded.close()

        var v3 = v2
        v3.version = 3
        v3.entities[0].relationships[0].deleteRule = .deny
        v3.entities[1].relationships.removeAll { $0.name == "tags" }
        v3.entities[2].relationships = []
        var upgrades = steps(defaultTarget: 2)
        upgrades.version(3, .changeDeleteRule(entity: "User", relationship: "notes", to: .deny),
                           .removeRelationship(entity: "Note", name: "tags"))
        let third = try c.open(v3, upgrades: upgrades)
        c.expectEqual(third.schema.entity(named: "Note_tags"), nil, "the join entity went with the relationship")
        c.expectError(.referenceViolation, naming: "'User' 2 cannot be deleted") {
            try third.writeSync { _ = try $0.delete("User", key: 2) }
        }
        try third.close()
    }

    static func sortsFollowToOneKeyPaths(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try loadUsers(store)
        try store.writeSync { try $0.insert(["id": 4, "name": "Al", "manager": 3], into: "User") }
        try store.read { r in
            // Notes by their author's name (Ann 1, Bob 2, Cy 3), descending, ties by key.
            c.expectEqual(try ids(r.fetch(FetchRequest("Note", sort: [.descending("author.name")]))),
                          [13, 14, 15, 12, 10, 11])
            // Users by their manager's name: none (null) first, then Ann, Ann, Cy.
            c.expectEqual(try ids(r.fetch(FetchRequest("User", sort: [.ascending("manager.name")]))), [1, 2, 3, 4])
            c.expectEqual(try ids(r.fetch(FetchRequest("User", sort: [.ascending("manager.name", caseInsensitive: true),
                                                                        .descending("name")], offset: 1, limit: 2))),
                          [3, 2])
            c.expectEqual(try ids(r.fetch(FetchRequest("Note", filter: Field("author.manager.name") == "Ann",
                                                     sort: [.ascending("author.name"), .descending("id")]))),
                          [12, 15, 14, 13])
            var visited: [Value] = []
            try r.forEach(FetchRequest("Note", sort: [.ascending("author.manager.name")], limit: 3)) { visited.append($0["id"]) }
            c.expectEqual(visited, [10, 11, 12], "Ann's notes have no manager's name: null first")
            c.expectEqual(try r.count(FetchRequest("Note", sort: [.ascending("author.name")], limit: 4)), 4)
        }
        c.expectError(.invalidArgument, naming: "to-many") {
            _ = try store.read { try $0.fetch(FetchRequest("User", sort: [.ascending("notes.title")])) }
        }
        c.expectError(.unknownAttribute, naming: "age") {
            _ = try store.read { try $0.fetch(FetchRequest("Note", sort: [.ascending("author.age")])) }
        }
    }

    static func liveQueriesSeeChangesToRelatedItems(_ c: ConformanceContext) async throws {
        let store = try c.open(schema)
        try loadUsers(store)
        var notes = store.observe(FetchRequest("Note", filter: Field("author.name") == "Ann")).makeAsyncIterator()
        c.expectEqual(try await ChangeFeedCases.next(&notes, c).map { ids($0) }, [10, 11])
        // Renaming a user changes which notes match, though no note changed.
        try store.writeSync { try $0.update("User", key: 2, set: ["name": "Ann"]) }
        c.expectEqual(try await ChangeFeedCases.next(&notes, c).map { ids($0) }, [10, 11, 12])

        var graph = store.observe(FetchRequest("User", filter: Field("id") == 3), including: [Include("notes", including: ["tags"])])
            .makeAsyncIterator()
        c.expectEqual(try await ChangeFeedCases.next(&graph, c)?.first?["notes"].map { $0.record["id"] }, [13, 14, 15])
        // A tag of one of the user's notes: only the join entity changes.
        try store.writeSync { try $0.link("Note", key: 14, "tags", to: "swift") }
        c.expectEqual(try await ChangeFeedCases.next(&graph, c)?.first?["notes"][1]["tags"].map { $0.record["name"] },
                      ["swift"])
        try store.close()
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Relationships", "theSchemaHoldsTheGraph", theSchemaHoldsTheGraph),
        ConformanceCase("Relationships", "aReferenceToNothingRollsTheTransactionBack",
                        aReferenceToNothingRollsTheTransactionBack),
        ConformanceCase("Relationships", "aTransactionMayInsertAnItemBeforeWhatItRefersTo",
                        aTransactionMayInsertAnItemBeforeWhatItRefersTo),
        ConformanceCase("Relationships", "cascadeDeletesRelatedItemsAndTheFeedListsThem",
                        cascadeDeletesRelatedItemsAndTheFeedListsThem),
        ConformanceCase("Relationships", "nullifyClearsReferencesAndTheFeedListsThem",
                        nullifyClearsReferencesAndTheFeedListsThem),
        ConformanceCase("Relationships", "denyRefusesTheDeleteUntilNothingIsRelated",
                        denyRefusesTheDeleteUntilNothingIsRelated),
        ConformanceCase("Relationships", "manyToManyPairsFollowLinksAndDeletes", manyToManyPairsFollowLinksAndDeletes),
        ConformanceCase("Relationships", "cyclesAndDeepChainsDelete", cyclesAndDeepChainsDelete),
        ConformanceCase("Relationships", "deleteAllAndDeleteByRequestRunTheRules",
                        deleteAllAndDeleteByRequestRunTheRules),
        ConformanceCase("Relationships", "deletesCountTheItemsACascadeTookFromTheSameEntity",
                        deletesCountTheItemsACascadeTookFromTheSameEntity),
        ConformanceCase("Relationships", "filtersFollowKeyPathsAndToManyRelationships",
                        filtersFollowKeyPathsAndToManyRelationships),
        ConformanceCase("Relationships", "eagerLoadingReturnsEveryLevel", eagerLoadingReturnsEveryLevel),
        ConformanceCase("Relationships", "childStoresMergeRelationshipChangesCheckedOnTheFinalState",
                        childStoresMergeRelationshipChangesCheckedOnTheFinalState),
        ConformanceCase("Relationships", "aMergeGivesTheChildsStateWhateverTheEntitiesAreCalled",
                        aMergeGivesTheChildsStateWhateverTheEntitiesAreCalled),
        ConformanceCase("Relationships", "aMergeRunsNoRuleOfAToOneTheChildLetGo",
                        aMergeRunsNoRuleOfAToOneTheChildLetGo),
        ConformanceCase("Relationships", "aFilterAcrossARelationshipOverManyRelatedItemsIsAnswered",
                        aFilterAcrossARelationshipOverManyRelatedItemsIsAnswered),
        ConformanceCase("Relationships", "invalidRelationshipsAreRefusedWithTheirNames",
                        invalidRelationshipsAreRefusedWithTheirNames),
        ConformanceCase("Relationships", "typedModelsDeclareLoadAndCascadeRelationships",
                        typedModelsDeclareLoadAndCascadeRelationships),
        ConformanceCase("Relationships", "typedRelationshipsLoadFilterSortAndLink",
                        typedRelationshipsLoadFilterSortAndLink),
        ConformanceCase("Relationships", "schemaStepsAddChangeAndRemoveRelationships",
                        schemaStepsAddChangeAndRemoveRelationships),
        ConformanceCase("Relationships", "sortsFollowToOneKeyPaths", sortsFollowToOneKeyPaths),
        ConformanceCase("Relationships", "liveQueriesSeeChangesToRelatedItems", liveQueriesSeeChangesToRelatedItems),
    ] + (1...3).map { seed in
        ConformanceCase("Relationships", "randomGraphSequence\(seed)EndsEqualToTheGraphModel") { c in
            try randomGraph(c, seed: UInt64(seed))
        }
    }
}

extension Fixtures {
    /// A schema whose entities are related: users with managers (a self-reference), notes
    /// (cascade) and projects (deny); notes with tags (many-to-many); a tree of categories.
    public static var graphSchema: Schema { RelationshipCases.schema }
}

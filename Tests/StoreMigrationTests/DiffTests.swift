import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import JSONLStore
import StoreMigration
import Testing

/// `diff` lists what sync would do, losslessly, and `sync --from diff:FILE` applies it only to
/// the destination it was made against.
@Test(arguments: [(StoreKind.sqlite, StoreKind.lmdb), (.lmdb, .memory), (.memory, .jsonl)])
func aDiffListsEveryChangeWithBothValuesAndAppliesOnlyToTheStoreItSaw(_ from: StoreKind, _ to: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(from, "source")
    let destination = dir.location(to == .jsonl ? .sqlite : to, "destination")
    defer { for l in [source, destination] where l.kind == .memory { try? l.destroy() } }
    try writeEdgeCaseStore(source)
    _ = try Migrator.copy(from: source, to: destination)
    let store = try source.open(schema: nil)
    try store.writeSync { w in
        _ = try w.delete("Item", key: 100_000)
        try w.update("Item", key: 100_001, set: ["ratio": -0.0, "label": .null])
        try w.update("Item", key: 100_002, set: ["label": "", "name": "a\u{0}c"])
        try w.insert(["id": 5_000_000, "name": "e\u{301}", "score": .int(.max)], into: "Item")
        _ = try w.delete("Keyed", key: "")
        try w.insert(["key": "\u{E9}\u{E9}", "value": 1], into: "Keyed")
    }
    try store.close()
    // A JSON Lines destination: the diff reads it like any store.
    var target = destination
    if to == .jsonl {
        target = dir.jsonl("destination", compressed: true)
        _ = try Migrator.copy(from: destination, to: target)
    }
    let file = dir.url.appendingPathComponent("changes.jsonl.gz").path
    let report = try Migrator.diff(from: source, to: target, output: file)
    #expect(report.entities.map { [$0.inserted, $0.updated, $0.deleted] } == [[1, 2, 1], [1, 0, 1], [0, 0, 0]])
    var changes: [StoreChange] = []
    let header = try StoreChanges.read(file) { _, change in changes.append(change) }
    #expect(header.from == source.description && header.to == target.description)
    #expect(changes.count == 6)
    let ratio = changes.compactMap { change -> UInt64? in
        guard case .update(_, _, let new) = change, new["id"] == 100_001, case .double(let d) = new["ratio"] else {
            return nil
        }
        return d.bitPattern
    }
    #expect(ratio == [(-0.0 as Double).bitPattern], "-0.0 survives the diff bit for bit")
    #expect(changes.contains { if case .update(_, let old, let new) = $0 { old["label"] == .null && new["label"] == "" } else { false } },
            "null and empty stay apart")
    if to == .jsonl {
        // A JSON Lines store is read-only: apply to the store it was copied from.
        #expect(throws: StoreError.self) { try Migrator.apply(diff: file, to: target) }
        return
    }
    let applied = try Migrator.apply(diff: file, to: destination)
    #expect(applied.changes == 6)
    #expect(try Migrator.verify(from: source, to: destination).differences == 0)
    // Applied twice, the first line conflicts and nothing is written.
    let before = try contents(destination)
    do {
        _ = try Migrator.apply(diff: file, to: destination)
        Issue.record("a diff applied to a store that changed since")
    } catch let error as StoreError {
        #expect(error.code == .conflict && error.message.contains("line 2") && !error.message.contains("\n"), "\(error)")
    }
    #expect(try contents(destination) == before)
}

@Test func theDiffCommandWritesJSONLinesToStandardOutputAndSyncAppliesThem() throws {
    let dir = try TemporaryDirectory()
    let a = dir.location(.sqlite, "a")
    let b = dir.location(.lmdb, "b")
    try writeEdgeCaseStore(a)
    _ = try Migrator.copy(from: a, to: b)
    let same = try runCLI(["diff", "--from", a.description, "--to", b.description])
    #expect(same.status == 0 && same.output.split(separator: "\n").count == 1, "only the header: \(same.output)")
    let store = try a.open(schema: nil)
    try store.writeSync { w in try w.update("Keyed", key: "a\u{0}", set: ["note": "changed"]) }
    try store.close()
    let different = try runCLI(["diff", "--from", a.description, "--to", b.description])
    #expect(different.status == 1 && different.errors.contains("1 differences"), "\(different.errors)")
    let lines = different.output.split(separator: "\n")
    #expect(lines.count == 2 && lines[1].contains(#""op":"update""#) && lines[1].contains(#""note":{"old":"a\u0000","new":"changed"}"#),
            "\(lines)")
    let file = dir.url.appendingPathComponent("d.jsonl")
    try Data(different.output.utf8).write(to: file)
    let sync = try runCLI(["sync", "--from", "diff:" + file.path, "--to", b.description])
    #expect(sync.status == 0 && sync.output.contains("Keyed: 0 inserted, 1 updated"), "\(sync.output) \(sync.errors)")
    #expect(try runCLI(["verify", "--from", a.description, "--to", b.description, "--progress", "none"]).status == 0)
    let again = try runCLI(["sync", "--from", "diff:" + file.path, "--to", b.description])
    #expect(again.status == 2 && again.errors.contains("line 2"), "\(again.errors)")
    // A damaged diff: a one-line error, nothing applied.
    try Data((different.output.replacingOccurrences(of: #""op":"update""#, with: #""op":"upsert""#)).utf8).write(to: file)
    let damaged = try runCLI(["sync", "--from", "diff:" + file.path, "--to", b.description])
    #expect(damaged.status == 2 && damaged.errors.contains("unknown op 'upsert'"), "\(damaged.errors)")
}

/// A unique value that moved from an item the source deleted to one with a lower key (a user's
/// email under a new account): a sync and an applied diff delete the old item before they write
/// the new one, on SQLite and LMDB, whose unique indexes are checked at each write. (Both
/// refused the change before: the new item was written first, in key order.)
@Test(arguments: [StoreKind.sqlite, .lmdb])
func aUniqueValueThatMovedToAnotherKeyIsSyncedAndApplied(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let schema = Schema(version: 1, entities: [
        EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("email", .string)],
                     indexes: [Index("byEmail", on: ["email"], unique: true)]),
    ])
    func make(_ name: String, _ users: [(Int64, String)]) throws -> StoreLocation {
        let location = dir.location(kind, name)
        let store = try location.open(schema: schema)
        try store.writeSync { w in for (id, email) in users { try w.insert(["id": .int(id), "email": .string(email)], into: "User") } }
        try store.close()
        return location
    }
    let source = try make("source", [(1, "a@example.com"), (3, "c@example.com")])
    let before = [(2, "a@example.com"), (3, "c@example.com")] as [(Int64, String)]
    let synced = try make("synced", before)
    let report = try Migrator.sync(from: source, to: synced)
    #expect(report.entities.first?.itemsDeleted == 1 && report.entities.first?.itemsWritten == 1)
    #expect(try Migrator.verify(from: source, to: synced).entities.allSatisfy { $0.differences == 0 })
    // The same change as a diff file, applied.
    try expectDiffApplies(from: source, to: try make("applied", before), file: dir.path("moved.jsonl"), counts: [1, 0, 1])
}

/// Makes a diff of `source` against `destination` in `file`, applies it, and expects `counts`
/// (inserted, updated, deleted) and no difference left.
private func expectDiffApplies(from source: StoreLocation, to destination: StoreLocation, file: String, counts: [Int],
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
    _ = try Migrator.diff(from: source, to: destination, output: file)
    let applied = try Migrator.apply(diff: file, to: destination)
    #expect(applied.entities.map { [$0.inserted, $0.updated, $0.deleted] } == [counts], sourceLocation: sourceLocation)
    #expect(try Migrator.verify(from: source, to: destination).entities.allSatisfy { $0.differences == 0 },
            sourceLocation: sourceLocation)
}

/// Unique values that no single pass in key order can write: two users who swap their emails,
/// and an email that a user of a later batch gives up (batches of one item) to a user of an
/// earlier one, while another user's email goes to an item the source deleted. A sync writes
/// such a batch again as replacements, and an applied diff takes the swapped items out before it
/// puts them back; every value ends as the source has it. (Both refused these before.)
@Test(arguments: [StoreKind.sqlite, .lmdb])
func uniqueValuesThatSwapOrMoveAcrossBatchesAreSyncedAndApplied(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let schema = Schema(version: 1, entities: [
        EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("email", .string),
                                                            Attribute("name", .string)],
                     indexes: [Index("byEmail", on: ["email"], unique: true)]),
    ])
    func make(_ name: String, _ users: [(Int64, String)]) throws -> StoreLocation {
        let location = dir.location(kind, name)
        let store = try location.open(schema: schema)
        try store.writeSync { w in
            for (id, email) in users {
                try w.insert(["id": .int(id), "email": .string(email), "name": .string("user \(id)")], into: "User")
            }
        }
        try store.close()
        return location
    }
    // 1 and 2 swap; 3 takes 5's email, and 5 takes 6's, whose item is gone; 4 is unchanged.
    let source = try make("source", [(1, "b@x"), (2, "a@x"), (3, "e@x"), (4, "d@x"), (5, "f@x")])
    let before = [(1, "a@x"), (2, "b@x"), (3, "c@x"), (4, "d@x"), (5, "e@x"), (6, "f@x")] as [(Int64, String)]
    for batch in [1, 2, 1_000] {
        let synced = try make("synced-\(batch)", before)
        let report = try Migrator.sync(from: source, to: synced, options: MigrationOptions(batchSize: try PositiveInt(batch)))
        #expect(report.entities.first.map { [$0.itemsWritten, $0.itemsDeleted] } == [4, 1], "batches of \(batch)")
        #expect(try Migrator.verify(from: source, to: synced).entities.allSatisfy { $0.differences == 0 },
                "batches of \(batch)")
    }
    try expectDiffApplies(from: source, to: try make("applied", before), file: dir.path("swapped.jsonl"), counts: [0, 4, 1])
    // A batch that replaces an item of the destination's page already read: that item is not
    // written (or counted) again when the pass reaches it.
    let shifted = try make("shifted-source", [(0, "new@x"), (1, "b@x"), (2, "a@x")])
    let stale = try make("shifted", [(1, "a@x"), (2, "b@x")])
    let report = try Migrator.sync(from: shifted, to: stale, options: MigrationOptions(batchSize: 2))
    #expect(report.entities.first.map { [$0.itemsWritten, $0.itemsDeleted] } == [3, 0])
    #expect(try Migrator.verify(from: shifted, to: stale).entities.allSatisfy { $0.differences == 0 })
}

/// Two demo customers swap their emails (a unique index) while their orders, whose delete rule
/// is cascade, stay theirs: the applied diff takes each customer out and puts it back without
/// its orders going with it, and a sync in batches of one writes the two customers once each.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func customersWhoSwapEmailsKeepTheirOrders(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(kind, "source")
    try DemoData.seed(source, items: 400, seed: 21)
    let store = try source.open(schema: nil)
    try store.writeSync { w in
        let customers = try w.fetch(FetchRequest("Customer"))
        let ordered = try customers.filter { try w.count(FetchRequest("Order", filter: Field("customer") == $0["id"])) > 0 }
        try #require(ordered.count >= 2)
        // Through a third email: a delete of the customer would take its orders (cascade).
        var (first, second) = (ordered[0], ordered[1])
        let emails = (first["email"], second["email"])
        first["email"] = .string("swapping@example.com")
        try w.save(first, into: "Customer")
        second["email"] = emails.0
        try w.save(second, into: "Customer")
        first["email"] = emails.1
        try w.save(first, into: "Customer")
    }
    try store.close()
    let synced = dir.location(kind, "synced")
    try DemoData.seed(synced, items: 400, seed: 21)
    let report = try Migrator.sync(from: source, to: synced, options: MigrationOptions(batchSize: 1))
    for entity in report.entities {
        let expected: [Int] = entity.entity == "Customer" ? [2, 0] : [0, 0]
        #expect([entity.itemsWritten, entity.itemsDeleted] == expected,
                "\(entity.entity): \(entity.itemsWritten) written, \(entity.itemsDeleted) deleted")
    }
    #expect(try Migrator.verify(from: source, to: synced).entities.allSatisfy { $0.differences == 0 })
    let applied = dir.location(kind, "applied")
    try DemoData.seed(applied, items: 400, seed: 21)
    let file = dir.path("swapped.jsonl")
    _ = try Migrator.diff(from: source, to: applied, output: file)
    let counts = try Migrator.apply(diff: file, to: applied)
    #expect(counts.entities.map { $0.updated }.reduce(0, +) == 2 && counts.entities.allSatisfy { $0.deleted == 0 })
    #expect(try Migrator.verify(from: source, to: applied).entities.allSatisfy { $0.differences == 0 })
}

/// A follow that applies the source's feed commit by commit: a commit in which two users swap
/// their emails is applied again with both taken out first.
@Test func aFollowAppliesACommitThatSwapsUniqueValues() throws {
    let dir = try TemporaryDirectory()
    let schema = Schema(version: 1, entities: [
        EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("email", .string)],
                     indexes: [Index("byEmail", on: ["email"], unique: true)]),
    ])
    let source = dir.location(.sqlite, "source")
    let store = try source.open(schema: schema)
    try store.writeSync { w in
        for (id, email) in [(1, "a@x"), (2, "b@x"), (3, "c@x")] as [(Int64, String)] {
            try w.insert(["id": .int(id), "email": .string(email)], into: "User")
        }
    }
    let destination = dir.location(.lmdb, "destination")
    _ = try Migrator.copy(from: source, to: destination)
    try store.writeSync { w in
        try w.delete("User", key: .int(1))
        try w.save(["id": .int(2), "email": .string("a@x")], into: "User")
        try w.insert(["id": .int(1), "email": .string("b@x")], into: "User")
    }
    try store.close()
    let followed = try Migrator.follow(from: source, to: destination,
                                       options: FollowOptions(untilIdle: .milliseconds(300), compareFirst: false))
    #expect(followed.catchUps.isEmpty, "\(followed.catchUps)")
    #expect(try Migrator.verify(from: source, to: destination).entities.allSatisfy { $0.differences == 0 })
}

#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import StoreMigration
import Testing

/// Every item of every entity, in key order.
private func contents(_ location: StoreLocation) throws -> [String: [Record]] {
    let store = try location.open(schema: nil)
    defer { try? store.close() }
    return try store.read { r in
        try Dictionary(uniqueKeysWithValues: store.schema.entities.map { ($0.name, try r.fetch(FetchRequest($0.name))) })
    }
}

/// The suite's fixture items plus values at their edges (``Fixtures/writeEdgeValues(into:)``),
/// and what PostgreSQL's text and COPY's text format treat specially: U+0001 (the escape's
/// own byte), NUL twice, tabs, line breaks, backslashes, `\N`.
private func writeEdges(_ location: StoreLocation) throws {
    let store = try location.open(schema: Fixtures.schema)
    defer { try? store.close() }
    try Fixtures.load(Fixtures.items(150, seed: 4), into: store)
    try Fixtures.writeEdgeValues(into: store)
    try store.writeSync { w in
        // COPY's text format: tabs, line breaks, backslashes and its null marker as text.
        for (i, name) in ["tab\there", "line\nbreak\r", "back\\slash", "\\N", "\\x00", "\u{1}\u{2}"].enumerated() {
            try w.insert(["id": .int(Int64(100_010 + i)), "name": .string(name), "label": .string(name)], into: "Item")
        }
        for key in ["a\u{1}", "a\u{0}\u{0}", "tab\there", "line\nbreak\r", "back\\slash", "\\N", "\\x00"] {
            try w.insert(["key": .string(key), "value": .int(Int64(key.utf8.count)), "note": .string(key)], into: "Keyed")
        }
    }
}

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"), arguments: [StoreKind.sqlite, .lmdb, .memory, .jsonl])
func everyBackendMigratesIntoPostgreSQLAndBackItemForItem(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    func location(_ kind: StoreKind, _ name: String) -> StoreLocation {
        kind == .memory ? StoreLocation(kind: .memory, path: "\(dir.url.lastPathComponent)-\(name)")
            : StoreLocation(kind: kind, path: dir.url.appendingPathComponent("\(name).\(kind.rawValue)").path)
    }
    let postgres = StoreLocation(kind: "postgres",
                                 path: String(PostgresTestServer.location(dir.url.path).description.dropFirst(9)))
    let source = location(kind == .jsonl ? .sqlite : kind, "source")
    let back = location(kind, "back")
    defer { for l in [source, back] where l.kind == .memory { try? l.destroy() } }
    try writeEdges(source)
    var from = source
    if kind == .jsonl {
        from = location(.jsonl, "file")
        _ = try Migrator.copy(from: source, to: from)
    }
    // Batches of 80 go by COPY (Item: 160 items, the edge values in the second), short ones by INSERT.
    let there = try Migrator.copy(from: from, to: postgres, options: MigrationOptions(batchSize: 80))
    #expect(try contents(source)["Item"]?.count == 160)
    #expect(there.verified && there.differences == 0)
    let returned = try Migrator.copy(from: postgres, to: back)
    #expect(returned.verified && returned.differences == 0)
    let original = try contents(source)
    #expect(try contents(postgres) == original)
    #expect(try contents(back) == original)
    #expect(try Migrator.verify(from: back, to: postgres).differences == 0)
    // Doubles bit for bit.
    let ratios = { (l: StoreLocation) in
        try contents(l)["Item"]!.map { record -> UInt64? in
            if case .double(let d) = record["ratio"] { return d.bitPattern }
            return nil
        }
    }
    #expect(try ratios(postgres) == ratios(source))
    try postgres.destroy()
}
#endif

#if Postgres
/// `migrate-store copy` from SQLite into PostgreSQL killed with SIGKILL mid-copy, then again
/// mid-resume, then finished with `--resume`: the store is the source, item for item. (The
/// same with 1,000,000 items and the release build: `Scripts/kill-postgres-migration.sh`.)
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aMigrationIntoPostgreSQLKilledWithSIGKILLTwiceFinishesWithResumeAndIsExact() throws {
    let dir = try TemporaryDirectory()
    let source = StoreLocation(kind: .sqlite, path: dir.url.appendingPathComponent("source.sqlite").path)
    try DemoData.seed(source, items: 30_000, seed: 5)
    let postgres = StoreLocation(kind: "postgres",
                                 path: String(PostgresTestServer.location(dir.url.path).description.dropFirst(9)))
    let tool = CrashRecovery.executable(named: "migrate-store")
    var killed = 0
    for run in 0..<2 {
        let process = Process()
        process.executableURL = tool
        process.arguments = ["copy", "--from", source.description, "--to", postgres.description, "--batch-size", "500",
                             "--progress", "plain"] + (run > 0 ? ["--resume"] : [])
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        // Killed at its first progress line of a copy or of a resume's sync: batches are written.
        var buffer = Data()
        while !String(decoding: buffer, as: UTF8.self).split(separator: "\n")
            .contains(where: { $0.hasPrefix("copy ") || $0.hasPrefix("sync ") }) {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        if process.terminationReason == .uncaughtSignal { killed += 1 }
    }
    #expect(killed == 2, "both runs were killed mid-copy")
    let report = try Migrator.copy(from: source, to: postgres, options: MigrationOptions(batchSize: 500, resume: true))
    #expect(report.resumed && report.verified && report.differences == 0)
    #expect(report.entities.reduce(0) { $0 + $1.itemsWritten } < 30_000, "the resume wrote only what was left")
    #expect(try Migrator.verify(from: source, to: postgres).differences == 0)
    #expect(try contents(postgres) == contents(source))
    try postgres.destroy()
}
#endif

#if Postgres
/// A follow that starts from a position stored in the destination finds writes made to a
/// PostgreSQL source with `psql` (they have no feed entry) since that position: after the next
/// follow, `verify` finds the stores equal.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aFollowFromAStoredPositionFindsWritesMadeWithPsql() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    let source = StoreLocation(kind: "postgres", path: String(location.description.dropFirst(9)))
    defer { try? PostgresStore.destroy(location) }
    let destination = StoreLocation(kind: .lmdb, path: dir.url.appendingPathComponent("destination.lmdb").path)
    try DemoData.seed(source, items: 300, seed: 6)
    _ = try Migrator.copy(from: source, to: destination)
    _ = try Migrator.follow(from: source, to: destination, options: FollowOptions(untilIdle: .milliseconds(200), compareFirst: false))

    // The last order goes with its pairs of products (foreign keys hold in psql too).
    let pairs = Int(try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                                     "-At", "-c", """
        SELECT count(*) FROM "\(location.schema)"."Order_products"
            WHERE "source" = (SELECT max("id") FROM "\(location.schema)"."Order")
        """]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    #expect(pairs >= 1)
    _ = try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                         "-v", "ON_ERROR_STOP=1", "-c", """
        UPDATE "\(location.schema)"."Product" SET "title" = 'changed with psql'
            WHERE "sku" = (SELECT min("sku") FROM "\(location.schema)"."Product");
        DELETE FROM "\(location.schema)"."Order_products" WHERE "source" = (SELECT max("id") FROM "\(location.schema)"."Order");
        DELETE FROM "\(location.schema)"."Order" WHERE "id" = (SELECT max("id") FROM "\(location.schema)"."Order");
        """])
    let report = try Migrator.follow(from: source, to: destination, options: FollowOptions(untilIdle: .milliseconds(200)))
    #expect(report.catchUps.first?.hasPrefix("a follow starts by comparing") == true, "\(report.catchUps)")
    #expect(report.itemsWritten == 1 && report.itemsDeleted == 1 + pairs, "\(report)")
    let verify = try Migrator.verify(from: source, to: destination)
    #expect(verify.differences == 0, "\(verify)")
}

/// migrate-store run to its end: its exit status and its standard error.
private func runCLI(_ arguments: [String]) throws -> (status: Int32, errors: String) {
    let process = Process()
    process.executableURL = CrashRecovery.executable(named: "migrate-store")
    process.arguments = arguments
    let errors = Pipe()
    process.standardOutput = FileHandle.nullDevice
    process.standardError = errors
    try process.run()
    let text = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: text, as: UTF8.self))
}

/// `--overwrite` drops a PostgreSQL store's schema, so it refuses a schema that also holds what
/// is not the store's (an app's table, a view, a function), naming it; one location spelled two
/// ways is one store; a server that does not answer is `unavailable`, never "not a store".
/// A copy given no batch size writes up to 10,000 items a transaction into PostgreSQL (each a
/// round trip or four to the server): its first page of 1,000, then as many as fit in 32 MiB;
/// into the other kinds 1,000; a size given is kept. Each copy is stopped after its second
/// transaction, so the destination holds two pages.
@Test func aCopyTakesItsDestinationsBatchSizeUnlessGivenOne() throws {
    let dir = try TemporaryDirectory()
    let source = StoreLocation(kind: .sqlite, path: dir.url.appendingPathComponent("items.sqlite").path)
    let schema = Schema(entities: [EntitySchema("Item", primaryKey: "id", attributes: [Attribute("id", .int)])])
    let store = try source.open(schema: schema)
    try store.writeSync { w in try w.insert(contentsOf: (0..<12_000).map { ["id": .int(Int64($0))] }, into: "Item") }
    try store.close()
    let sqlite = dir.url.appendingPathComponent("copy.sqlite").path
    let (a, b) = (PostgresTestServer.location(dir.url.path + "/a"), PostgresTestServer.location(dir.url.path + "/b"))
    let cases: [(destination: StoreLocation, schema: String?, given: PositiveInt?, batch: Int)] = [
        (StoreLocation(kind: "postgres", path: String(a.description.dropFirst(9))), a.schema, nil, 1_000 + 10_000),
        (StoreLocation(kind: "postgres", path: String(b.description.dropFirst(9))), b.schema, 2_500, 2 * 2_500),
        (StoreLocation(kind: .sqlite, path: sqlite), nil, nil, 2 * 1_000),
    ]
    for (destination, schema, given, batch) in cases {
        defer { try? destination.destroy() }
        var asked = 0
        #expect(throws: MigrationInterrupted.self) {
            try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: given, verify: false),
                              shouldStop: {
                                  asked += 1
                                  return asked == 2
                              })
        }
        let count = if let schema {
            try PostgresTestServer.psql("SELECT count(*) FROM \"\(schema)\".\"Item\"")
        } else {
            try runCommand("/usr/bin/sqlite3", [sqlite, "SELECT count(*) FROM \"Item\""])
        }
        #expect(count.trimmingCharacters(in: .whitespacesAndNewlines) == String(batch), "\(destination)")
    }
}

@Test func overwriteOnPostgreSQLReplacesOnlyTheStoresOwnSchema() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    let destination = StoreLocation(kind: "postgres", path: String(location.description.dropFirst(9)))
    defer { try? PostgresStore.destroy(location) }
    let source = StoreLocation(kind: .sqlite, path: dir.url.appendingPathComponent("source.sqlite").path)
    try DemoData.seed(source, items: 200, seed: 2)
    _ = try Migrator.copy(from: source, to: destination)
    func psql(_ sql: String) throws {
        _ = try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                             "-v", "ON_ERROR_STOP=1", "-c", sql])
    }
    for (made, dropped, naming) in [
        ("CREATE TABLE \"\(location.schema)\".invoices (id int); INSERT INTO \"\(location.schema)\".invoices VALUES (1)",
         "DROP TABLE \"\(location.schema)\".invoices", "the table invoices"),
        ("CREATE VIEW \"\(location.schema)\".report AS SELECT 1 AS one", "DROP VIEW \"\(location.schema)\".report",
         "the view report"),
        ("CREATE FUNCTION \"\(location.schema)\".tax(int) RETURNS int LANGUAGE sql AS 'SELECT $1'",
         "DROP FUNCTION \"\(location.schema)\".tax(int)", "the function tax"),
        // What a user adds to the store's own tables goes with them.
        ("ALTER TABLE \"\(location.schema)\".\"Product\" ADD COLUMN notes text",
         "ALTER TABLE \"\(location.schema)\".\"Product\" DROP COLUMN notes", "the column notes of the table Product"),
        ("CREATE INDEX by_price ON \"\(location.schema)\".\"Product\" (price)",
         "DROP INDEX \"\(location.schema)\".by_price", "the index by_price on the table Product"),
        ("CREATE FUNCTION public.audit_\(location.schema)() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'; "
            + "CREATE TRIGGER audit AFTER INSERT ON \"\(location.schema)\".\"Order\" FOR EACH ROW EXECUTE FUNCTION "
            + "public.audit_\(location.schema)()",
         "DROP TRIGGER audit ON \"\(location.schema)\".\"Order\"; DROP FUNCTION public.audit_\(location.schema)()",
         "the trigger audit on the table Order"),
        ("ALTER TABLE \"\(location.schema)\".\"Product\" ADD CONSTRAINT positive CHECK (price >= 0)",
         "ALTER TABLE \"\(location.schema)\".\"Product\" DROP CONSTRAINT positive",
         "the check constraint positive of the table Product"),
    ] {
        try psql(made)
        for arguments in [["copy", "--from", source.description, "--to", destination.description, "--overwrite"],
                          ["seed", "--to", destination.description, "--items", "10", "--overwrite"]] {
            let result = try runCLI(arguments)
            #expect(result.status == 2, "\(naming): \(result.errors)")
            #expect(result.errors.contains(naming) && result.errors.contains("not replaced"), "\(result.errors)")
            #expect(result.errors.split(separator: "\n").count == 1, "\(result.errors)")
        }
        #expect {
            try Migrator.copy(from: source, to: destination, options: MigrationOptions(overwrite: true))
        } throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains(naming) }
        try psql(dropped)
    }
    // A type of the user's in the schema; a view in another schema over one of the store's
    // tables: the library's destroy refuses both, and drops nothing.
    try psql("CREATE TYPE \"\(location.schema)\".mood AS ENUM ('ok', 'sad')")
    #expect {
        try destination.destroy()
    } throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("the type mood") }
    try psql("DROP TYPE \"\(location.schema)\".mood")
    let outside = "outside_\(location.schema)"
    try psql("CREATE SCHEMA \(outside); CREATE VIEW \(outside).products AS SELECT * FROM \"\(location.schema)\".\"Product\"")
    #expect {
        try destination.destroy()
    } throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("depends on it") }
    #expect(destination.exists && (try? destination.openSource().close()) != nil, "nothing was dropped")
    try psql("DROP SCHEMA \(outside) CASCADE")
    // An unfinished copy there, beside a user's table: refused as well.
    var batches = 0
    #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: destination,
                          options: MigrationOptions(batchSize: 20, overwrite: true, verify: false),
                          shouldStop: { batches += 1; return batches >= 2 })
    }
    #expect(try Migrator.copyState(of: destination) == .unfinished)
    try psql("CREATE TABLE \"\(location.schema)\".invoices (id int)")
    let unfinished = try runCLI(["copy", "--from", source.description, "--to", destination.description, "--overwrite"])
    #expect(unfinished.status == 2 && unfinished.errors.contains("the table invoices"), "\(unfinished.errors)")
    try psql("DROP TABLE \"\(location.schema)\".invoices")
    // With only the store's own tables, --overwrite replaces it.
    let replaced = try runCLI(["copy", "--from", source.description, "--to", destination.description, "--overwrite"])
    #expect(replaced.status == 0, "\(replaced.errors)")

    // One store, spelled another way: postgresql://, the parameters in another order.
    let respelled = StoreLocation(kind: "postgres",
        path: "//postgres@/datastore?host=\(PostgresTestServer.host)&schema=\(location.schema)")
    #expect(destination.isSameStore(as: respelled))
    let same = try runCLI(["copy", "--from", destination.description, "--to",
                           "postgresql://postgres@/datastore?host=\(PostgresTestServer.host)&schema=\(location.schema)",
                           "--overwrite"])
    #expect(same.status == 2 && same.errors.contains("same store"), "\(same.errors)")
    #expect(!destination.isSameStore(as: StoreLocation(kind: "postgres",
        path: "//postgres@/datastore?host=\(PostgresTestServer.host)&schema=\(location.schema)x")))
    // One server under another spelling of its socket directory: asked, and found the same.
    let otherSpelling = StoreLocation(kind: "postgres",
        path: "//postgres@/datastore?host=\(PostgresTestServer.host)/.&schema=\(location.schema)")
    #expect(destination.isSameStore(as: otherSpelling))

    // A server that does not answer: unavailable, never "not a store of this toolkit".
    let nowhere = try TemporaryDirectory()
    let unreachable = StoreLocation(kind: "postgres", path: "//postgres@/datastore?host=\(nowhere.url.path)"
        + "&schema=\(location.schema)&connect_timeout=2")
    #expect {
        try Migrator.copy(from: source, to: unreachable, options: MigrationOptions(overwrite: true))
    } throws: { ($0 as? StoreError)?.code == .unavailable }
}

/// Ordered to-many relationships from the foreign sources into PostgreSQL: a Realm file's lists
/// of links (Realm Swift's pets, Realm Kotlin's 1,000 games of steps) and a Core Data store's
/// ordered many-to-many, each copied and verified, every list read back in the source's order.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func orderedListsOfForeignSourcesKeepTheirOrderInPostgreSQL() throws {
    let dir = try TemporaryDirectory()
    let realm = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/Realm").path
    let coreData = dir.path("Ordered.sqlite")
    var fixture = CoreDataFixture.Options()
    fixture.orderedManyToMany = true
    try CoreDataFixture.write(at: coreData, fixture)
    let sources: [(StoreLocation, entity: String, list: String)] = [
        (StoreLocation(kind: .realm, path: realm + "/swift-migration-default-v5.f20.realm"), "Person", "pets"),
        (StoreLocation(kind: .realm, path: realm + "/kotlin-random-games.f23.realm"), "SaveGame", "steps"),
        (StoreLocation(kind: .coreData, path: coreData), "Post", "tags"),
    ]
    for (index, (source, entity, list)) in sources.enumerated() {
        let postgres = StoreLocation(kind: "postgres", path: String(PostgresTestServer.location(dir.url.path + "/\(index)")
            .description.dropFirst(9)))
        let report = try Migrator.copy(from: source, to: postgres, options: MigrationOptions(batchSize: 500))
        #expect(report.verified && report.differences == 0, "\(source)")
        let original = try source.openSource()
        let copy = try postgres.open(schema: nil)
        let schema = try #require(original.schema.entity(named: entity))
        #expect(copy.schema.entity(named: entity)?.relationship(named: list)?.isOrdered == true)
        let (want, got) = try (original.read { r in
            try r.fetch(FetchRequest(entity)).map { try r.related(entity, key: schema.primaryKeyValue(of: $0), list) }
        }, copy.read { r in
            try r.fetch(FetchRequest(entity)).map { try r.related(entity, key: schema.primaryKeyValue(of: $0), list) }
        })
        #expect(want.count > 0 && want == got, "\(source): every \(entity).\(list) in its order")
        try original.close()
        try copy.close()
        try postgres.destroy()
    }
}
#endif

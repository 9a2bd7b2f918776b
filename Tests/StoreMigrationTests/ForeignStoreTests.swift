import DataStoreAPI
import DataStoreTestSupport
@testable import ForeignStores
import Foundation
import StoreMigration
import Testing

/// The bytes of each file that exists among `paths`: what must not change when a source is read.
func fileHashes(_ paths: [String]) -> [String: Data] {
    var contents: [String: Data] = [:]
    for path in paths {
        contents[path] = FileManager.default.contents(atPath: path)
    }
    return contents
}

extension Value {
    /// The int, or nil.
    var testInt: Int64? { if case .int(let i) = self { i } else { nil } }
}

func coreDataFiles(_ path: String) -> [String] { [path, path + "-wal", path + "-shm", path + "-journal"] }

/// Copies `source` into a store of `kind` and back to SQLite; returns the contents of both,
/// checking each copy verified without a difference.
func copyThereAndBack(_ source: StoreLocation, via kind: StoreKind, in dir: TemporaryDirectory, name: String = "")
    throws -> (middle: [String: [Record]], back: [String: [Record]])
{
    let middle = dir.location(kind, "middle-\(name)\(kind.rawValue)")
    let back = dir.location(.sqlite, "back-\(name)\(kind.rawValue)")
    defer { if middle.kind == .memory { try? middle.destroy() } }
    let there = try Migrator.copy(from: source, to: middle, options: MigrationOptions(batchSize: 2))
    #expect(there.verified && there.differences == 0)
    let returned = try Migrator.copy(from: middle, to: back)
    #expect(returned.verified && returned.differences == 0)
    return (try contents(middle), try contents(back))
}

@Suite struct CoreDataSourceTests {
    @Test(arguments: [StoreKind.memory, .sqlite, .lmdb], [
        (false, CoreDataModelWriter.InheritedProperties.proxies), (true, .proxies), (false, .fullCopies),
        (true, .fullCopies),
    ])
    func everyItemAndRelationshipCopiesIntoEachBackendAndBack(
        _ kind: StoreKind, _ shape: (wal: Bool, inherited: CoreDataModelWriter.InheritedProperties)) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("Notes.sqlite")
        let wal = shape.wal
        var options = CoreDataFixture.Options()
        options.walWithUnflushedPages = wal
        options.inheritedProperties = shape.inherited
        try CoreDataFixture.write(at: path, options)
        if wal {
            let walSize = (try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            #expect(walSize > 0, "the fixture's WAL holds the posts")
            #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        }
        let before = fileHashes(coreDataFiles(path))
        let source = StoreLocation(kind: .coreData, path: path)
        let (middle, back) = try copyThereAndBack(source, via: kind, in: dir)
        #expect(fileHashes(coreDataFiles(path)) == before, "the store and its -wal/-shm are never written")
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        for copy in [middle, back] {
            #expect(Set(copy.keys) == ["Person", "Post", "Tag", "Post_tags"])
            let people = Dictionary(uniqueKeysWithValues: (copy["Person"] ?? []).map { ($0["pk"].testInt ?? -1, $0) })
            #expect(people.count == 3)
            for (pk, expected) in CoreDataFixture.expectedPeople() {
                for (name, value) in expected {
                    #expect(people[pk]?[name] == value, "Person \(pk).\(name)")
                }
            }
            #expect(people[1]?.attributeNames.contains("nickname") == false, "a transient attribute is not copied")
            let posts = copy["Post"] ?? []
            #expect(posts.count == 6, "the posts only the WAL holds are read")
            #expect(posts.map { $0["author"] } == [.int(1), .int(2), .int(1), .int(2), .int(1), .int(2)])
            #expect(posts.first?["createdAt"] == .date(Timestamp(microsecondsSinceEpoch: 1_578_307_201_500_000)))
            #expect(posts[1]["body"] == .null && posts[0]["body"] == .string("body 1 ✓"))
            // The order of Author.posts: Z_FOK_AUTHOR, kept as the posts' author_position.
            let annsPosts = posts.filter { $0["author"] == .int(1) }.sorted {
                ($0["author_position"].testInt ?? 0) < ($1["author_position"].testInt ?? 0)
            }
            #expect(annsPosts.map { $0["title"] } == [Value.string("Post 5"), .string("Post 3"), .string("Post 1")])
            let pairs = Set((copy["Post_tags"] ?? []).map { "\($0["source"]):\($0["target"])" })
            let expectedPairs = Set((1...6).flatMap { post in
                (1...3).filter { (post + $0) % 2 == 0 }.map { "\(Value.int(Int64(post))):\(Value.int(Int64($0)))" }
            })
            #expect(pairs == expectedPairs)
        }
        #expect(middle == back)
    }

    @Test func relationshipsWorkInTheCopy() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("Notes.sqlite")
        try CoreDataFixture.write(at: path)
        let copy = dir.location(.sqlite, "copy")
        _ = try Migrator.copy(from: StoreLocation(kind: .coreData, path: path), to: copy)
        let store = try copy.open(schema: nil)
        defer { try? store.close() }
        let schema = store.schema
        #expect(schema.entity(named: "Person")?.relationships.map(\.name).sorted() == ["posts"])
        #expect(schema.entity(named: "Person")?.relationships.first?.deleteRule == .cascade)
        #expect(schema.entity(named: "Person")?.relationships.first?.isOrdered == true)
        try store.read { reader in
            let tags = try reader.related("Post", key: .int(1), "tags")
            #expect(tags.map { $0["name"] }.sorted { "\($0)" < "\($1)" } == [.string("tag1"), .string("tag3")])
            // Author.posts is ordered: Ann's posts 5, 3, 1, as Z_FOK_AUTHOR gives them.
            #expect(try reader.related("Person", key: .int(1), "posts").map { $0["title"] }
                == [.string("Post 5"), .string("Post 3"), .string("Post 1")])
        }
        // Cascade, as the model says: deleting Ann deletes her posts and their pairs.
        try store.writeSync { try $0.delete("Person", key: .int(1)) }
        #expect(try store.read { try $0.count(FetchRequest("Post")) } == 3)
    }

    @Test func anOrderedManyToManyKeepsItsOrderThroughACopy() throws {
        let dir = try TemporaryDirectory()
        var options = CoreDataFixture.Options()
        options.orderedManyToMany = true
        let path = dir.path("Ordered.sqlite")
        try CoreDataFixture.write(at: path, options)
        let source = try CoreDataStore(ForeignSource(path: path))
        #expect(source.schema.entity(named: "Post")?.relationship(named: "tags")?.isOrdered == true)
        #expect(source.schema.entity(named: "Post_tags")?.attribute(named: "source_position")?.type == .int)
        try source.close()
        for kind in [StoreKind.sqlite, .lmdb, .memory] {
            let copy = dir.location(kind, "copy-\(kind)")
            defer { if kind == .memory { try? copy.destroy() } }
            let report = try Migrator.copy(from: StoreLocation(kind: .coreData, path: path), to: copy)
            #expect(report.verified && report.differences == 0)
            let store = try copy.open(schema: nil)
            defer { try? store.close() }
            try store.read { reader in
                // Z_FOK_4TAGS puts each post's tags in descending order, not in key order.
                for post in 1...6 {
                    let expected = (1...3).reversed().filter { (post + $0) % 2 == 0 }.map { Value.string("tag\($0)") }
                    let tags = try reader.related("Post", key: .int(Int64(post)), "tags").map { $0["name"] }
                    #expect(tags == expected, "post \(post) on \(kind)")
                }
            }
            // The typed order goes on in the copy: a tag put first is first.
            try store.writeSync { try $0.link("Post", key: .int(2), "tags", to: .int(1), at: 0) }
            #expect(try store.read { try $0.related("Post", key: .int(2), "tags").map { $0["name"] } }
                == [.string("tag1"), .string("tag2")])
        }
    }

    @Test func theModelFileReadsAsTheModelCacheDoes() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("Notes.sqlite")
        try CoreDataFixture.write(at: path)
        let model = dir.path("Notes.xcdatamodeld/Notes.xcdatamodel")
        try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
        try CoreDataFixture.modelXML.write(toFile: model + "/contents", atomically: true, encoding: .utf8)
        let fromCache = try CoreDataStore(ForeignSource(path: path))
        let fromFile = try CoreDataStore(ForeignSource(parsing: path + "?model=" + dir.path("Notes.xcdatamodeld")))
        defer { try? fromCache.close(); try? fromFile.close() }
        #expect(fromCache.schema == fromFile.schema)
        for entity in fromCache.schema.entities {
            #expect(try fromCache.read { try $0.fetch(FetchRequest(entity.name)) }
                == fromFile.read { try $0.fetch(FetchRequest(entity.name)) })
        }
    }

    @Test func aNamedKeyKeysTheItemsAndTheReferences() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("Notes.sqlite")
        try CoreDataFixture.write(at: path)
        let store = try CoreDataStore(ForeignSource(path: path, keys: ["Tag": "name", "Person": "name"]))
        defer { try? store.close() }
        #expect(store.schema.entity(named: "Tag")?.primaryKey == "name")
        let pairs = try store.read { try $0.fetch(FetchRequest("Post_tags")) }
        #expect(pairs.first?["target"] == .string("tag1"))
        let posts = try store.read { try $0.fetch(FetchRequest("Post")) }
        #expect(posts.first?["author"] == .string("Ann"))
        let copy = dir.location(.lmdb, "copy")
        let report = try Migrator.copy(from: StoreLocation(kind: .coreData, path: path + "?key=Tag.name&key=Person.name"),
                                       to: copy)
        #expect(report.verified && report.differences == 0)
    }

    @Test func whatCannotBeCarriedIsRefusedUpFrontNamingIt() throws {
        let dir = try TemporaryDirectory()
        var ordered = CoreDataFixture.Options()
        ordered.orderedManyToMany = true
        try CoreDataFixture.write(at: dir.path("Ordered.sqlite"), ordered)
        var composite = CoreDataFixture.Options()
        composite.compositeAttribute = true
        try CoreDataFixture.write(at: dir.path("Composite.sqlite"), composite)
        #expect { try CoreDataStore(ForeignSource(path: dir.path("Composite.sqlite"))) } throws: { error in
            "\(error)".contains("attribute 'Tag.size' is a composite whose elements the model does not give")
        }
        #expect { try CoreDataStore(ForeignSource(path: dir.path("Ordered.sqlite"), keys: ["Tag": "missing"])) }
            throws: { "\($0)".contains("'missing' is not an attribute of 'Tag'") }
        // A plain SQLite file is not a Core Data store; a Core Data store is not a plain database.
        #expect { try CoreDataStore(ForeignSource(path: dir.path("Composite.sqlite") + "x")) } throws: {
            "\($0)".contains("does not exist")
        }
        #expect { try PlainSQLiteStore(ForeignSource(path: dir.path("Ordered.sqlite"))) } throws: {
            "\($0)".contains("is a Core Data store: read it as coredata:")
        }
    }
}

/// Runs SQL in a new database at `path` with the sqlite3 shell, as a user's tool would make it.
func sqliteShell(_ path: String, _ sql: String) throws {
    _ = try runCommand("/usr/bin/sqlite3", [path, sql])
}

@Suite struct PlainSQLiteSourceTests {
    static let grdb = """
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES ('v1');
        CREATE TABLE author (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, country TEXT,
          createdAt DATETIME NOT NULL, uuid BLOB);
        CREATE TABLE book (id INTEGER PRIMARY KEY AUTOINCREMENT,
          authorId INTEGER NOT NULL REFERENCES author(id) ON DELETE CASCADE, title TEXT NOT NULL, price DOUBLE,
          isPublished BOOLEAN NOT NULL DEFAULT 0);
        CREATE UNIQUE INDEX book_on_title ON book(title);
        CREATE INDEX book_on_authorId ON book(authorId);
        INSERT INTO author VALUES (1, 'Ann', 'FR', '2020-01-02 03:04:05.678', X'00112233445566778899AABBCCDDEEFF'),
          (2, 'Bob', NULL, '2021-06-07 08:09:10.000', NULL);
        INSERT INTO book VALUES (1, 1, 'A', 9.5, 1), (2, 1, 'B', NULL, 0), (3, 2, 'C', 3, 1);
        CREATE TABLE tag (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);
        CREATE TABLE bookTag (bookId INTEGER NOT NULL REFERENCES book(id) ON DELETE CASCADE,
          tagId INTEGER NOT NULL REFERENCES tag(id) ON DELETE CASCADE, PRIMARY KEY (bookId, tagId));
        INSERT INTO tag VALUES (1, 'novel'), (2, 'short');
        INSERT INTO bookTag VALUES (1, 1), (1, 2), (3, 2);
        """
    static let sqliteSwift = """
        CREATE TABLE "users" ("id" INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, "email" TEXT NOT NULL UNIQUE,
          "name" TEXT, "joined" TEXT);
        CREATE TABLE "posts" ("id" INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
          "userId" INTEGER REFERENCES "users"("id") ON DELETE SET NULL, "body" TEXT NOT NULL, "stars" INTEGER);
        INSERT INTO users VALUES (1, 'a@x', 'A', '2019-01-01T10:00:00.000'), (2, 'b@x', NULL, NULL);
        INSERT INTO posts VALUES (1, 1, 'hello', 5), (2, NULL, 'orphan', NULL);
        """
    static let everyAffinity = """
        CREATE TABLE item (id TEXT PRIMARY KEY, i INT, t VARCHAR(20), b BLOB, r FLOAT, n NUMERIC, nr DECIMAL(10,2),
          untyped, ts TIMESTAMP, u UUID, flag BOOL) WITHOUT ROWID;
        INSERT INTO item VALUES ('a', 1, 'x', X'01', 1.5, 3, 2.25, 'free', 1600000000, X'00112233445566778899AABBCCDDEEFF', 1),
          ('b', NULL, NULL, NULL, NULL, NULL, 7, NULL, NULL, NULL, 0);
        CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE c_cascade (id INTEGER PRIMARY KEY, p INTEGER REFERENCES parent(id) ON DELETE CASCADE);
        CREATE TABLE c_setnull (id INTEGER PRIMARY KEY, p INTEGER REFERENCES parent(id) ON DELETE SET NULL);
        CREATE TABLE c_restrict (id INTEGER PRIMARY KEY, p INTEGER REFERENCES parent(id) ON DELETE RESTRICT);
        CREATE TABLE c_noaction (id INTEGER PRIMARY KEY, p INTEGER REFERENCES parent(id));
        INSERT INTO parent VALUES (1), (2);
        INSERT INTO c_cascade VALUES (1, 1); INSERT INTO c_setnull VALUES (1, 1);
        INSERT INTO c_restrict VALUES (1, 2); INSERT INTO c_noaction VALUES (1, 2);
        """

    @Test(arguments: [StoreKind.memory, .sqlite, .lmdb])
    func typicalDatabasesCopyIntoEachBackendAndBack(_ kind: StoreKind) throws {
        let dir = try TemporaryDirectory()
        for (name, sql) in [("grdb", Self.grdb), ("sqliteswift", Self.sqliteSwift), ("affinities", Self.everyAffinity)] {
            let path = dir.path("\(name).db")
            try sqliteShell(path, sql)
            let before = fileHashes(coreDataFiles(path))
            let (middle, back) = try copyThereAndBack(StoreLocation(kind: .plainSQLite, path: path), via: kind, in: dir,
                                                    name: name)
            #expect(middle == back)
            #expect(fileHashes(coreDataFiles(path)) == before)
            switch name {
            case "grdb":
                let author = middle["author"]?.first
                #expect(author?["createdAt"] == .date(Timestamp(microsecondsSinceEpoch: 1_577_934_245_678_000)))
                #expect(author?["uuid"] == .uuid(UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!))
                #expect(middle["book"]?.map { $0["isPublished"] } == [.bool(true), .bool(false), .bool(true)])
                #expect(middle["book"]?[1]["price"] == .null && middle["book"]?[2]["price"] == .double(3))
                #expect(middle["grdb_migrations"]?.count == 1)
                #expect(middle["bookTag"] == nil, "a join table is a many-to-many, not an entity")
                #expect(Set((middle["book_bookTag"] ?? []).map { "\($0["source"]):\($0["target"])" })
                    == ["1:1", "1:2", "3:2"])
            case "sqliteswift":
                #expect(middle["users"]?.first?["joined"] == .date(Timestamp(microsecondsSinceEpoch: 1_546_336_800_000_000)))
                #expect(middle["posts"]?[1]["userId"] == .null)
            default:
                let a = middle["item"]?.first
                #expect(a?["i"] == .int(1) && a?["t"] == .string("x") && a?["b"] == .bytes([1]) && a?["r"] == .double(1.5))
                #expect(a?["n"] == .int(3) && a?["nr"] == .double(2.25) && a?["untyped"] == .string("free"))
                #expect(a?["ts"] == .date(Timestamp(microsecondsSinceEpoch: 1_600_000_000_000_000)))
                #expect(a?["flag"] == .bool(true) && middle["item"]?[1]["nr"] == .double(7))
            }
        }
    }

    @Test func aJoinTableBecomesAManyToMany() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("grdb.db")
        try sqliteShell(path, Self.grdb)
        let copy = dir.location(.lmdb, "copy")
        _ = try Migrator.copy(from: StoreLocation(kind: .plainSQLite, path: path), to: copy)
        let store = try copy.open(schema: nil)
        defer { try? store.close() }
        let tags = try store.read { try $0.related("book", key: .int(1), "bookTag") }
        #expect(tags.map { $0["name"] } == [.string("novel"), .string("short")])
        #expect(try store.read { try $0.related("tag", key: .int(2), "bookTag") }.map { $0["title"] }
            == [.string("A"), .string("C")])
        // ON DELETE CASCADE in the join table: deleting a book removes its pairs, not the tags.
        try store.writeSync { try $0.delete("book", key: .int(1)) }
        #expect(try store.read { try $0.count(FetchRequest("tag")) } == 2)
        #expect(try store.read { try $0.related("tag", key: .int(2), "bookTag") }.count == 1)
    }

    @Test func foreignKeysBecomeRelationshipsWithTheirDeleteRules() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("rules.db")
        try sqliteShell(path, Self.everyAffinity)
        let store = try PlainSQLiteStore(ForeignSource(path: path))
        defer { try? store.close() }
        let parent = store.schema.entity(named: "parent")
        func rule(_ name: String) -> Relationship.DeleteRule? { parent?.relationships.first { $0.name == name }?.deleteRule }
        #expect(rule("c_cascade") == .cascade && rule("c_setnull") == .nullify)
        #expect(rule("c_restrict") == .deny && rule("c_noaction") == .deny)
        let copy = dir.location(.sqlite, "copy")
        _ = try Migrator.copy(from: StoreLocation(kind: .plainSQLite, path: path), to: copy)
        let copied = try copy.open(schema: nil)
        defer { try? copied.close() }
        // Deleting parent 1 cascades and sets null; parent 2 is refused while restricted rows remain.
        try copied.writeSync { try $0.delete("parent", key: .int(1)) }
        #expect(try copied.read { try $0.count(FetchRequest("c_cascade")) } == 0)
        #expect(try copied.read { try $0.get("c_setnull", key: .int(1)) }?["p"] == .null)
        #expect(throws: StoreError.self) { try copied.writeSync { try $0.delete("parent", key: .int(2)) } }
    }

    @Test(arguments: [
        ("CREATE TABLE pair (a INTEGER, b INTEGER, PRIMARY KEY (a, b));", "table 'pair' has a composite primary key (a, b)"),
        ("CREATE TABLE log (msg TEXT);", "table 'log' has no primary key"),
        ("CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (id INTEGER PRIMARY KEY, p INTEGER DEFAULT 1 "
            + "REFERENCES p(id) ON DELETE SET DEFAULT);", "ON DELETE SET DEFAULT"),
        ("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER); INSERT INTO t VALUES (1, 'many');",
         "t.n is declared 'INTEGER' (an int) but holds 1 text values"),
        ("CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (id INTEGER PRIMARY KEY, p INTEGER REFERENCES p(id)); "
            + "INSERT INTO c VALUES (1, 9);", "table 'c', row with rowid 1, refers to an item of 'p' that does not exist"),
    ])
    func whatCannotBeCarriedIsRefusedInOneLine(_ sql: String, _ message: String) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("bad.db")
        try sqliteShell(path, sql)
        #expect { try PlainSQLiteStore(ForeignSource(path: path)) } throws: { error in
            "\(error)".contains(message) && !"\(error)".contains("\n")
        }
        let output = try runCommand(migrateStore.path, ["copy", "--from", "plain-sqlite:\(path)",
                                                         "--to", "lmdb:\(dir.path("out.lmdb"))"], allowingFailure: true)
        #expect(output.contains(message))
        #expect(!FileManager.default.fileExists(atPath: dir.path("out.lmdb")))
    }

    @Test func aNamedKeyHeldTwiceOrNullIsRefusedAndUuidTextKeysAreStrings() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("log.db")
        try sqliteShell(path, """
            CREATE TABLE log (msg TEXT, code TEXT); INSERT INTO log VALUES ('a', 'x'), ('b', 'x');
            CREATE TABLE device (id UUID PRIMARY KEY, name TEXT);
            INSERT INTO device VALUES ('5c1a0000-0000-4000-8000-000000000002', 'b'), ('0a1a0000-0000-4000-8000-000000000001', 'a');
            """)
        #expect { try PlainSQLiteStore(ForeignSource(parsing: path + "?key=log.code")) } throws: {
            "\($0)".contains("log.code keys the items but holds \"x\" more than once")
        }
        try sqliteShell(path, "UPDATE log SET code = NULL WHERE msg = 'b'")
        #expect { try PlainSQLiteStore(ForeignSource(parsing: path + "?key=log.code")) } throws: {
            "\($0)".contains("log.code keys the items but holds null in the row rowid = 2")
        }
        try sqliteShell(path, "UPDATE log SET code = 'y' WHERE msg = 'b'")
        let store = try PlainSQLiteStore(ForeignSource(parsing: path + "?key=log.code"))
        #expect(store.schema.entity(named: "device")?.attribute(named: "id")?.type == .string)
        #expect(try store.read { try $0.fetch(FetchRequest("device")) }.map { $0["name"] } == [.string("a"), .string("b")])
        try store.close()
        let copy = dir.location(.lmdb, "copy")
        let report = try Migrator.copy(from: StoreLocation(kind: .plainSQLite, path: path + "?key=log.code"), to: copy,
                                       options: MigrationOptions(batchSize: 1))
        #expect(report.verified && report.differences == 0)
    }

    @Test func aNamedKeyColumnOrRowidKeysATableWithout() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("log.db")
        try sqliteShell(path, "CREATE TABLE log (msg TEXT, code TEXT NOT NULL UNIQUE); INSERT INTO log VALUES ('a', 'x'), ('b', 'y');")
        let byRowid = try PlainSQLiteStore(ForeignSource(parsing: path + "?key=log.rowid"))
        #expect(try byRowid.read { try $0.fetch(FetchRequest("log")) }.map { $0["rowid"] } == [.int(1), .int(2)])
        try byRowid.close()
        let copy = dir.location(.lmdb, "copy")
        let report = try Migrator.copy(from: StoreLocation(kind: .plainSQLite, path: path + "?key=log.code"), to: copy)
        #expect(report.verified && report.entities.first?.itemsWritten == 2)
    }
}

@Test func theDiagramShowsWhatACopyWillHold() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("Notes.sqlite")
    try CoreDataFixture.write(at: path)
    let output = try runCommand(migrateStore.path, ["inspect", "--diagram", "mermaid", "coredata:\(path)"])
    #expect(output.hasPrefix("erDiagram\n    Person {\n        int pk PK\n        string entity\n"))
    #expect(output.contains("    Person |o--o{ Post : \"posts (ordered)\"\n"), "Author.posts is ordered")
    #expect(output.contains("    Post }o--o{ Tag : tags"))
    #expect(output.contains("        int author FK \"optional\"\n"))
    #expect(!output.contains("Post_tags {"), "the join entity is drawn as its many-to-many")
    let dot = try runCommand(migrateStore.path, ["inspect", "--diagram", "dot", "coredata:\(path)"])
    #expect(dot.hasPrefix("digraph schema {") && dot.contains("Post -> Tag [label=\"tags\", dir=both"))
}

@Test func theCommandLineTakesTheModelAndKeysAndRefusesToFollow() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("Notes.sqlite")
    try CoreDataFixture.write(at: path)
    let model = dir.path("Notes.xcdatamodel")
    try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
    try CoreDataFixture.modelXML.write(toFile: model + "/contents", atomically: true, encoding: .utf8)
    let copied = try runCommand(migrateStore.path, [
        "copy", "--from", "coredata:\(path)", "--model", model, "--key", "Tag=name", "--to", dir.path("out.lmdb"),
        "--progress", "none"])
    #expect(copied.contains("verified: every item equals the source snapshot"))
    let inspected = try runCommand(migrateStore.path, ["inspect", dir.path("out.lmdb")])
    #expect(inspected.contains("Tag: 3 items, primary key name"))
    // The resume record names the source with its options: verify reads it the same way.
    let verified = try runCommand(migrateStore.path, ["verify", "--from", "coredata:\(path)", "--key", "Tag=name",
                                                      "--to", dir.path("out.lmdb"), "--progress", "none"])
    #expect(verified.contains("verified: every item equals the source snapshot"))
    let followed = try runCommand(migrateStore.path, ["copy", "--from", "coredata:\(path)", "--to",
                                                      dir.path("other.lmdb"), "--follow"], allowingFailure: true)
    #expect(followed.contains("cannot be followed: a coredata source is read from a snapshot"))
    let wrongKind = try runCommand(migrateStore.path, ["copy", "--from", dir.path("out.lmdb"), "--key", "Tag=name",
                                                       "--to", dir.path("x.sqlite")], allowingFailure: true)
    #expect(wrongKind.contains("--model and --key read coredata:, plain-sqlite: and realm: sources"))
    // export and diff read a foreign source as any other.
    let exported = try runCommand(migrateStore.path, ["export", "--from", "coredata:\(path)", "--entity", "Tag",
                                                      "--relationships", "ids"])
    // Tag 1 is paired with the posts p where p + 1 is even.
    #expect(exported.contains(#"{"pk":1,"name":"tag1","posts":[1,3,5]}"#), "\(exported)")
    let diff = try runCommand(migrateStore.path, ["diff", "--from", "coredata:\(path)", "--key", "Tag=name",
                                                  "--to", dir.path("out.lmdb")])
    #expect(diff.contains("0 differences"), "\(diff)")
    let adopt = try runCommand(migrateStore.path, ["adopt", "sqlite:\(dir.path("app.db"))"], allowingFailure: true)
    #expect(adopt.contains("a database is not adopted in place")
        && adopt.contains("migrate-store copy --from plain-sqlite:\(dir.path("app.db")) --to sqlite:\(dir.path("app")).sqlite"))
}

/// Damaged Core Data stores: every byte of the model cache changed in turn (a sample), the file
/// cut short, another file in its place. Each is refused with an error or read; none crashes.
@Test(arguments: CoreDataModelWriter.InheritedProperties.allCases)
func damagedCoreDataStoresAreRefusedNeverCrash(_ inherited: CoreDataModelWriter.InheritedProperties) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("Notes.sqlite")
    var options = CoreDataFixture.Options()
    options.inheritedProperties = inherited
    try CoreDataFixture.write(at: path, options)
    let pristine = try Data(contentsOf: URL(fileURLWithPath: path))
    let blob = try sqliteBlob(path, "SELECT Z_CONTENT FROM Z_MODELCACHE")
    var refused = 0, read = 0
    /// Puts `cache` in the pristine store's Z_MODELCACHE and reads every entity: read or refused.
    func readWithModelCache(_ cache: [UInt8]) throws {
        try pristine.write(to: URL(fileURLWithPath: path))
        // Through the C API, the cache bound as a blob: a shell process and a hex literal for
        // each of a thousand caches cost the test most of its time.
        let database = try FixtureDatabase(path)
        try database.insert("UPDATE Z_MODELCACHE SET Z_CONTENT = ?", [cache])
        database.close()
        do {
            let store = try CoreDataStore(ForeignSource(path: path))
            _ = try store.read { r in try store.schema.entities.map { try r.fetch(FetchRequest($0.name)).count } }
            try store.close()
            read += 1
        } catch {
            #expect(!"\(error)".isEmpty)
            refused += 1
        }
    }
    for position in stride(from: 0, to: blob.count, by: max(1, blob.count / 150)) {
        for flip: UInt8 in [0x01, 0x80, 0xFF] {
            var damaged = blob
            damaged[position] ^= flip
            try readWithModelCache(damaged)
        }
    }
    // The archive itself damaged (then compressed as Core Data does): the property list reader
    // and the object graph reader see every kind of wrong byte.
    let archive = try CoreDataFixture.modelArchive(options)
    for position in stride(from: 0, to: archive.count, by: max(1, archive.count / 200)) {
        for flip: UInt8 in [0x01, 0x10, 0xFF] {
            var damaged = archive
            damaged[position] ^= flip
            try readWithModelCache(try CoreDataFixture.deflateRaw(damaged))
        }
    }
    #expect(refused > 0 && read > 0)
    // The file cut short, and files that are not Core Data stores.
    try pristine.prefix(pristine.count / 2).write(to: URL(fileURLWithPath: path))
    #expect(throws: (any Error).self) { try CoreDataStore(ForeignSource(path: path)) }
    try Data("not a database".utf8).write(to: URL(fileURLWithPath: path))
    #expect { try CoreDataStore(ForeignSource(path: path)) } throws: { "\($0)".contains("not a readable SQLite database") }
    #expect { try CoreDataStore(ForeignSource(path: dir.url.path)) } throws: { !"\($0)".isEmpty }
    try sqliteShell(dir.path("plain.db"), "CREATE TABLE t (id INTEGER PRIMARY KEY)")
    #expect { try CoreDataStore(ForeignSource(path: dir.path("plain.db"))) } throws: {
        "\($0)".contains("is not a Core Data store: it has no Z_PRIMARYKEY table")
    }
}

/// The bytes of the first value of `sql` in the database at `path`.
func sqliteBlob(_ path: String, _ sql: String) throws -> [UInt8] {
    let hex = try runCommand("/usr/bin/sqlite3", [path, "SELECT hex((\(sql)))"]).trimmingCharacters(in: .whitespacesAndNewlines)
    var bytes: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
        bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
        index = next
    }
    return bytes
}

/// The archive reader and the fixture's writer each agree with Foundation: the reader reads what
/// Foundation's NSKeyedArchiver writes, and Foundation reads the fixture's model cache archive.
@Test func archivesAgreeWithFoundation() throws {
    let archiver = NSKeyedArchiver(requiringSecureCoding: false)
    archiver.encode(NSDictionary(dictionary: ["Post": NSArray(array: ["title", "body ✓"])]), forKey: "root")
    archiver.finishEncoding()
    let archive = try KeyedArchive(propertyList: archiver.encodedData, what: "Foundation's archive")
    let strings = archive.objects.compactMap { value -> String? in
        if case .string(let text) = value { return text } else { return nil }
    }
    #expect(Set(strings).isSuperset(of: ["$null", "Post", "title", "body ✓"]))
    let dictionaries = archive.objects.compactMap { value -> KeyedArchive.Fields? in
        if case .dictionary(let fields) = value { return fields } else { return nil }
    }
    #expect(dictionaries.contains { archive.className($0) == "NSDictionary" })
    let array = dictionaries.first { archive.className($0) == "NSArray" }
    #expect(array.map { fields in
        if case .array(let items)? = fields["NS.objects"] { return items.compactMap { archive.object($0) }.count }
        return 0
    } == 2)

    let fixture = Data(try CoreDataFixture.modelArchive())
    let parsed = try PropertyListSerialization.propertyList(from: fixture, format: nil) as? [String: Any]
    #expect(parsed?["$archiver"] as? String == "NSKeyedArchiver")
    let objects = parsed?["$objects"] as? [Any] ?? []
    #expect(objects.count == (try KeyedArchive(propertyList: fixture, what: "the fixture")).objects.count)
    #expect(objects.contains { ($0 as? String) == "NSEntityDescription" } == false)
    #expect(objects.contains { ($0 as? [String: Any])?["$classname"] as? String == "NSEntityDescription" })
}

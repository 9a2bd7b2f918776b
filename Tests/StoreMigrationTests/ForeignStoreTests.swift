import DataStoreAPI
import DataStoreTestSupport
import ForeignStores
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
func copyThereAndBack(_ source: StoreLocation, via kind: StoreKind, in dir: TemporaryDirectory)
    throws -> (middle: [String: [Record]], back: [String: [Record]])
{
    let middle = dir.location(kind, "middle-\(kind.rawValue)")
    let back = dir.location(.sqlite, "back-\(kind.rawValue)")
    defer { if middle.kind == .memory { try? middle.destroy() } }
    let there = try Migrator.copy(from: source, to: middle, options: MigrationOptions(batchSize: 2))
    #expect(there.verified && there.differences == 0)
    let returned = try Migrator.copy(from: middle, to: back)
    #expect(returned.verified && returned.differences == 0)
    return (try contents(middle), try contents(back))
}

@Suite struct CoreDataSourceTests {
    @Test(arguments: [StoreKind.memory, .sqlite, .lmdb], [false, true])
    func everyItemAndRelationshipCopiesIntoEachBackendAndBack(_ kind: StoreKind, wal: Bool) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("Notes.sqlite")
        var options = CoreDataFixture.Options()
        options.walWithUnflushedPages = wal
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
            // The order of Author.posts: descending Z_FOK_AUTHOR, kept as authorOrder.
            let annsPosts = posts.filter { $0["author"] == .int(1) }.sorted {
                ($0["authorOrder"].testInt ?? 0) < ($1["authorOrder"].testInt ?? 0)
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
        try store.read { reader in
            let tags = try reader.related("Post", key: .int(1), "tags")
            #expect(tags.map { $0["name"] }.sorted { "\($0)" < "\($1)" } == [.string("tag1"), .string("tag3")])
        }
        // Cascade, as the model says: deleting Ann deletes her posts and their pairs.
        try store.writeSync { try $0.delete("Person", key: .int(1)) }
        #expect(try store.read { try $0.count(FetchRequest("Post")) } == 3)
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
        #expect { try CoreDataStore(ForeignSource(path: dir.path("Ordered.sqlite"))) } throws: { error in
            "\(error)".contains("'Post.tags' is an ordered many-to-many")
        }
        var composite = CoreDataFixture.Options()
        composite.compositeAttribute = true
        try CoreDataFixture.write(at: dir.path("Composite.sqlite"), composite)
        #expect { try CoreDataStore(ForeignSource(path: dir.path("Composite.sqlite"))) } throws: { error in
            "\(error)".contains("attribute 'Tag.size' is of the composite type")
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

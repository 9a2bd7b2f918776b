@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
@_spi(Backend) import InMemoryStore
import JSONLStore
@_spi(Backend) @testable import StoreMigration
import Synchronization
import Testing

/// What an outside review found, one test per defect, each failing before its fix.

// MARK: 1. A copy whose marker cannot be read

/// An in-memory engine whose reads of the unfinished-copy marker fail, as a damaged record or a
/// failing disk makes them: the store opens (the migration engine opens unfinished stores
/// without reading it), and the one record that says "not finished" cannot be read.
private final class UnreadableMarkerEngine: StorageEngine {
    let inner: InMemoryEngine
    init(_ inner: InMemoryEngine) { self.inner = inner }
    var schema: Schema { inner.schema }
    func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try inner.withReader { try body(UnreadableMarkerReader(base: $0)) }
    }
    func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T { try inner.withWriter(body) }
    func close() throws { try inner.close() }
}

private final class UnreadableMarkerReader: StorageReader {
    let base: any StorageReader
    init(base: any StorageReader) { self.base = base }
    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? { try base.get(entity, key: key) }
    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int { try base.count(filter, in: entity) }
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        try base.scan(entity, after: key, limit: limit)
    }
    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] { try base.fetch(request, in: entity) }
    func metadata(forKey key: String) throws -> [UInt8]? {
        guard key != MetadataKeys.incompleteMigration else {
            throw StoreError(.io, "the page holding the record cannot be read")
        }
        return try base.metadata(forKey: key)
    }
}

/// In-memory databases by path, for the test backends below (each kind a registry of its own).
private final class TestDatabases: Sendable {
    private let databases = Mutex<[String: InMemoryDatabase]>([:])
    func exists(_ path: String) -> Bool { databases.withLock { $0[path] != nil } }
    func database(_ path: String) -> InMemoryDatabase {
        databases.withLock { all in
            if let existing = all[path] { return existing }
            let made = InMemoryDatabase()
            all[path] = made
            return made
        }
    }
    func destroy(_ path: String) { databases.withLock { _ = $0.removeValue(forKey: path) } }
    func move(_ path: String, to other: String) { databases.withLock { all in all[other] = all.removeValue(forKey: path) } }
}

/// A registered kind of in-memory stores that `wrap` hands out.
private struct TestBackend: StoreBackend {
    let kind: StoreKind
    let wrap: @Sendable (InMemoryDatabase, Schema?, SchemaUpgrades) throws -> any DataStore
    private let databases = TestDatabases()
    init(_ kind: StoreKind, wrap: @escaping @Sendable (InMemoryDatabase, Schema?, SchemaUpgrades) throws -> any DataStore) {
        self.kind = kind
        self.wrap = wrap
    }
    var fileExtension: String? { nil }
    func exists(at path: String) -> Bool { databases.exists(path) }
    func recognizes(_ path: String) -> Bool { false }
    func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore {
        try wrap(databases.database(path), schema, upgrades)
    }
    func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try open(at: path, schema: nil, upgrades: SchemaUpgrades(), durability: .full)
    }
    func check(at path: String) throws -> EngineCheck { EngineCheck("none") }
    func destroy(at path: String) throws { databases.destroy(path) }
    func move(from path: String, to other: String) throws { databases.move(path, to: other) }
    func sizeOnDisk(at path: String) -> Int64 { 0 }
}

/// The kind `unreadable-marker`: in-memory stores whose marker cannot be read.
private let unreadableMarkerBackend = TestBackend("unreadable-marker") { database, schema, _ in
    try Store(engine: UnreadableMarkerEngine(try InMemoryEngine(database: database, schema: schema)))
}

@Test func aCopyWhoseMarkerCannotBeReadIsNeverComplete() throws {
    StoreBackends.register(unreadableMarkerBackend)
    let location = StoreLocation(kind: "unreadable-marker", path: "copy-\(UUID().uuidString)")
    let store = try Migrator.acceptingUnfinished { try location.open(schema: Fixtures.schema) }
    try store.writeSync { try $0.setReservedMetadata(Array("sqlite:source.sqlite".utf8),
                                                     forKey: MetadataKeys.incompleteMigration) }
    try store.close()
    #expect { try Migrator.copyState(of: location) } throws: { error in
        guard let error = error as? StoreError else { return false }
        return error.code == .corrupt && error.message.hasPrefix("\(location): its unfinished-copy marker")
            && error.message.contains("whether the copy into it finished is unknown")
    }
    // An app's open does not take it for a finished store either.
    #expect(throws: StoreError.self) { try location.open(schema: nil) }
    // A resume and a check say the same, never "complete".
    #expect { try Migrator.copy(from: location, to: StoreLocation(kind: .memory, path: "x-\(UUID().uuidString)"),
                                options: MigrationOptions(resume: true)) } throws: { _ in true }
    #expect { try location.check() } throws: { ($0 as? StoreError)?.code == .corrupt }
}

// MARK: 2. A damaged import checkpoint

@Test(arguments: [StoreKind.sqlite, .lmdb])
func aDamagedImportCheckpointIsDamageNotAFreshStart(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let location = dir.location(kind, "store")
    try DemoData.seed(location, items: 200, seed: 4)
    let json = dir.path("products.json")
    try Data(#"[{"sku": "new-1", "title": "t", "price": 1.5, "stock": 2}]"#.utf8).write(to: URL(fileURLWithPath: json))
    let store = try location.open(schema: nil)
    try store.writeSync { try $0.setReservedMetadata(Array(#"{"run": 7, "#.utf8), forKey: "datastore.import.checkpoint") }
    let before = try store.read { try $0.count(FetchRequest("Product")) }
    var options = JSONImport.Options()
    options.storeName = location.description
    #expect { try JSONImport.run(json, into: store, entity: "Product", options: options) } throws: { error in
        guard let error = error as? StoreError else { return false }
        return error.code == .corrupt && error.message.hasPrefix("\(location.description): its import checkpoint")
            && error.message.contains("migrate-store check")
    }
    #expect(try store.read { try $0.count(FetchRequest("Product")) } == before, "nothing imported or deleted")
    try store.close()
    let cli = try runCLI(["import", json, "--to", location.description, "--entity", "Product"])
    #expect(cli.status == 2, "\(cli.errors)")
    #expect(cli.errors.contains("import checkpoint") && cli.errors.contains(location.path), "\(cli.errors)")
}

@Test func theMigrationCheckpointNamesTheLocationInItsCommand() throws {
    let dir = try TemporaryDirectory()
    let location = dir.location(.sqlite, "store")
    let store = try location.open(schema: Fixtures.schema)
    defer { try? store.close() }
    try store.writeSync { try $0.setReservedMetadata(Array("{".utf8), forKey: Migrator.checkpointKey) }
    #expect { try Migrator.checkpoint(of: store, at: location) } throws: { error in
        "\(error)".contains("check the store with: migrate-store check \(location.description)")
    }
}

// MARK: 3. The key of a Core Data hierarchy

@Test func twoKeysInOneCoreDataHierarchyAreRefusedTheSameWayInEveryProcess() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("Garage.sqlite")
    try GarageFixture.write(at: path)
    var messages: Set<String> = []
    for _ in 0..<2 {
        // Two processes: a dictionary's order differs between them.
        let result = try runCLI(["copy", "--from", "coredata:\(path)", "--key", "Car.doors", "--key", "Vehicle.vin",
                                 "--to", dir.path("out-\(UUID().uuidString).lmdb")])
        #expect(result.status == 2, "\(result.errors)")
        messages.insert(result.errors)
    }
    #expect(messages.count == 1, "\(messages)")
    let message = try #require(messages.first)
    #expect(message.contains("key=Car.doors and key=Vehicle.vin name keys of one hierarchy"), "\(message)")
    // Several unknown names, all named, in one order.
    var unknown: Set<String> = []
    for _ in 0..<2 {
        let result = try runCLI(["copy", "--from", "coredata:\(path)", "--key", "Zebra.a", "--key", "Aardvark.b",
                                 "--key", "Mole.c", "--to", dir.path("out-\(UUID().uuidString).lmdb")])
        #expect(result.status == 2)
        unknown.insert(result.errors)
    }
    #expect(unknown.count == 1, "\(unknown)")
    #expect(unknown.first?.contains("key=Aardvark.b, key=Mole.c, key=Zebra.a") == true, "\(unknown)")
}

// MARK: 4 and 5. Names from a file, and the model's XML

/// A Core Data store of one entity whose attribute names come from `names`, with the model as
/// XML (`--model`), written with plain SQL as a crafted file would be.
private func craftedCoreDataStore(_ dir: TemporaryDirectory, names: [String], modelXML: String? = nil)
    throws -> (store: String, model: String) {
    let path = dir.path("Crafted-\(UUID().uuidString).sqlite")
    let database = try FixtureDatabase(path)
    let columns = names.map { ForeignSQL.quote("Z" + $0.uppercased()) + " VARCHAR" }.joined(separator: ", ")
    try database.exec("""
        CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
        CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
        CREATE TABLE ZNOTE (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, \(columns));
        INSERT INTO Z_PRIMARYKEY VALUES (1, 'Note', 0, 2);
        INSERT INTO Z_METADATA VALUES (1, 'C0FFEE00-0000-4000-8000-000000000002', X'');
        """)
    for row in 1...2 {
        let values = names.indices.map { "'v\(row)-\($0)'" }.joined(separator: ", ")
        try database.exec("INSERT INTO ZNOTE VALUES (\(row), 1, 1, \(values))")
    }
    database.close()
    let model = dir.path("Crafted-\(UUID().uuidString).xcdatamodel")
    try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
    func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;")
    }
    let attributes = names.map { "<attribute name=\"\(escaped($0))\" optional=\"YES\" attributeType=\"String\"/>" }
    let xml = modelXML ?? """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
            <entity name="Note" representedClassName="Note" syncable="YES">
                \(attributes.joined(separator: "\n        "))
            </entity>
        </model>
        """
    try xml.write(toFile: model + "/contents", atomically: true, encoding: .utf8)
    return (path, model)
}

private enum ForeignSQL {
    static func quote(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
}

/// The crafted-model corpus: names a crafted file may hold (a quote, a semicolon, a comment,
/// SQL that would read another table), each in a store read by every command that reads. The
/// reader quotes every identifier from the file, so `inspect`, `check` and `export` read the
/// column each name gives, value for value, and run nothing the file chose; `copy` refuses the
/// name in one line (a store here names attributes with letters, digits and '_'); the file is
/// left byte for byte. Names that are SQL keywords are copied as the columns they name.
@Test func identifiersFromAFileAreQuotedNeverRun() throws {
    let dir = try TemporaryDirectory()
    let crafted = ["a\"b", "x;y", "c--d", "name) FROM Z_METADATA --", "e/*f*/", "g' OR '1'='1"]
    for name in crafted {
        let (store, model) = try craftedCoreDataStore(dir, names: ["title", name])
        let before = try Data(contentsOf: URL(fileURLWithPath: store))
        let source = "coredata:\(store)"
        for arguments in [["inspect", source, "--model", model], ["check", source, "--model", model]] {
            let result = try runCLI(arguments)
            #expect(result.status == 0, "\(name): \(arguments[0]): \(result.errors)")
        }
        let exported = try runCLI(["export", "--from", source, "--model", model, "--entity", "Note"])
        #expect(exported.status == 0, "\(name): \(exported.errors)")
        #expect(exported.output.contains("\"v1-1\"") && exported.output.contains("\"v2-1\""),
                "\(name): the crafted column's values: \(exported.output)")
        let copied = try runCLI(["copy", "--from", source, "--model", model, "--to",
                                 dir.location(.lmdb, "c-\(UUID())").description])
        #expect(copied.status == 2, "\(name): \(copied.errors)")
        #expect(copied.errors.split(separator: "\n").count == 1 && copied.errors.contains("attribute name"),
                "\(name): \(copied.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: store)) == before, "\(name): the file is unchanged")
    }
    let keywords = ["select", "from", "where", "order", "group", "values", "zone"]
    let (store, model) = try craftedCoreDataStore(dir, names: keywords)
    let out = dir.location(.sqlite, "out")
    let result = try runCLI(["copy", "--from", "coredata:\(store)", "--model", model, "--to", out.description,
                             "--progress", "none"])
    #expect(result.status == 0, "\(result.errors)")
    let notes = try #require(try contents(out)["Note"])
    #expect(notes.count == 2)
    for (index, name) in keywords.enumerated() {
        #expect(notes.first?[name] == .string("v1-\(index)"), "\(name)")
    }
}

@Test func theModelsXMLIsReadAsXML() throws {
    let dir = try TemporaryDirectory()
    let xml = """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
            <!-- <entity name="Ghost"><attribute name="boo" attributeType="String"/></entity> -->
            <entity name="Note" representedClassName="Note" userInfo="a > b" syncable="YES">
                <attribute name="title" optional="YES" attributeType="String" defaultValueString="x > y"/>
                <attribute name="&#98;ody" optional="YES" attributeType="String"/>
                <attribute name="&#x63;olour" optional="YES" attributeType="String"/>
                <userInfo><entry key="k" value="&lt;entity name=&quot;Fake&quot;&gt;"/></userInfo>
            </entity>
            <![CDATA[ <entity name="Ghost2"/> ]]>
        </model>
        """
    let (store, model) = try craftedCoreDataStore(dir, names: ["title", "body", "colour"], modelXML: xml)
    let out = dir.location(.lmdb, "out")
    let result = try runCLI(["copy", "--from", "coredata:\(store)", "--model", model, "--to", out.description,
                             "--progress", "none"])
    #expect(result.status == 0, "\(result.errors)")
    let copied = try contents(out)
    #expect(copied.keys.sorted() == ["Note"], "no entity from a comment, a CDATA section or an attribute value")
    #expect(copied["Note"]?.first?["body"] == .string("v1-1"), "&#98; is b")
    #expect(copied["Note"]?.first?["colour"] == .string("v1-2"), "&#x63; is c")
    // Not XML at all: one line naming the file and where.
    let broken = try craftedCoreDataStore(dir, names: ["title"], modelXML: "<model><entity name=\"Note\"></model>")
    let refused = try runCLI(["copy", "--from", "coredata:\(broken.store)", "--model", broken.model, "--to",
                              dir.location(.lmdb, "refused").description])
    #expect(refused.status == 2, "\(refused.errors)")
    #expect(refused.errors.contains("is not well-formed XML at line"), "\(refused.errors)")
}

// MARK: 9. Secrets in locations that do not parse

@Test func aMistypedLocationNeverShowsItsSecret() throws {
    let secret = "S3cr3t-value"
    let mistakes = [
        "host=h dbname=d sslpassword=\(secret)",
        "host=h dbname=d password=\(secret)",
        "host=h dbname=d password = '\(secret) with space'",
        "postgres:/app:\(secret)@h/db",
        "postgres:app:\(secret)@h/db",
        "oracle://app:\(secret)@h/db",
        "postgresql:/app:\(secret)@h/db?schema=x",
        "postgres://app:\(secret)@h/db",
        "postgres:host=h dbname=d schema=s password=\(secret)",
        "postgres:host=h dbname=d sslpassword=\(secret)",
        // An unquoted space in the value, an unclosed quote, an unencoded @ in a URL's password.
        "postgres:host=h dbname=d schema=s password=correct \(secret)",
        "postgres:host=h dbname=d password=correct \(secret) schema=s",
        "postgres:host=h dbname=d password='correct \(secret)",
        "postgres://bob:p@\(secret)@h/db?schema=s",
        "postgres://bob:p@\(secret)@h/db",
        // An unencoded / or ? in a URL's password.
        "postgres://bob:hun/\(secret)@h/db?schema=s",
        "postgres://bob:\(secret)/x@h/db?schema=s",
        "postgres://bob:2024/\(secret)@h/db?schema=s",
        "postgres://bob:pa?\(secret)@h/db",
        // Words for a password that libpq does not take, and a percent-encoded colon.
        "postgres:host=h dbname=d schema=s passwd=\(secret)",
        "postgres:host=h dbname=d pwd=\(secret)",
        "postgres://bob%3A\(secret)@h/db?schema=s",
        "postgres://bob%3a\(secret)@h/db",
        "postgress://bob%40corp%3A\(secret)@h/db",
    ]
    for location in mistakes {
        for arguments in [["inspect", location], ["copy", "--from", location, "--to", "lmdb:/tmp/never-\(UUID())"],
                          ["copy", "--from", "sqlite:/nonexistent.sqlite", "--to", location]] {
            let result = try runCLI(arguments)
            #expect(result.status != 0, "\(arguments)")
            #expect(!result.errors.contains(secret) && !result.output.contains(secret),
                    "\(arguments): \(result.errors)")
            #expect(result.errors.split(separator: "\n").count == 1, "\(arguments): \(result.errors)")
        }
        do {
            _ = try StoreLocation(parsing: location)
        } catch {
            #expect(!"\(error)".contains(secret), "\(location): \(error)")
        }
    }
    #expect(LocationSecrets.redacted("postgres://app:pw@h:5432/db?sslpassword=x&schema=s")
        == "postgres://app:***@h:5432/db?sslpassword=***&schema=s")
    #expect(LocationSecrets.redacted("sqlite:/data/app.sqlite") == "sqlite:/data/app.sqlite")
    // Paths with an @ are not secrets.
    for path in ["sqlite:/data/app@2x.sqlite", "lmdb:/srv/a:b@c.lmdb", "jsonl:/home/me/notes@work.jsonl"] {
        #expect(LocationSecrets.redacted(path) == path)
    }
    #expect(LocationSecrets.redacted("host=h password=correct horse staple dbname=d") == "host=h password=*** dbname=d")
}

@Test func postgresqlURLsNameThePostgresKind() throws {
    let location = try? StoreLocation(parsing: "postgresql://app@db.example/app?schema=s")
    if StoreBackends.kinds.contains("postgres") {
        #expect(location?.kind == "postgres")
        #expect(location?.path == "//app@db.example/app?schema=s")
    } else {
        // Built without the Postgres trait: refused as the postgres kind, naming the trait.
        #expect {
            try StoreLocation(parsing: "postgresql://app@db.example/app?schema=s")
        } throws: { "\($0)".contains("trait") }
    }
}

// MARK: 6. A DataStore that is not the engine's Store

/// The kind `forwarding`: a registered backend whose stores are `ForwardingStore`s.
private let forwardingBackend = TestBackend("forwarding") { database, schema, upgrades in
    ForwardingStore(try InMemoryStore(database: database, schema: schema, upgrades: upgrades))
}

/// A follow waits on the source store's hub: a source that is not the engine's `Store` is
/// refused in one line naming it (it slept a fixed time before, silently), and the copy it
/// follows is still made and verified, since a copy needs nothing but the protocol.
@Test func aFollowFromAStoreThatIsNotTheEnginesIsRefusedInOneLine() throws {
    StoreBackends.register(forwardingBackend)
    let source = StoreLocation(kind: "forwarding", path: "source-\(UUID().uuidString)")
    let store = try source.open(schema: Fixtures.schema)
    try Fixtures.load(Fixtures.items(40, seed: 3), into: store)
    try store.close()
    let destination = StoreLocation(kind: .memory, path: "follow-\(UUID().uuidString)")
    let copy = try Migrator.copy(from: source, to: destination)
    #expect(copy.differences == 0)
    #expect {
        try Migrator.follow(from: source, to: destination, options: FollowOptions(untilIdle: .milliseconds(50)))
    } throws: { error in
        guard let error = error as? StoreError else { return false }
        return error.code == .invalidArgument && error.message.contains("not a store of this toolkit's engine")
            && error.message.contains(source.description)
    }
}

import CSQLite
import CZlib
import DataStoreAPI
import Foundation

/// Writes Core Data stores the way Core Data does, for tests of the `coredata:` reader: every
/// table (`Z_PRIMARYKEY`, `Z_METADATA`, `Z_MODELCACHE`, one `Z`-table per inheritance hierarchy,
/// `Z_<n><NAME>` join tables), the model cache as a raw-DEFLATE NSKeyedArchiver binary property
/// list of `NSEntityDescription`/`NSAttributeDescription`/`NSRelationshipDescription` objects
/// (inherited properties as `_NSPropertyDescriptionProxy` or as full copies, as Apple's framework
/// writes them), dates as seconds since 2001, external
/// binary data in `.NAME_SUPPORT/_EXTERNAL_DATA`, and optionally a WAL whose pages were never
/// checkpointed.
///
/// The model: `Person` (name, age Int16, followers Int64, height Float, balance Decimal, active
/// Boolean, born Date, uid UUID, homepage URI, photo Binary with external storage, settings
/// Transformable) with the subentity `Author` (penName; `posts`, ordered to-many to `Post`,
/// cascade); `Post` (title, body, createdAt; `author` to-one; `tags` many-to-many to `Tag`);
/// `Tag` (name; `posts`).
public enum CoreDataFixture {
    public struct Options {
        public var walWithUnflushedPages = false
        /// Makes `Post.tags` ordered: each post's tags in descending tag number, by the join
        /// table's `Z_FOK_4TAGS` (the order of the items of column `Z_4TAGS`).
        public var orderedManyToMany = false
        /// Adds a composite attribute `Tag.size` archived without its elements (a store the
        /// reader must refuse: SwiftDataFixture has composites as SwiftData archives them).
        public var compositeAttribute = false
        public var posts = 6
        /// How the model cache carries Author's inherited properties.
        public var inheritedProperties = CoreDataModelWriter.InheritedProperties.proxies
        public init() {}
    }

    /// Entity numbers (`Z_ENT`), as Core Data gives them: in name order.
    public static let numbers = ["Author": 1, "Person": 2, "Post": 3, "Tag": 4]
    public static let referenceDate: Double = 978_307_200
    public static let externalName = "7A1C3B52-3D2B-4F0B-9E0E-2F1A0C4B5D6E"
    public static let externalBytes: [UInt8] = Array(0..<200).map { UInt8($0 % 251) }

    /// Writes the store at `path` (and its support directory beside it).
    public static func write(at path: String, _ options: Options = Options()) throws {
        let staging = options.walWithUnflushedPages ? path + ".building" : path
        let database = try FixtureDatabase(staging)
        let exec = database.exec, insert = database.insert
        if options.walWithUnflushedPages {
            try exec("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0")
        }
        try exec("""
            CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
            CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
            CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB);
            CREATE TABLE ZPERSON ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZACTIVE INTEGER, ZAGE INTEGER,
              ZFOLLOWERS INTEGER, ZBALANCE DECIMAL, ZBORN TIMESTAMP, ZHEIGHT FLOAT, ZHOMEPAGE VARCHAR, ZNAME VARCHAR,
              ZPENNAME VARCHAR, ZPHOTO BLOB, ZSETTINGS BLOB, ZUID BLOB \(options.compositeAttribute ? "" : "") );
            CREATE TABLE ZPOST ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZAUTHOR INTEGER,
              Z_FOK_AUTHOR INTEGER, ZCREATEDAT TIMESTAMP, ZBODY VARCHAR, ZTITLE VARCHAR );
            CREATE TABLE ZTAG ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR \(options.compositeAttribute ? ", ZSIZE BLOB" : "") );
            CREATE TABLE Z_3TAGS ( Z_3POSTS INTEGER, Z_4TAGS INTEGER\(options.orderedManyToMany ? ", Z_FOK_4TAGS INTEGER" : ""),
              PRIMARY KEY (Z_3POSTS, Z_4TAGS) );
            CREATE INDEX ZPOST_ZAUTHOR_INDEX ON ZPOST (ZAUTHOR);
            CREATE INDEX Z_3TAGS_Z_4TAGS_INDEX ON Z_3TAGS (Z_4TAGS, Z_3POSTS);
            """)
        try exec("BEGIN")
        for (name, number) in numbers {
            try insert("INSERT INTO Z_PRIMARYKEY VALUES (?, ?, ?, ?)",
                       [number, name, name == "Author" ? numbers["Person"] : 0, 10])
        }
        try insert("INSERT INTO Z_METADATA VALUES (1, ?, ?)", ["C0FFEE00-0000-4000-8000-000000000001", [UInt8]()])
        try insert("INSERT INTO Z_MODELCACHE VALUES (?)", [try deflateRaw(modelArchive(options))])
        // People: 1 and 2 are Authors, 3 a Person.
        let support = ((path as NSString).deletingLastPathComponent as NSString)
            .appendingPathComponent(".\(((path as NSString).lastPathComponent as NSString).deletingPathExtension)_SUPPORT/_EXTERNAL_DATA")
        try FileManager.default.createDirectory(atPath: support, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: support + "/" + externalName, contents: Data(externalBytes))
        let uid: [UInt8] = [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0x4D, 0xEF, 0x81, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF]
        try insert("INSERT INTO ZPERSON VALUES (1, 1, 1, 1, 41, 9000000000, 12.5, ?, 1.75, 'https://ann.example', 'Ann', 'A. N.', ?, ?, ?)",
                   [700_000_000.25, [2] + Array(externalName.utf8) + [0], [0x62, 0x70, 0x6C, 0x69, 0x73, 0x74] as [UInt8], uid])
        try insert("INSERT INTO ZPERSON VALUES (2, 1, 1, 0, 30, 0, NULL, NULL, NULL, NULL, 'Bob', NULL, ?, NULL, NULL)",
                   [[1, 9, 8, 7] as [UInt8]])
        try insert("INSERT INTO ZPERSON VALUES (3, 2, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'Cy', NULL, NULL, NULL, NULL)", [])
        for tag in 1...3 {
            try insert("INSERT INTO ZTAG (Z_PK, Z_ENT, Z_OPT, ZNAME) VALUES (?, 4, 1, ?)", [tag, "tag\(tag)"])
        }
        try exec("COMMIT")
        // The posts in a transaction of their own: with walWithUnflushedPages, only in the WAL.
        try exec("BEGIN")
        for post in 1...options.posts {
            // Ann's posts in the order 3, 1, 5, …: Z_FOK_AUTHOR gives the order, not Z_PK.
            let author = post % 2 == 1 ? 1 : 2
            try insert("INSERT INTO ZPOST VALUES (?, 3, 1, ?, ?, ?, ?, ?)",
                       [post, author, (options.posts - post) * 1024, 600_000_000.5 + Double(post),
                        post == 2 ? nil : "body \(post) ✓", "Post \(post)"])
            for tag in 1...3 where (post + tag) % 2 == 0 {
                if options.orderedManyToMany {
                    try insert("INSERT INTO Z_3TAGS (Z_3POSTS, Z_4TAGS, Z_FOK_4TAGS) VALUES (?, ?, ?)",
                               [post, tag, (4 - tag) * 1024])
                } else {
                    try insert("INSERT INTO Z_3TAGS (Z_3POSTS, Z_4TAGS) VALUES (?, ?)", [post, tag])
                }
            }
        }
        try exec("COMMIT")
        if options.walWithUnflushedPages {
            // Copy the file and its WAL while the connection holds them: the copy's WAL has pages the
            // file has never seen (as after Core Data's process was killed).
            for suffix in ["", "-wal"] {
                try? FileManager.default.removeItem(atPath: path + suffix)
                try FileManager.default.copyItem(atPath: staging + suffix, toPath: path + suffix)
            }
            database.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: staging + suffix) }
        }
    }

    /// The expected items of the copy, by entity then key.
    public static func expectedPeople() -> [Int64: [String: Value]] {
        [
            1: ["pk": .int(1), "entity": .string("Author"), "name": .string("Ann"), "age": .int(41),
                "followers": .int(9_000_000_000), "active": .bool(true), "height": .double(1.75), "balance": .double(12.5),
                "born": .date(Timestamp(microsecondsSinceEpoch: Int64((700_000_000.25 + referenceDate) * 1_000_000))),
                "homepage": .string("https://ann.example"), "penName": .string("A. N."), "photo": .bytes(externalBytes),
                "settings": .bytes([0x62, 0x70, 0x6C, 0x69, 0x73, 0x74]),
                "uid": .uuid(UUID(uuidString: "12345678-9ABC-4DEF-8123-456789ABCDEF")!)],
            2: ["pk": .int(2), "entity": .string("Author"), "name": .string("Bob"), "active": .bool(false),
                "photo": .bytes([9, 8, 7]), "penName": .null, "born": .null],
            3: ["pk": .int(3), "entity": .string("Person"), "name": .string("Cy"), "active": .null, "photo": .null],
        ]
    }

    // MARK: The model cache

    public static func modelArchive(_ options: Options = Options()) throws -> [UInt8] {
        CoreDataModelWriter([
            .init("Person", [
                .attribute("name", type: 700, optional: false), .attribute("age", type: 100),
                .attribute("followers", type: 300), .attribute("height", type: 600), .attribute("balance", type: 400),
                .attribute("active", type: 800), .attribute("born", type: 900), .attribute("uid", type: 1100),
                .attribute("homepage", type: 1200), .attribute("photo", type: 1000, external: true),
                .attribute("settings", type: 1800),
                // A transient attribute holds no data (no column).
                .attribute("nickname", type: 700, transient: true),
            ]),
            .init("Author", parent: "Person", [
                .attribute("penName", type: 700),
                .relationship("posts", to: "Post", inverse: "author", toMany: true, ordered: true, rule: 2),
            ]),
            .init("Post", [
                .attribute("title", type: 700, optional: false), .attribute("body", type: 700),
                .attribute("createdAt", type: 900, optional: false),
                .relationship("author", to: "Author", inverse: "posts", toMany: false),
                .relationship("tags", to: "Tag", inverse: "posts", toMany: true, ordered: options.orderedManyToMany),
            ]),
            .init("Tag", [.attribute("name", type: 700, optional: false),
                          .relationship("posts", to: "Post", inverse: "tags", toMany: true)]
                    + (options.compositeAttribute ? [.attribute("size", type: 2100)] : [])),
        ], inherited: options.inheritedProperties).archive()
    }

    /// Raw DEFLATE (no header), as Core Data compresses the model cache.
    public static func deflateRaw(_ bytes: [UInt8]) throws -> [UInt8] {
        var stream = z_stream()
        guard deflateInit2_(&stream, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                            Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw FixtureError("deflateInit2") }
        defer { deflateEnd(&stream) }
        var input = bytes
        var output = [UInt8](repeating: 0, count: bytes.count + 1024)
        let written: Int = input.withUnsafeMutableBufferPointer { inputBuffer in
            output.withUnsafeMutableBufferPointer { outputBuffer in
                stream.next_in = inputBuffer.baseAddress
                stream.avail_in = UInt32(inputBuffer.count)
                stream.next_out = outputBuffer.baseAddress
                stream.avail_out = UInt32(outputBuffer.count)
                return deflate(&stream, Z_FINISH) == Z_STREAM_END ? outputBuffer.count - Int(stream.avail_out) : -1
            }
        }
        guard written >= 0 else { throw FixtureError("deflate") }
        return Array(output[0..<written])
    }
}

public struct FixtureError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// An NSKeyedArchiver archive, written as Foundation's NSKeyedArchiver writes one: `$archiver`,
/// `$version`, `$top` and `$objects` (index 0 `$null`), objects referring to others by `CF$UID`,
/// classes as `{$classname, $classes}` objects, in a `bplist00` binary property list.
struct KeyedArchiveWriter {
    indirect enum Item {
        case string(String), int(Int), bool(Bool), reference(Int), array([Item]), dictionary([(String, Item)])
    }

    private var objects: [Item] = [.string("$null")]
    private var classes: [String: Int] = [:]

    mutating func reserve() -> Int {
        objects.append(.dictionary([]))
        return objects.count - 1
    }

    mutating func add(className: String, _ fields: [String: Item], classes: [String]? = nil) -> Int {
        let slot = reserve()
        fill(slot, className: className, fields, classes: classes)
        return slot
    }

    mutating func fill(_ slot: Int, className: String, _ fields: [String: Item], classes: [String]? = nil) {
        let classRef = classReference(className, classes ?? [className, "NSObject"])
        var pairs: [(String, Item)] = fields.sorted { $0.key < $1.key }.map { key, value in
            // Strings are objects of their own, referred to.
            if case .string(let text) = value { return (key, .reference(add(string: text))) }
            if case .array(let items) = value {
                return (key, .array(items.map { item in
                    if case .string(let text) = item { return .reference(add(string: text)) }
                    return item
                }))
            }
            return (key, value)
        }
        pairs.append(("$class", .reference(classRef)))
        objects[slot] = .dictionary(pairs)
    }

    mutating func set(_ slot: Int, field: String, _ value: Item) {
        guard case .dictionary(var pairs) = objects[slot] else { return }
        pairs.append((field, value))
        objects[slot] = .dictionary(pairs)
    }

    private mutating func add(string: String) -> Int {
        objects.append(.string(string))
        return objects.count - 1
    }

    private mutating func classReference(_ name: String, _ chain: [String]) -> Int {
        if let ref = classes[name] { return ref }
        objects.append(.dictionary([("$classname", .string(name)), ("$classes", .array(chain.map { .string($0) }))]))
        classes[name] = objects.count - 1
        return objects.count - 1
    }

    func encoded(root: Int) -> [UInt8] {
        BinaryPropertyList.encode(.dictionary([
            ("$archiver", .string("NSKeyedArchiver")), ("$version", .int(100_000)),
            ("$top", .dictionary([("root", .reference(root))])), ("$objects", .array(objects)),
        ]))
    }
}

/// A `bplist00` writer: every object in an offset table, containers referring to objects by
/// index, then the trailer.
enum BinaryPropertyList {
    static func encode(_ root: KeyedArchiveWriter.Item) -> [UInt8] {
        var flat: [[UInt8]] = []
        // Objects are flattened depth-first; a container's references are filled once its
        // children have indexes.
        func add(_ item: KeyedArchiveWriter.Item) -> Int {
            let index = flat.count
            flat.append([])
            var bytes: [UInt8] = []
            switch item {
            case .string(let text):
                if text.utf8.allSatisfy({ $0 < 0x80 }) {
                    bytes = marker(0x5, text.utf8.count) + Array(text.utf8)
                } else {
                    let units = Array(text.utf16)
                    bytes = marker(0x6, units.count) + units.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
                }
            case .int(let value):
                bytes = [0x13] + withUnsafeBytes(of: Int64(value).bigEndian) { Array($0) }
            case .bool(let value):
                bytes = [value ? 0x09 : 0x08]
            case .reference(let uid):
                bytes = [0x83] + withUnsafeBytes(of: UInt32(uid).bigEndian) { Array($0) }
            case .array(let items):
                let refs = items.map { add($0) }
                bytes = marker(0xA, refs.count) + refs.flatMap(ref)
            case .dictionary(let pairs):
                let keys = pairs.map { add(.string($0.0)) }
                let values = pairs.map { add($0.1) }
                bytes = marker(0xD, pairs.count) + keys.flatMap(ref) + values.flatMap(ref)
            }
            flat[index] = bytes
            return index
        }
        _ = add(root)
        var output = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in flat {
            offsets.append(output.count)
            output += object
        }
        let tableOffset = output.count
        for offset in offsets { output += withUnsafeBytes(of: UInt64(offset).bigEndian) { Array($0) } }
        output += [0, 0, 0, 0, 0, 0, 8, 4]
        output += withUnsafeBytes(of: UInt64(flat.count).bigEndian) { Array($0) }
        output += withUnsafeBytes(of: UInt64(0).bigEndian) { Array($0) }
        output += withUnsafeBytes(of: UInt64(tableOffset).bigEndian) { Array($0) }
        return output
    }

    static func ref(_ index: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) } }

    static func marker(_ type: UInt8, _ count: Int) -> [UInt8] {
        if count < 15 { return [type << 4 | UInt8(count)] }
        return [type << 4 | 0xF, 0x13] + withUnsafeBytes(of: Int64(count).bigEndian) { Array($0) }
    }
}

extension CoreDataFixture {
    /// The fixture's model as Xcode writes it (`Notes.xcdatamodel/contents`).
    public static let modelXML = """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0" lastSavedToolsVersion="22522">
            <entity name="Author" representedClassName="Author" parentEntity="Person" syncable="YES" codeGenerationType="class">
                <attribute name="penName" optional="YES" attributeType="String"/>
                <relationship name="posts" optional="YES" toMany="YES" deletionRule="Cascade" ordered="YES" destinationEntity="Post" inverseName="author" inverseEntity="Post"/>
            </entity>
            <entity name="Person" representedClassName="Person" syncable="YES" codeGenerationType="class">
                <attribute name="active" optional="YES" attributeType="Boolean" usesScalarValueType="YES"/>
                <attribute name="age" optional="YES" attributeType="Integer 16" defaultValueString="0" usesScalarValueType="YES"/>
                <attribute name="balance" optional="YES" attributeType="Decimal" defaultValueString="0.0"/>
                <attribute name="born" optional="YES" attributeType="Date" usesScalarValueType="NO"/>
                <attribute name="followers" optional="YES" attributeType="Integer 64" defaultValueString="0" usesScalarValueType="YES"/>
                <attribute name="height" optional="YES" attributeType="Float" defaultValueString="0.0" usesScalarValueType="YES"/>
                <attribute name="homepage" optional="YES" attributeType="URI"/>
                <attribute name="name" attributeType="String"/>
                <attribute name="nickname" optional="YES" transient="YES" attributeType="String"/>
                <attribute name="photo" optional="YES" attributeType="Binary" allowsExternalBinaryDataStorage="YES"/>
                <attribute name="settings" optional="YES" attributeType="Transformable" valueTransformerName="NSSecureUnarchiveFromData"/>
                <attribute name="uid" optional="YES" attributeType="UUID" usesScalarValueType="NO"/>
            </entity>
            <entity name="Post" representedClassName="Post" syncable="YES" codeGenerationType="class">
                <attribute name="body" optional="YES" attributeType="String"/>
                <attribute name="createdAt" attributeType="Date" usesScalarValueType="NO"/>
                <attribute name="title" attributeType="String"/>
                <relationship name="author" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Author" inverseName="posts" inverseEntity="Author"/>
                <relationship name="tags" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Tag" inverseName="posts" inverseEntity="Tag"/>
            </entity>
            <entity name="Tag" representedClassName="Tag" syncable="YES" codeGenerationType="class">
                <attribute name="name" attributeType="String"/>
                <relationship name="posts" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Post" inverseName="tags" inverseEntity="Post"/>
            </entity>
        </model>
        """
}

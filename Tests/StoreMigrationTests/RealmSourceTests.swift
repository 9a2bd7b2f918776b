@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
@testable import ForeignStores
import Foundation
import StoreMigration
import Testing

/// Realm files written by Realm SDKs (Tests/Fixtures/Realm, formats 10 to 24, the streaming form
/// and an encrypted file) read without realm-core: every object and value compared with what an
/// independent reader of the format says the file holds (Scripts/realm-dump.py), copied into
/// every backend and back, the files' bytes unchanged.
@Suite struct RealmSourceTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/Realm")
    static let dump = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Scripts/realm-dump.py").path

    static let make = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Scripts/realm-make.py").path

    static let readable = ["swift-migration-default-v5.f20", "js-tools-default.f22", "js-simple.f23",
                           "kotlin-asset.f23", "kotlin-asset-fs.f23.streaming", "studio-asset_file.f24",
                           "cocoa6-alltypes.f10", "kotlin-random-games.f23"]

    static func path(_ name: String) -> String { fixtures.appendingPathComponent(name + ".realm").path }

    /// What the independent reader says a file holds, by class.
    struct Expected: Decodable {
        struct Column: Decodable {
            var name: String
            var type: Int
            var collection: String?
            var target: String?
        }
        struct Object: Decodable {
            var key: Int64
            var values: [String: JSONValue]
        }
        struct Table: Decodable {
            var name: String
            var primaryKey: String?
            var kind: Int
            var tableKey: Int64
            var columns: [Column]
            var objects: [Object]
        }
        var format: Int
        var tables: [Table]
    }

    /// A JSON value as the dump writes it.
    indirect enum JSONValue: Decodable, Equatable {
        case null, bool(Bool), int(Int64), double(Double), string(String), hex(String), list([JSONValue])
        case dictionary([String: JSONValue])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let b = try? container.decode(Bool.self) {
                self = .bool(b)
            } else if let i = try? container.decode(Int64.self) {
                self = .int(i)
            } else if let d = try? container.decode(Double.self) {
                self = .double(d)
            } else if let s = try? container.decode(String.self) {
                self = .string(s)
            } else if let l = try? container.decode([JSONValue].self) {
                self = .list(l)
            } else {
                let object = try container.decode([String: JSONValue].self)
                if object.count == 1, case .string(let hex)? = object["hex"] {
                    self = .hex(hex)
                } else {
                    self = .dictionary(object)
                }
            }
        }

        /// Whether it holds a nested collection the dump does not expand (`list@0x…`).
        var holdsUnexpanded: Bool {
            switch self {
            case .string(let s): return s.contains("@0x")
            case .list(let items): return items.contains(where: \.holdsUnexpanded)
            case .dictionary(let pairs): return pairs.values.contains(where: \.holdsUnexpanded)
            default: return false
            }
        }
    }

    static func bytes(hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }

    /// The decimal text the store holds for the dump's `COEFFICIENTeEXPONENT`.
    static func decimal(_ text: String) -> String? {
        if Int(text) != nil { return text }
        guard let e = text.firstIndex(of: "E"), let exponent = Int(text[text.index(after: e)...]) else {
            return ["NaN", "Inf", "-Inf"].contains(text) ? text.replacingOccurrences(of: "Inf", with: "Infinity") : nil
        }
        let negative = text.hasPrefix("-")
        let digits = String(text[text.index(text.startIndex, offsetBy: negative ? 1 : 0)..<e])
        guard !digits.isEmpty, digits.allSatisfy(\.isNumber) else { return nil }
        return RealmValues.decimalText(negative: negative, digits: digits, exponent: exponent)
    }

    static func date(_ text: String) -> Timestamp? {
        guard text.hasPrefix("ts(") else { return nil }
        let parts = text.dropFirst(3).dropLast().split(separator: ",").compactMap { Int64($0) }
        guard parts.count == 2 else { return nil }
        return Timestamp(microsecondsSinceEpoch: parts[0] * 1_000_000 + parts[1] / 1_000)
    }

    /// The JSON text the store should hold for a collection or `Mixed` the dump printed, its
    /// elements of column `type` (6: Mixed, whose types are tagged in Extended JSON).
    static func expectedJSON(_ value: JSONValue, type: Int, links: (Int64, Int64) -> (String, Value)?) -> String {
        let tagged = type == 6
        func recurse(_ value: JSONValue, _ type: Int) -> String { expectedJSON(value, type: type, links: links) }
        func tag(_ name: String, _ text: String) -> String {
            tagged ? "{\(RealmValues.quoted("$" + name)):\(RealmValues.quoted(text))}" : RealmValues.quoted(text)
        }
        switch value {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return type == 9 || type == 10 ? "\(Double(i))" : String(i)
        case .double(let d): return "\(d)"
        case .hex(let hex): return tag("binary", Data(bytes(hex: hex)).base64EncodedString())
        case .list(let items): return "[" + items.map { recurse($0, type) }.joined(separator: ",") + "]"
        case .dictionary(let pairs):
            return "{" + pairs.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
                .map { RealmValues.quoted($0.key) + ":" + recurse($0.value, type) }
                .joined(separator: ",") + "}"
        case .string(let s):
            if s.hasPrefix("link(table=") {
                let numbers = s.split(whereSeparator: { !$0.isNumber && $0 != "-" }).compactMap { Int64($0) }
                guard numbers.count == 2, let (target, key) = links(numbers[0], numbers[1]) else { return "null" }
                return RealmValues.Item.link(target, key).json(tagged: tagged)
            }
            if type == 8 || tagged, let t = date(s) { return tag("date", ValueConversion.iso8601Text(t)) }
            if type == 11 || tagged, let d = decimal(s) { return tag("numberDecimal", d) }
            if s.hasPrefix("oid("), s.hasSuffix(")") { return tag("oid", String(s.dropFirst(4).dropLast())) }
            if s.hasPrefix("uuid("), s.hasSuffix(")") {
                let uuid = RealmValues.uuid(bytes(hex: String(s.dropFirst(5).dropLast())))
                return tagged ? tag("uuid", uuid.uuidString.lowercased()) : RealmValues.quoted(uuid.uuidString)
            }
            if type == 17 { return RealmValues.quoted(s.uppercased()) }
            return RealmValues.quoted(s)
        }
    }

    static func expected(_ name: String, keyFile: String? = nil) throws -> Expected {
        try expected(file: path(name), keyFile: keyFile)
    }

    static func expected(file: String, keyFile: String? = nil) throws -> Expected {
        let output = try runCommand("/usr/bin/python3", [dump, file, "--json"] + (keyFile.map { ["--key-file", $0] } ?? []))
        return try JSONDecoder().decode(Expected.self, from: Data(output.utf8))
    }

    /// The value the store should hold for a value the dump printed, of a column of `type`.
    static func storeValue(_ value: JSONValue, type: Int) -> Value {
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return type == 9 || type == 10 ? .double(Double(i)) : .int(i)
        case .double(let d): return .double(d)
        case .hex(let hex): return .bytes(bytes(hex: hex))
        case .string(let s):
            if type == 8, s.hasPrefix("ts(") {
                let parts = s.dropFirst(3).dropLast().split(separator: ",").compactMap { Int64($0) }
                return .date(Timestamp(microsecondsSinceEpoch: parts[0] * 1_000_000 + parts[1] / 1_000))
            }
            if type == 17, let uuid = UUID(uuidString: s) { return .uuid(uuid) }
            return .string(s)
        case .list, .dictionary: return .null
        }
    }

    /// Every object of every class, value for value, links and lists by their targets' keys in
    /// their order, against the independent reader.
    static func compare(_ store: any DataStore, with expected: Expected, _ label: String,
                        only: Set<String>? = nil) throws {
        let tables = Dictionary(uniqueKeysWithValues: expected.tables.map { ($0.name, $0) })
        let byTableKey = Dictionary(uniqueKeysWithValues: expected.tables.map { ($0.tableKey, $0) })
        // Each table's store keys by Realm object key, made once per table the first time a link
        // needs it (not once per link: a file of thousands of links would make it quadratic).
        var madeKeys: [String: [Int64: Value]] = [:]
        func storeKeys(of table: Expected.Table) -> [Int64: Value] {
            if let made = madeKeys[table.name] { return made }
            let made = Dictionary(uniqueKeysWithValues: table.objects.map { ($0.key, key(of: table, $0)) })
            madeKeys[table.name] = made
            return made
        }
        func key(of table: Expected.Table, _ object: Expected.Object) -> Value {
            guard let primaryKey = table.primaryKey else { return .int(object.key) }
            let column = table.columns.first { $0.name == primaryKey }
            return storeValue(object.values[primaryKey] ?? .null, type: column?.type ?? 0)
        }
        try store.read { reader in
            for table in expected.tables where only?.contains(table.name) ?? true {
                let records = try reader.fetch(FetchRequest(table.name))
                #expect(records.count == table.objects.count, "\(label): \(table.name) has \(records.count) items")
                let entity = try #require(reader.schema.entity(named: table.name))
                let byKey = Dictionary(uniqueKeysWithValues: records.map { (entity.primaryKeyValue(of: $0), $0) })
                for object in table.objects {
                    let itemKey = key(of: table, object)
                    let record = try #require(byKey[itemKey], "\(label): \(table.name) \(itemKey) is missing")
                    for column in table.columns {
                        let value = object.values[column.name] ?? .null
                        guard column.collection != "dict", let targetName = column.target.map({ String($0.dropFirst(6)) }),
                              let target = tables[targetName] else {
                            let expected: Value
                            if column.collection != nil || column.type == 6 {
                                if value.holdsUnexpanded { continue }
                                expected = value == .null && column.collection == nil ? .null
                                    : .string(expectedJSON(value, type: column.type) { tableKey, objectKey in
                                        guard let target = byTableKey[tableKey],
                                              let key = storeKeys(of: target)[objectKey] else { return nil }
                                        return (target.name, key)
                                    })
                            } else if column.type == 11 {
                                guard case .string(let text) = value, let decimal = decimal(text) else {
                                    #expect(record[column.name] == .null, "\(label): \(table.name) \(itemKey).\(column.name)")
                                    continue
                                }
                                expected = .string(decimal)
                            } else {
                                expected = storeValue(value, type: column.type)
                            }
                            #expect(record[column.name] == expected, "\(label): \(table.name) \(itemKey).\(column.name)")
                            continue
                        }
                        let targets = storeKeys(of: target)
                        if column.collection == nil {
                            let expectedTarget: Value
                            if case .int(let k) = value, let t = targets[k] { expectedTarget = t } else { expectedTarget = .null }
                            #expect(record[column.name] == expectedTarget, "\(label): \(table.name) \(itemKey).\(column.name)")
                        } else {
                            guard case .list(let items) = value, only?.contains(targetName) ?? true else { continue }
                            let expectedKeys = items.compactMap { item -> Value? in
                                if case .int(let k) = item { return targets[k] } else { return nil }
                            }
                            let related = try reader.related(table.name, key: itemKey, column.name)
                            let destination = try #require(reader.schema.entity(named: targetName))
                            let relatedKeys = related.map { destination.primaryKeyValue(of: $0) }
                            if column.collection == "list" {
                                #expect(relatedKeys == expectedKeys, "\(label): \(table.name) \(itemKey).\(column.name) in order")
                            } else {
                                #expect(Set(relatedKeys) == Set(expectedKeys), "\(label): \(table.name) \(itemKey).\(column.name)")
                            }
                        }
                    }
                }
            }
        }
    }

    @Test(arguments: readable)
    func everyObjectReadsAsAnIndependentReaderSaysTheFileHolds(_ name: String) throws {
        let before = FileManager.default.contents(atPath: Self.path(name))
        let store = try RealmStore(ForeignSource(path: Self.path(name)))
        defer { try? store.close() }
        let expected = try Self.expected(name)
        #expect(Set(store.schema.entities.map(\.name)).isSuperset(of: expected.tables.map(\.name)))
        try Self.compare(store, with: expected, name)
        #expect(FileManager.default.contents(atPath: Self.path(name)) == before, "the file is never written")
    }

    /// Realm .NET's test file holds every collection of values, dictionaries of links, Mixed
    /// and Decimal128, in 88 classes: more entities than a store here holds (64), so it is
    /// refused whole, naming the limit; its values are compared column by column below the
    /// store, against the independent reader.
    @Test func everyCollectionMixedAndDecimalReadsAsTheIndependentReaderSays() throws {
        let name = "dotnet-guids.f24"
        #expect { try RealmStore(ForeignSource(path: Self.path(name))) } throws: {
            ($0 as? StoreError)?.code == .limitExceeded && "\($0)".contains("at most 64")
        }
        let data = try #require(FileManager.default.contents(atPath: Self.path(name)))
        let model = try RealmModel(try RealmFile(bytes: [UInt8](data), path: Self.path(name)))
        let expected = try Self.expected(name)
        let byName = Dictionary(uniqueKeysWithValues: expected.tables.map { ($0.name, $0) })
        let byTableKey = Dictionary(uniqueKeysWithValues: expected.tables.map { ($0.tableKey, $0) })
        func key(of table: Expected.Table, _ object: Expected.Object) -> Value {
            guard let primaryKey = table.primaryKey else { return .int(object.key) }
            let column = table.columns.first { $0.name == primaryKey }
            return Self.storeValue(object.values[primaryKey] ?? .null, type: column?.type ?? 0)
        }
        func target(_ tableKey: Int64, _ objectKey: Int64) -> (String, Value)? {
            guard let table = byTableKey[tableKey], let object = table.objects.first(where: { $0.key == objectKey })
            else { return nil }
            return (table.name, key(of: table, object))
        }
        let links: RealmValues.Links = { tableKey, objectKey in
            target(tableKey, objectKey).map { RealmValues.Item.link($0.0, $0.1) } ?? .value(.null)
        }
        var compared = 0
        for table in model.tables where table.name.hasPrefix("class_") {
            let dumped = try #require(byName[String(table.name.dropFirst(6))])
            var objects: [Int64: [String: Value?]] = [:]
            try model.forEachLeaf(of: table) { leaf, keys in
                for column in table.columns where column.target == nil || column.isDictionary {
                    let cell = try model.file.ref(leaf, column.leafIndex + 1, column.name)
                    let values = try RealmMapping.values(of: column, in: table, cell: cell, count: keys.count,
                                                         file: model.file, links: links,
                                                         refuse: { StoreError(.invalidArgument, $0) })
                    for (key, value) in zip(keys, values) { objects[key, default: [:]][column.name] = value }
                }
            }
            for object in dumped.objects {
                for column in dumped.columns where column.target == nil || column.collection == "dict" {
                    let value = object.values[column.name] ?? .null
                    if value.holdsUnexpanded { continue }
                    let got = objects[object.key]?[column.name] ?? nil
                    let want: Value
                    if column.collection != nil || column.type == 6 {
                        want = value == .null && column.collection == nil ? .null
                            : .string(Self.expectedJSON(value, type: column.type, links: target))
                    } else if column.type == 11 {
                        if case .string(let text) = value, let decimal = Self.decimal(text) {
                            want = .string(decimal)
                        } else {
                            want = .null
                        }
                    } else {
                        want = Self.storeValue(value, type: column.type)
                    }
                    #expect(got == want, "\(dumped.name) \(object.key).\(column.name)")
                    compared += 1
                }
            }
        }
        print("dotnet-guids.f24: \(compared) values compared with the independent reader")
        #expect(compared >= 50, "the file holds 50 values in its four objects")
    }

    /// `--entities` chooses classes (a file of more classes than a store holds is copied in
    /// parts): a link to a class left out keeps its target's key as a plain attribute, a list of
    /// links to one is left out; each part verified and compared with the independent reader.
    @Test func chosenClassesCopyWithTheirLinks() throws {
        let name = "kotlin-random-games.f23"
        let expected = try Self.expected(name)
        let dir = try TemporaryDirectory()
        let source = StoreLocation(kind: .realm, path: Self.path(name))
        for (part, chosen) in [["GamePlayer", "SaveGame"], ["GameStep", "SaveGame"]].enumerated() {
            let destination = dir.location(.lmdb, "part\(part)")
            let report = try Migrator.copy(from: source, to: destination, options: MigrationOptions(entities: chosen))
            #expect(report.verified && report.differences == 0)
            let copy = try destination.open(schema: nil)
            #expect(copy.schema.entity(named: "SaveGame")?.relationship(named: "player1") != nil || part == 1)
            #expect(copy.schema.entity(named: "SaveGame")?.relationship(named: "steps") != nil || part == 0)
            try Self.compare(copy, with: expected, "\(name) part \(part)", only: Set(chosen))
            try copy.close()
        }
        let inspect = try runCLI(["inspect", "realm:\(Self.path(name))?tables=Nope,Other"])
        #expect(inspect.status == 2 && inspect.errors.contains("has none of the classes Nope, Other"), "\(inspect.errors)")
    }

    @Test(arguments: [StoreKind.sqlite, .lmdb, .memory], ["swift-migration-default-v5.f20", "js-tools-default.f22",
                                                           "studio-asset_file.f24", "kotlin-asset-fs.f23.streaming",
                                                           "kotlin-random-games.f23"])
    func aRealmFileCopiesIntoEachBackendAndBack(_ kind: StoreKind, _ name: String) throws {
        let dir = try TemporaryDirectory()
        let source = StoreLocation(kind: .realm, path: Self.path(name))
        let middle = dir.location(kind, "middle")
        let back = dir.location(.sqlite, "back")
        defer { if kind == .memory { try? middle.destroy() } }
        let there = try Migrator.copy(from: source, to: middle, options: MigrationOptions(batchSize: 2))
        #expect(there.verified && there.differences == 0)
        let returned = try Migrator.copy(from: middle, to: back)
        #expect(returned.verified && returned.differences == 0)
        let copy = try back.open(schema: nil)
        defer { try? copy.close() }
        try Self.compare(copy, with: try Self.expected(name), "\(name) via \(kind)")
    }

    /// Realm Swift's example: an embedded address owned by its person (deleted with it), a list
    /// of pets in its order, their inverse on the pets.
    @Test func linksListsAndEmbeddedObjectsBecomeRelationships() throws {
        let store = try RealmStore(ForeignSource(path: Self.path("swift-migration-default-v5.f20")))
        defer { try? store.close() }
        let person = try #require(store.schema.entity(named: "Person"))
        #expect(person.primaryKey == "realm_key")
        #expect(person.relationship(named: "address")?.deleteRule == .cascade, "an embedded object is owned")
        #expect(person.relationship(named: "pets")?.isOrdered == true)
        #expect(store.schema.entity(named: "Pet")?.relationship(named: "Person_pets")?.cardinality == .toMany)
        let (pets, owners) = try store.read { reader in
            (try reader.related("Person", key: 0, "pets").map { $0["name"] },
             try reader.related("Pet", key: 2, "Person_pets").map { $0["fullName"] })
        }
        #expect(pets == ["Marley", "Lassie"])
        #expect(owners == ["Jane Doe"])
        #expect(store.summary.contains("format 20"))
    }

    /// Realm Cocoa's encrypted file (its key, 64 bytes of 1, is in realm-java's test code) and a
    /// format 23 file of 136 pages encrypted by the independent reader's encoder (three groups of
    /// pages): read with their keys, every value as the independent reader decrypts it, copied
    /// into every backend and back, the files unchanged.
    @Test func anEncryptedFileReadsWithItsKeyAndCopiesIntoEveryBackend() throws {
        let dir = try TemporaryDirectory()
        let cocoaKey = dir.path("cocoa.key")
        try Data(repeating: 1, count: 64).write(to: URL(fileURLWithPath: cocoaKey))
        let gamesKey = dir.path("games.key")
        try Data((0..<64).map { UInt8(($0 * 37 + 11) & 0xFF) }).write(to: URL(fileURLWithPath: gamesKey))
        let games = dir.path("games.realm")
        _ = try runCommand("/usr/bin/python3", [Self.dump, Self.path("kotlin-random-games.f23"), "--key-file", gamesKey,
                                                "--encrypt", games])
        for (file, key) in [(Self.path("cocoa6-alltypes-encrypted"), cocoaKey), (games, gamesKey)] {
            let before = FileManager.default.contents(atPath: file)
            let expected = try Self.expected(file: file, keyFile: key)
            let store = try RealmStore(ForeignSource(path: file, keyFile: key))
            try Self.compare(store, with: expected, file)
            #expect(store.facts.first?.contains("encrypted") == true)
            try store.close()
            for kind in [StoreKind.sqlite, .lmdb, .memory] {
                let middle = dir.location(kind, "middle-\(kind)-\(file.hasSuffix("games.realm"))")
                defer { if kind == .memory { try? middle.destroy() } }
                let source = StoreLocation(kind: .realm, path: ForeignSource(path: file, keyFile: key).description)
                let there = try Migrator.copy(from: source, to: middle, options: MigrationOptions(batchSize: 64))
                #expect(there.verified && there.differences == 0)
                let back = dir.location(.sqlite, "back-\(kind)-\(file.hasSuffix("games.realm"))")
                #expect(try Migrator.copy(from: middle, to: back).verified)
                let copy = try back.open(schema: nil)
                try Self.compare(copy, with: expected, "\(file) via \(kind)")
                try copy.close()
            }
            #expect(FileManager.default.contents(atPath: file) == before, "the file is never written")
        }
        // The python encoder and the reader agree on the key's and the IV's layout only if the
        // whole of the file decrypts: the reader refuses a page whose HMAC does not match.
        #expect(try RealmStore(ForeignSource(path: games, keyFile: gamesKey)).summary.contains("8702 objects"))
    }

    /// A wrong key is `wrongKey`, told from damage: a flipped byte of a page, or of its entry in
    /// the table of IVs and HMACs, is `corrupt` naming the page; a file cut inside a page, a key
    /// file of another size and a key given for a file that is not encrypted are refused naming
    /// what is wrong; every page flipped in turn is refused, never read as other data.
    @Test func aWrongKeyIsToldFromDamage() throws {
        let dir = try TemporaryDirectory()
        let key = dir.path("right.key"), wrong = dir.path("wrong.key")
        try Data((0..<64).map { UInt8($0) }).write(to: URL(fileURLWithPath: key))
        try Data((0..<64).map { UInt8(63 - $0) }).write(to: URL(fileURLWithPath: wrong))
        let file = dir.path("games.realm")
        _ = try runCommand("/usr/bin/python3", [Self.dump, Self.path("kotlin-random-games.f23"), "--key-file", key,
                                                "--encrypt", file])
        let bytes = try #require(FileManager.default.contents(atPath: file))
        func open(_ data: Data, key: String) throws {
            let damaged = dir.path("damaged.realm")
            try data.write(to: URL(fileURLWithPath: damaged))
            try RealmStore(ForeignSource(path: damaged, keyFile: key)).close()
        }
        #expect { try open(bytes, key: wrong) } throws: {
            ($0 as? StoreError)?.code == .wrongKey && "\($0)".contains("not the key")
        }
        let hex = dir.path("hex.key")
        try Data(((0..<64).map { String(format: "%02x", $0) }.joined() + "\n").utf8).write(to: URL(fileURLWithPath: hex))
        try open(bytes, key: hex)
        let page = RealmCipher.pageSize
        var pagesRefused = 0
        for filePage in 0..<(bytes.count / page) {
            var flipped = bytes
            let offset = filePage * page + (filePage % 3 == 0 ? 4 : 1000 + filePage)
            flipped[offset] ^= 0x20
            do {
                try open(flipped, key: key)
                // A byte of a table page past the entries in use (a group of fewer than 64 pages).
                #expect(filePage % 65 == 0, "page \(filePage) was flipped at \(offset) and read")
            } catch let error as StoreError {
                #expect(error.code == .corrupt && "\(error)".contains("does not match its HMAC"), "\(error)")
                pagesRefused += 1
            }
        }
        #expect(pagesRefused >= bytes.count / page - 3)
        #expect { try open(bytes.prefix(bytes.count - 100), key: key) } throws: {
            ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("whole pages")
        }
        let short = dir.path("short.key")
        try Data(repeating: 7, count: 32).write(to: URL(fileURLWithPath: short))
        #expect { try open(bytes, key: short) } throws: {
            ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("short.key holds 32 bytes")
        }
        #expect { try RealmStore(ForeignSource(path: Self.path("js-simple.f23"), keyFile: key)) } throws: {
            ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("is not encrypted")
        }
        #expect { try RealmStore(ForeignSource(path: file, keyFile: dir.path("missing.key"))) } throws: {
            ($0 as? StoreError)?.code == .notFound && "\($0)".contains("missing.key")
        }
        print("encrypted Realm file: \(pagesRefused) of \(bytes.count / page) pages flipped were refused")
    }

    /// `--key-file` on the command line: copy, verify, inspect and export read the encrypted file;
    /// the key is in no output, report or location (only its file's path); a wrong key is one
    /// line and exit code 2; `--key-file` for a source of another kind is refused.
    @Test func theKeyFileOptionReadsAnEncryptedFileAndTheKeyIsNeverShown() throws {
        let dir = try TemporaryDirectory()
        let keyBytes = (0..<64).map { UInt8(($0 * 91 + 5) & 0xFF) }
        let key = dir.path("realm.key"), wrong = dir.path("wrong.key")
        try Data(keyBytes).write(to: URL(fileURLWithPath: key))
        try Data(keyBytes.reversed()).write(to: URL(fileURLWithPath: wrong))
        let file = dir.path("pets.realm")
        _ = try runCommand("/usr/bin/python3", [Self.dump, Self.path("swift-migration-default-v5.f20"), "--key-file", key,
                                                "--encrypt", file])
        let hexKey = keyBytes.map { String(format: "%02x", $0) }.joined()
        let report = dir.path("report.json")
        let runs = [
            try runCLI(["copy", "--from", "realm:\(file)", "--key-file", key, "--to", "lmdb:\(dir.path("copy"))",
                        "--report", report]),
            try runCLI(["verify", "--from", "realm:\(file)", "--key-file", key, "--to", "lmdb:\(dir.path("copy"))"]),
            try runCLI(["inspect", file, "--key-file", key]),
            try runCLI(["export", "--from", "realm:\(file)", "--key-file", key, "--entity", "Person", "--output",
                        dir.path("pets.jsonl")]),
        ]
        for run in runs {
            #expect(run.status == 0, "\(run.errors)")
            let seen = run.output + run.errors + (String(data: FileManager.default.contents(atPath: report) ?? Data(),
                                                         encoding: .utf8) ?? "")
            #expect(!seen.contains(hexKey) && !seen.lowercased().contains(hexKey))
            #expect(!Data(seen.utf8).contains(Data(keyBytes)))
        }
        #expect(runs[2].output.contains("encrypted") && runs[2].output.contains("keyfile=\(key)"))
        let copy = try StoreLocation(kind: .lmdb, path: dir.path("copy")).open(schema: nil)
        try Self.compare(copy, with: try Self.expected("swift-migration-default-v5.f20"), "pets via the CLI")
        try copy.close()
        let refused = try runCLI(["inspect", "realm:\(file)", "--key-file", wrong])
        #expect(refused.status == 2 && refused.errors.contains("not the key"), "\(refused.errors)")
        #expect(refused.errors.split(separator: "\n").count == 1)
        let other = try runCLI(["inspect", "coredata:\(file)", "--key-file", key])
        #expect(other.status == 2 && other.errors.contains("--key-file is for encrypted realm: sources"), "\(other.errors)")
    }

    /// A Realm file of many objects (written by Scripts/realm-make.py, from the format's
    /// description: no Realm SDK runs here), encrypted: copied into LMDB by migrate-store, killed
    /// with SIGKILL once a checkpoint is committed, resumed, and verified; then every item compared
    /// with the values the generator wrote, each owner's list in its order. The test command
    /// copies 10,000 items, Scripts/release-check.sh 50,000; `DATASTORE_REALM_ITEMS=1000000` runs
    /// it at a million (the benchmark harness's --realm does the same in a release build).
    @Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
    func aLargeRealmFileCopyKilledMidwayResumesAndVerifiesExact() throws {
        let items = Int(ProcessInfo.processInfo.environment["DATASTORE_REALM_ITEMS"] ?? "")
            ?? (runsThoroughTests ? 50_000 : 10_000)
        let dir = try TemporaryDirectory()
        let key = dir.path("big.key")
        try Data((0..<64).map { UInt8(($0 * 13 + 1) & 0xFF) }).write(to: URL(fileURLWithPath: key))
        let file = dir.path("big.realm")
        _ = try runCommand("/usr/bin/python3", [Self.make, file, "--items", String(items), "--key-file", key])
        let before = FileManager.default.contents(atPath: file)
        let destination = StoreLocation(kind: .lmdb, path: dir.path("copy"))
        let arguments = ["copy", "--from", "realm:\(file)", "--key-file", key, "--to", destination.description,
                         "--batch-size", "500"]
        let (process, _, errors) = try startCLI(arguments + ["--progress", "plain"])
        // Kill it once a progress line shows items committed into the destination.
        var seen = ""
        while !seen.contains("copy Item "), process.isRunning {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal, "killed mid-copy: \(seen)")
        #expect(!opensAsComplete(destination), "a killed copy is not a complete store")
        let resumed = try runCLI(arguments + ["--resume", "--progress", "none"])
        #expect(resumed.status == 0, "\(resumed.errors)")
        let verify = try runCLI(["verify", "--from", "realm:\(file)", "--key-file", key, "--to", destination.description])
        #expect(verify.status == 0, "\(verify.errors)")
        #expect(FileManager.default.contents(atPath: file) == before, "the file is never written")
        let copy = try destination.open(schema: nil)
        defer { try? copy.close() }
        try copy.read { reader in
            #expect(try reader.count(FetchRequest("Item")) == items)
            var compared = 0
            try reader.forEach(FetchRequest("Item")) { record in
                guard case .int(let id) = record["id"] else { Issue.record("an item without an id"); return }
                let i = Int(id) - 1_000_000_000
                let owner: Value = i % 11 == 0 ? .null : .string(String(format: "owner-%05d", i / 1000))
                let expected: [String: Value] = [
                    "name": .string(String(format: "item-%07d", i)), "price": .double(Double(i) * 0.25 + 0.5),
                    "active": .bool(i % 3 == 0),
                    "created": .date(Timestamp(microsecondsSinceEpoch: Int64(1_600_000_000 + i) * 1_000_000 + Int64(i % 1000))),
                    "note": i % 7 == 0 ? .null : .string("note \(i * 31 % 9973)"),
                    "count": i % 5 == 0 ? .null : .int(Int64(i % 200 - 100)), "owner": owner,
                ]
                for (name, value) in expected where record[name] != value {
                    Issue.record("item \(i).\(name) is \(record[name]), not \(value)")
                }
                compared += 1
            }
            #expect(compared == items)
            for owner in [0, (items - 1) / 1000] {
                let name = Value.string(String(format: "owner-%05d", owner))
                let listed = try reader.related("Owner", key: name, "items").map { $0["id"] }
                let expected = (owner * 1000..<min(items, owner * 1000 + 1000)).reversed().filter { $0 % 11 != 0 }
                    .map { Value.int(Int64(1_000_000_000 + $0)) }
                #expect(listed == expected, "owner \(owner)'s items in their order")
            }
        }
    }

    /// A file an app is writing: a commit that lands while the file is read (here, new top
    /// references written into the slot not in use, after each read of the whole file) makes the
    /// reader read it again: 8 times at most, then `busy`, naming the file; when the commits stop,
    /// the next read is the file as the last commit left it. Bytes written past the selected
    /// commit (where an app writes its next one) leave the read alone.
    @Test func aFileBeingWrittenIsReadAtOneCommitOrRefusedAsBusy() throws {
        let dir = try TemporaryDirectory()
        let file = dir.path("live.realm")
        _ = try runCommand("/usr/bin/python3", [Self.make, file, "--items", "2000"])
        var commits = 0
        func commit() throws {
            commits += 1
            let handle = try #require(FileHandle(forWritingAtPath: file))
            try handle.seek(toOffset: 8)
            try handle.write(contentsOf: withUnsafeBytes(of: UInt64(8 * commits).littleEndian) { Data($0) })
            try handle.close()
        }
        #expect { _ = try RealmStore.snapshot(file, afterRead: commit) } throws: {
            ($0 as? StoreError)?.code == .busy && "\($0)".contains("live.realm is being written")
        }
        #expect(commits == 8)
        commits = 0
        // Three commits land during the first three reads; the fourth read is the file at rest.
        let read = try RealmStore.snapshot(file) { if commits < 3 { try commit() } }
        let atRest = [UInt8](try #require(FileManager.default.contents(atPath: file)))
        #expect(commits == 3 && read.count == atRest.count && read.elementsEqual(atRest))
        #expect(RealmFile.uint64(read, at: 8) == 24)
        // The next commit's bytes, past the end of the one the header selects.
        let handle = try #require(FileHandle(forWritingAtPath: file))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 4096))
        try handle.close()
        let grown = try RealmStore.snapshot(file)
        #expect(grown.count == atRest.count + 4096 && grown.prefix(atRest.count).elementsEqual(atRest))
        let store = try RealmStore(ForeignSource(path: file))
        #expect(try store.read { try $0.count(FetchRequest("Item")) } == 2_000)
        try store.close()
    }

    /// What this reader cannot carry is refused in one line naming it; an encrypted file, a cut
    /// file and a file of another kind are refused, never read as data.
    @Test func whatCannotBeReadIsRefusedNamingIt() throws {
        #expect { try RealmStore(ForeignSource(path: Self.path("cocoa6-alltypes-encrypted"))) } throws: {
            ($0 as? StoreError)?.code == .notAStore && "\($0)".contains("encrypted") && "\($0)".contains("--key-file")
        }
        let dir = try TemporaryDirectory()
        let bytes = try #require(FileManager.default.contents(atPath: Self.path("js-simple.f23")))
        let cut = dir.path("cut.realm")
        try bytes.prefix(4000).write(to: URL(fileURLWithPath: cut))
        #expect { try RealmStore(ForeignSource(path: cut)) } throws: { ($0 as? StoreError)?.code == .corrupt }
        let text = dir.path("notes.realm")
        try Data("not a realm file at all, just some text".utf8).write(to: URL(fileURLWithPath: text))
        #expect { try RealmStore(ForeignSource(path: text)) } throws: { "\($0)".contains("is not a Realm file") }
        #expect { try RealmStore(ForeignSource(path: dir.path("missing.realm"))) } throws: {
            ($0 as? StoreError)?.code == .notFound
        }
    }

    /// Every kind of structure a Realm file has (the top array, table names, table tops, specs,
    /// cluster leaves and inner nodes, each kind of value leaf, list and set B+trees, collection
    /// roots, Mixed arrays, dictionaries), in every fixture: nodes of each kind, as the
    /// independent reader finds them (`realm-dump.py --nodes`), damaged in their header (each
    /// flag, the count) and their payload, and each damaged file read: refused with a StoreError
    /// or read, never a crash. Realm .NET's file (more classes than a store holds) is read below
    /// the store, every value of every column.
    @Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
    func everyStructureDamagedIsRefusedOrReadNeverACrash() throws {
        struct Nodes: Decodable { var nodes: [[JSONValue]] }
        let dir = try TemporaryDirectory()
        let damaged = dir.path("damaged.realm")
        var outcomes: [String: [String: Int]] = [:]
        for name in Self.readable + ["dotnet-guids.f24"] {
            let bytes = try #require(FileManager.default.contents(atPath: Self.path(name)))
            let output = try runCommand("/usr/bin/python3", [Self.dump, Self.path(name), "--json", "--nodes"])
            var byKind: [String: [Int]] = [:]
            for pair in try JSONDecoder().decode(Nodes.self, from: Data(output.utf8)).nodes {
                guard pair.count == 2, case .int(let ref) = pair[0], case .string(let kind) = pair[1] else { continue }
                byKind[kind, default: []].append(Int(ref))
            }
            // Nodes of each kind spread over the file; fewer of the large file's, and half as many
            // in the test command as in Scripts/release-check.sh (DATASTORE_THOROUGH=1).
            let perKind = name == "kotlin-random-games.f23" ? 1 : runsThoroughTests ? 8 : 4
            for kind in byKind.keys.sorted() {
                let refs = byKind[kind] ?? []
                let step = max(1, refs.count / perKind)
                for ref in stride(from: 0, to: refs.count, by: step).prefix(perKind).map({ refs[$0] }) {
                    let count = Int(bytes[ref + 5]) << 16 | Int(bytes[ref + 6]) << 8 | Int(bytes[ref + 7])
                    var edits: [(Int, UInt8)] = [(ref + 4, 0x80), (ref + 4, 0x40), (ref + 4, 0x20), (ref + 4, 0x08),
                                                 (ref + 4, 0x07), (ref + 5, 0xFF), (ref + 6, 0x01), (ref + 7, 0xFF)]
                    if count > 0 { edits += [(ref + 8, 0xFF), (ref + 8, 0x02), (min(bytes.count - 1, ref + 15), 0x80)] }
                    for (offset, mask) in edits where offset < bytes.count {
                        var variant = bytes
                        variant[offset] ^= mask
                        try variant.write(to: URL(fileURLWithPath: damaged))
                        let outcome: String
                        do {
                            if name == "dotnet-guids.f24" {
                                try Self.readEveryValueBelowTheStore(damaged)
                            } else {
                                let store = try RealmStore(ForeignSource(path: damaged))
                                for entity in store.schema.entities {
                                    _ = try store.read { try $0.fetch(FetchRequest(entity.name)) }
                                }
                                try store.close()
                            }
                            outcome = "read"
                        } catch let error as StoreError {
                            outcome = "\(error.code)"
                        }
                        outcomes[kind, default: [:]][outcome, default: 0] += 1
                    }
                }
            }
        }
        for kind in outcomes.keys.sorted() {
            print("damaged \(kind): \((outcomes[kind] ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        }
        for kind in ["top array", "table names and tables", "table top, spec and column arrays", "cluster leaf",
                     "cluster inner node", "value leaf", "string leaf", "timestamp arrays", "ObjectId and UUID leaf",
                     "Decimal128 and float leaf", "list and set B+tree node", "collection root", "Mixed leaf",
                     "Mixed arrays", "dictionary"] {
            #expect((outcomes[kind]?.values.reduce(0, +) ?? 0) > 0, "no \(kind) was damaged")
        }
        #expect(outcomes.values.contains { ($0["corrupt"] ?? 0) > 0 })
    }

    /// Every value of every column of every class of a file, read below the store (for a file
    /// whose classes a store cannot hold).
    static func readEveryValueBelowTheStore(_ path: String) throws {
        let data = try #require(FileManager.default.contents(atPath: path))
        let model = try RealmModel(try RealmFile(bytes: [UInt8](data), path: path))
        let links: RealmValues.Links = { _, key in .value(.int(key)) }
        for table in model.tables where table.name.hasPrefix("class_") {
            try model.forEachLeaf(of: table) { leaf, keys in
                for column in table.columns where column.target == nil || column.isDictionary {
                    let cell = try model.file.ref(leaf, column.leafIndex + 1, column.name)
                    _ = try RealmMapping.values(of: column, in: table, cell: cell, count: keys.count, file: model.file,
                                                links: links, refuse: { StoreError(.invalidArgument, $0) })
                }
            }
        }
    }

    /// Every byte of a file flipped in turn, and the file cut at every 8 bytes: each is read or
    /// refused with a StoreError, never a crash.
    @Test func damagedFilesAreRefusedOrReadNeverACrash() throws {
        let dir = try TemporaryDirectory()
        var outcomes: [String: Int] = [:]
        for name in ["swift-migration-default-v5.f20", "js-tools-default.f22"] {
            let bytes = try #require(FileManager.default.contents(atPath: Self.path(name)))
            let damaged = dir.path("damaged.realm")
            var variants: [Data] = []
            for offset in 0..<bytes.count {
                var flipped = bytes
                flipped[offset] ^= 0xFF
                variants.append(flipped)
            }
            for length in stride(from: 0, to: bytes.count, by: 8) { variants.append(bytes.prefix(length)) }
            for variant in variants {
                try variant.write(to: URL(fileURLWithPath: damaged))
                do {
                    let store = try RealmStore(ForeignSource(path: damaged))
                    for entity in store.schema.entities {
                        _ = try store.read { try $0.fetch(FetchRequest(entity.name)) }
                    }
                    try store.close()
                    outcomes["read", default: 0] += 1
                } catch let error as StoreError {
                    outcomes["\(error.code)", default: 0] += 1
                }
            }
        }
        print("damaged Realm files: \(outcomes.sorted { $0.key < $1.key })")
        #expect((outcomes["corrupt"] ?? 0) > 0)
    }

    /// Nodes an outside review made up, each of which read past the file or overflowed before:
    /// a top array of bytes (width type 2) whose integer width runs past the end, and dates and
    /// key offsets past 64 bits. Each is damage, named.
    @Test func madeUpNodesAndValuesAreDamageNotACrash() throws {
        let dir = try TemporaryDirectory()
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: Self.path("js-simple.f23"))))
        while bytes.count % 8 != 0 { bytes.append(0) }
        let top = bytes.count
        // "AAAA", flags 0x57 (has refs, width type 2, width 64 bits), 3 elements, 8 bytes.
        bytes += [0x41, 0x41, 0x41, 0x41, 0x57, 0, 0, 3] + [UInt8](repeating: 0, count: 8)
        for slot in 0..<2 {
            for i in 0..<8 { bytes[slot * 8 + i] = UInt8(truncatingIfNeeded: UInt64(top) >> (8 * i)) }
        }
        let path = dir.path("made-up.realm")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect { try RealmStore(ForeignSource(path: path)) } throws: {
            ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("past the end of the file")
        }

        let file = try RealmFile(bytes: [UInt8](try #require(FileManager.default.contents(atPath: Self.path("js-simple.f23")))),
                                 path: "dates.realm")
        for (seconds, nanoseconds) in [(Int64(9_223_372_036_854), Int64(999_999_999)), (-9_223_372_036_854, -999_999_999),
                                       (0, Int64.min), (Int64.max, 0)] {
            #expect { try RealmValues.timestamp(seconds, nanoseconds, file: file, label: "dates") } throws: {
                ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("out of range")
            }
        }
        #expect(try RealmValues.timestamp(1, 500_000_000, file: file, label: "dates").microsecondsSinceEpoch == 1_500_000)
        #expect { try RealmModel.key(Int64.max, 1, file: file, label: "keys") } throws: {
            ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("past 64 bits")
        }
        #expect(try RealmModel.key(-5, 7, file: file, label: "keys") == 2)
    }
}

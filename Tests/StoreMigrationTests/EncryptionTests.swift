@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import InMemoryStore
@_spi(Backend) import LMDBStore
@_spi(Backend) import SQLiteStore
import StoreMigration
import Testing

/// Encrypted stores on the backends whose data are files: what the files hold, and the errors
/// of a wrong key, a damaged value and a value moved to another item.

private let secretSchema = Schema(entities: [
    EntitySchema("Patient", primaryKey: "id", attributes: [
        Attribute("id", .int),
        Attribute("ward", .string),
        Attribute("name", .string),
        Attribute("notes", .string, optional: true),
        Attribute("scan", .bytes, optional: true),
        Attribute("weight", .double, optional: true),
    ], indexes: [Index("byWard", on: ["ward"])]),
])

private let rawKey = try! StoreKey(rawKey: (0..<32).map { UInt8(200 - $0) })
private let otherKey = try! StoreKey(rawKey: (0..<32).map { UInt8($0) })

/// Values no file of the store may hold: each is written into an attribute that is not indexed.
private func secretValues(_ i: Int) -> (name: String, notes: String, scan: [UInt8]) {
    ("Zebediah Quirrelthorpe \(i)", "allergic to penicillin, case \(i) of the trial",
     Array("XRAY-PIXELS-\(i)-\(String(repeating: "Q", count: 40))".utf8))
}

private func fill(_ store: any DataStore, count: Int = 20) throws {
    try store.writeSync { writer in
        for i in 1...count {
            let secret = secretValues(i)
            try writer.insert(["id": .int(Int64(i)), "ward": "ward-\(i % 3)", "name": .string(secret.name),
                               "notes": .string(secret.notes), "scan": .bytes(secret.scan), "weight": 71.25],
                              into: "Patient")
        }
        try writer.setMetadata(Array("the app's cursor: Zebediah Quirrelthorpe".utf8), forKey: "app.cursor")
    }
    // An update and a delete, so the feed holds every kind of entry.
    try store.writeSync { writer in
        _ = try writer.update("Patient", key: 2, set: ["notes": "moved to the quiet room of Quirrelthorpe wing"])
        _ = try writer.delete("Patient", key: 3)
    }
}

/// Every file under `directory` (or the one file and its `-wal`, `-shm`), as bytes.
private func storeFiles(_ paths: [String]) -> [(String, [UInt8])] {
    var files: [(String, [UInt8])] = []
    for path in paths {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
        if isDirectory.boolValue {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
            files += storeFiles(names.map { path + "/" + $0 })
        } else if let data = FileManager.default.contents(atPath: path) {
            files.append((path, Array(data)))
        }
    }
    return files
}

private func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> Int {
    guard needle.count <= haystack.count else { return 0 }
    var found = 0
    var i = 0
    while i <= haystack.count - needle.count {
        if haystack[i] == needle[0], Array(haystack[i..<(i + needle.count)]) == needle { found += 1 }
        i += 1
    }
    return found
}

/// Which of the secret values (and distinctive parts of them) appear in the files.
private func plaintextFound(in files: [(String, [UInt8])], count: Int = 20) -> [String] {
    var needles: [String: [UInt8]] = ["surname": Array("Quirrelthorpe".utf8), "drug": Array("penicillin".utf8),
                                      "pixels": Array("XRAY-PIXELS".utf8)]
    withUnsafeBytes(of: (71.25).bitPattern.littleEndian) { needles["weight (little-endian)"] = Array($0) }
    withUnsafeBytes(of: (71.25).bitPattern.bigEndian) { needles["weight (big-endian)"] = Array($0) }
    var found: [String] = []
    for (path, bytes) in files {
        for (what, needle) in needles.sorted(by: { $0.key < $1.key }) where occurrences(of: needle, in: bytes) > 0 {
            found.append("\(what) in \((path as NSString).lastPathComponent)")
        }
    }
    return found
}

@Test(arguments: ["sqlite", "lmdb"])
func anEncryptedStoresFilesHoldNoValueThatIsNotIndexed(_ kind: String) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path(kind == "sqlite" ? "secrets.sqlite" : "secrets.lmdb")
    let paths = kind == "sqlite" ? [path, path + "-wal", path + "-shm"] : [path]
    func open() throws -> any DataStore {
        kind == "sqlite" ? try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: rawKey))
            : try LMDBStore(path: path, schema: secretSchema, options: LMDBOptions(key: rawKey))
    }
    let start: ChangeToken
    do {
        let store = try open()
        start = try store.read { try $0.changeToken() }
        try fill(store)
        // With the store open, a SQLite store's last commits are in its -wal.
        #expect(plaintextFound(in: storeFiles(paths)) == [])
        // The indexed attribute is in the clear, as the threat model says.
        #expect(storeFiles(paths).contains { occurrences(of: Array("ward-1".utf8), in: $0.1) > 0 })
        try store.close()
    }
    #expect(plaintextFound(in: storeFiles(paths)) == [])
    // And everything reads back, the feed included.
    let store = try open()
    defer { try? store.close() }
    let patients = try store.read { try $0.fetch(FetchRequest("Patient", sort: [SortKey("id")])) }
    #expect(patients.count == 19)
    #expect(patients.first?["name"] == .string(secretValues(1).name))
    #expect(try store.read { try $0.metadata(forKey: "app.cursor") } == Array("the app's cursor: Zebediah Quirrelthorpe".utf8))
    let changes = try store.read { try $0.changes(since: start, limit: 10) }
    #expect(changes.count == 2)
    #expect(changes.last?.items.count == 2)
    // Filters on sealed attributes are answered over the opened values.
    let found = try store.read { try $0.fetch(FetchRequest("Patient", filter: .contains("notes", "quiet room"))) }
    #expect(found.map { $0["id"] } == [.int(2)])
    #expect(try store.read { try $0.count(FetchRequest("Patient", filter: .and([.compare("ward", .equal, "ward-1"),
                                                                            .hasPrefix("name", "Zeb")]))) } == 7)

    // The same files without encryption hold every value: the scan finds what it looks for.
    let plainPath = dir.path(kind == "sqlite" ? "plain.sqlite" : "plain.lmdb")
    let plain: any DataStore = kind == "sqlite" ? try SQLiteStore(path: plainPath, schema: secretSchema)
        : try LMDBStore(path: plainPath, schema: secretSchema)
    try fill(plain)
    try plain.close()
    let plainPaths = kind == "sqlite" ? [plainPath, plainPath + "-wal"] : [plainPath]
    #expect(Set(plaintextFound(in: storeFiles(plainPaths)).map { $0.components(separatedBy: " in ")[0] })
        .isSuperset(of: ["surname", "drug", "pixels"]))
}

@Test func aWrongKeyIsWrongKeyAndAMissingKeySaysTheStoreIsEncrypted() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("keyed.sqlite")
    try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: rawKey)).close()

    let wrong = #expect(throws: StoreError.self) {
        try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: otherKey))
    }
    #expect(wrong?.code == .wrongKey)
    #expect(wrong?.message.contains("the key does not open this store") == true)
    let passphrase = #expect(throws: StoreError.self) {
        try SQLiteStore(path: path, schema: secretSchema,
                        options: SQLiteOptions(key: StoreKey(passphrase: "correct horse", cost: 10)))
    }
    #expect(passphrase?.code == .wrongKey)
    #expect(passphrase?.message.contains("encrypted with a raw key") == true)
    let none = #expect(throws: StoreError.self) { try SQLiteStore(path: path, schema: nil) }
    #expect(none?.code == .wrongKey)
    #expect(none?.message.contains("is encrypted: open it with its key") == true)
    let lmdbNone = #expect(throws: StoreError.self) {
        let lmdbPath = dir.path("keyed.lmdb")
        try LMDBStore(path: lmdbPath, schema: secretSchema, options: LMDBOptions(key: rawKey)).close()
        _ = try LMDBStore(path: lmdbPath, schema: nil)
    }
    #expect(lmdbNone?.code == .wrongKey)

    // A store without encryption, opened with a key, says so.
    let plainPath = dir.path("plain.sqlite")
    try SQLiteStore(path: plainPath, schema: secretSchema).close()
    let plain = #expect(throws: StoreError.self) {
        try SQLiteStore(path: plainPath, schema: secretSchema, options: SQLiteOptions(key: rawKey))
    }
    #expect(plain?.code == .invalidArgument)
    #expect(plain?.message.contains("is not encrypted") == true)

    // The right key still opens it: nothing above changed the store.
    let store = try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: rawKey))
    try store.close()
}

@Test func aPassphraseOpensWhatItEncryptedAndNoOtherDoes() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("phrase.lmdb")
    let key = try StoreKey(passphrase: "correct horse battery staple", cost: 10)
    do {
        let store = try LMDBStore(path: path, schema: secretSchema, options: LMDBOptions(key: key))
        try fill(store, count: 3)
        try store.close()
    }
    let wrong = #expect(throws: StoreError.self) {
        try LMDBStore(path: path, schema: secretSchema,
                      options: LMDBOptions(key: StoreKey(passphrase: "correct horse battery stapler", cost: 10)))
    }
    #expect(wrong?.code == .wrongKey)
    #expect(wrong?.message.contains("encrypted with a passphrase") == true)
    let store = try LMDBStore(path: path, schema: secretSchema, options: LMDBOptions(key: key))
    defer { try? store.close() }
    #expect(try store.read { try $0.get("Patient", key: 1) }?["notes"] == .string(secretValues(1).notes))
    #expect(plaintextFound(in: storeFiles([path]), count: 3) == [])
}

/// Runs `sql` on a SQLite file with the sqlite3 shell.
private func sqlite3(_ path: String, _ sql: String) throws -> String {
    try runCommand("/usr/bin/sqlite3", [path, sql]).trimmingCharacters(in: .whitespacesAndNewlines)
}

@Test func aDamagedValueAndAValueMovedToAnotherItemAreEachNamedDamage() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("damage.sqlite")
    do {
        let store = try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: rawKey))
        try fill(store, count: 4)
        try store.close()
    }
    func open() throws -> SQLiteStore {
        try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: rawKey))
    }
    // One byte of item 1's ciphertext changed.
    _ = try sqlite3(path, "UPDATE Patient SET _ds_sealed = CAST(substr(_ds_sealed, 1, 20) || "
        + "(CASE WHEN substr(_ds_sealed, 21, 1) = X'00' THEN X'01' ELSE X'00' END) || substr(_ds_sealed, 22) AS BLOB) "
        + "WHERE id = 1")
    do {
        let store = try open()
        defer { try? store.close() }
        let damaged = #expect(throws: StoreError.self) { try store.read { try $0.get("Patient", key: 1) } }
        #expect(damaged?.code == .corrupt)
        #expect(damaged?.message.contains("Patient[1]") == true)
        #expect(damaged?.message.contains("do not open with the store's key") == true, "\(damaged?.message ?? "")")
        // The other items still read.
        #expect(try store.read { try $0.get("Patient", key: 2) }?["name"] == .string(secretValues(2).name))
    }
    // Item 4's sealed values moved into item 2: they were sealed for item 4, so they do not open.
    _ = try sqlite3(path, "UPDATE Patient SET _ds_sealed = (SELECT _ds_sealed FROM Patient WHERE id = 4) WHERE id = 2")
    do {
        let store = try open()
        defer { try? store.close() }
        let moved = #expect(throws: StoreError.self) { try store.read { try $0.get("Patient", key: 2) } }
        #expect(moved?.code == .corrupt)
        #expect(moved?.message.contains("Patient[2]") == true)
        #expect(try store.read { try $0.get("Patient", key: 4) }?["name"] == .string(secretValues(4).name))
    }
    // The key record damaged: damage, not a wrong key.
    _ = try sqlite3(path, "UPDATE _ds_meta SET value = CAST(substr(value, 1, 40) || "
        + "(CASE WHEN substr(value, 41, 1) = X'00' THEN X'01' ELSE X'00' END) || substr(value, 42) AS BLOB) "
        + "WHERE key = 'datastore.encryption'")
    let envelope = #expect(throws: StoreError.self) { try open() }
    #expect(envelope?.code == .corrupt)
    #expect(envelope?.message.contains("datastore.encryption") == true)
}

@Test func anEncryptedInMemoryDatabaseHoldsOnlySealedValues() throws {
    let database = InMemoryDatabase()
    let store = try InMemoryStore(database: database, schema: secretSchema, key: rawKey)
    try fill(store, count: 3)
    // What the database holds, read without the key's sealing: ciphertext where the values were.
    let held = try SealedEngine.$physicalSchemas.withValue(true) {
        let engine = try InMemoryEngine(database: database, schema: nil)
        return try engine.withReader { try $0.get(engine.schema.entity(named: "Patient")!, keyValue: 1) }
    }
    #expect(held?.value(ifPresent: "name") == nil)
    #expect(held?["ward"] == "ward-1")
    guard case .bytes(let sealed)? = held?.value(ifPresent: Limits.sealedAttribute) else {
        Issue.record("no sealed values")
        return
    }
    #expect(occurrences(of: Array("Quirrelthorpe".utf8), in: sealed) == 0)
    #expect(try store.read { try $0.get("Patient", key: 1) }?["name"] == .string(secretValues(1).name))
}

/// Every byte of one item's sealed values changed in turn, with the `sqlite3` shell (so the row's
/// checksum is taken off as for any outside write, and only the seal can tell): each change is
/// refused naming the item, the other item still reads, and the original bytes read again.
@Test func everyChangedByteOfASealedValueIsRefused() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("flips.sqlite")
    do {
        let store = try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: rawKey))
        try fill(store, count: 2)
        try store.close()
    }
    let original = try sqlite3(path, "SELECT hex(_ds_sealed) FROM Patient WHERE id = 1")
    let bytes = stride(from: 0, to: original.count, by: 2).map { i -> UInt8 in
        let start = original.index(original.startIndex, offsetBy: i)
        return UInt8(original[start..<original.index(start, offsetBy: 2)], radix: 16)!
    }
    #expect(bytes.count > 29)
    func write(_ value: [UInt8]) throws {
        _ = try sqlite3(path, "UPDATE Patient SET _ds_sealed = X'\(value.map { String(format: "%02X", $0) }.joined())' WHERE id = 1")
    }
    var refused = 0
    for position in bytes.indices {
        var changed = bytes
        changed[position] ^= 0x01
        try write(changed)
        let store = try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: rawKey))
        let error = #expect(throws: StoreError.self) { try store.read { try $0.get("Patient", key: 1) } }
        if error?.code == .corrupt, error?.message.contains("Patient[1]") == true { refused += 1 }
        #expect(try store.read { try $0.get("Patient", key: 2) }?["name"] == .string(secretValues(2).name))
        try store.close()
    }
    #expect(refused == bytes.count)
    try write(bytes)
    let store = try SQLiteStore(path: path, schema: secretSchema, options: SQLiteOptions(key: rawKey))
    defer { try? store.close() }
    #expect(try store.read { try $0.get("Patient", key: 1) }?["name"] == .string(secretValues(1).name))
}

/// A key printed, dumped or interpolated with the options that hold it shows no byte of it.
@Test func aKeyIsNeverPrinted() throws {
    let secret = "correct horse battery staple"
    let key = try StoreKey(passphrase: secret, cost: 10)
    let raw = try StoreKey(rawKey: [UInt8](repeating: 0xAB, count: 32))
    for options in [SQLiteOptions(key: key), SQLiteOptions(key: raw)] {
        var dumped = ""
        dump(options, to: &dumped)
        let shown = [dumped, "\(options)", String(reflecting: options), "\(LMDBOptions(key: options.key))"]
        for text in shown {
            #expect(!text.contains(secret) && !text.contains("171") && !text.lowercased().contains("ab, ab"), "\(text)")
            #expect(text.contains("StoreKey("), "\(text)")
        }
    }
}

/// A JSON Lines store copied with a key, plain and gzip-compressed: the file (read decompressed)
/// holds none of the values no index covers, and the key and indexed values in the clear; it
/// opens with the key, equal to its source, and refuses no key and another key; a copy stopped
/// midway resumes with the key, and a resume with another key is refused. The same copy without
/// a key holds the values: the scan finds what it looks for.
@Test(arguments: ["secrets.jsonl", "secrets.jsonl.gz"])
func anEncryptedJSONLinesStoreHoldsNoValueThatIsNotIndexed(_ name: String) throws {
    let dir = try TemporaryDirectory()
    let source = StoreLocation(kind: .sqlite, path: dir.path("source.sqlite"))
    do {
        let store = try source.open(schema: secretSchema)
        try fill(store, count: 300)
        try store.close()
    }
    func text(_ path: String) throws -> [(String, [UInt8])] {
        [(path, Array(try runCommand("/bin/gzip", ["-dcf", path]).utf8))]
    }
    let needles = ["Quirrelthorpe", "penicillin", "71.25"]
    func found(_ path: String) throws -> [String] {
        let bytes = try text(path)[0].1
        return needles.filter { occurrences(of: Array($0.utf8), in: bytes) > 0 }
    }
    let jsonl = StoreLocation(kind: .jsonl, path: dir.path(name)).with(key: rawKey)
    var batches = 0
    #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: jsonl, options: MigrationOptions(batchSize: 50),
                          shouldStop: { batches += 1; return batches > 2 })
    }
    #expect(try Migrator.copyState(of: jsonl) == .unfinished)
    // Another key is refused before the unfinished file is touched.
    let staging = jsonl.path + ".migrating"
    let stopped = FileManager.default.contents(atPath: staging)
    #expect(stopped != nil)
    #expect {
        try Migrator.copy(from: source, to: jsonl.with(key: otherKey), options: MigrationOptions(resume: true))
    } throws: { ($0 as? StoreError)?.code == .wrongKey }
    #expect(FileManager.default.contents(atPath: staging) == stopped)
    let report = try Migrator.copy(from: source, to: jsonl, options: MigrationOptions(resume: true))
    #expect(report.resumed && !report.startedOver && report.verified && report.differences == 0)
    #expect(try found(jsonl.path) == [])
    #expect(occurrences(of: Array("ward-1".utf8), in: try text(jsonl.path)[0].1) > 0)
    #expect(try contents(jsonl) == contents(source))
    for key in [nil, otherKey] {
        #expect {
            _ = try contents(jsonl.with(key: key))
        } throws: { ($0 as? StoreError)?.code == .wrongKey }
    }
    let keyFile = dir.path("key")
    try Data((0..<32).map { String(format: "%02x", 200 - $0) }.joined().utf8).write(to: URL(fileURLWithPath: keyFile))
    let check = try runCLI(["check", "jsonl:" + jsonl.path, "--key-file", keyFile])
    #expect(check.status == 0 && check.output.contains("299 items"), "\(check.output)\(check.errors)")

    let plain = StoreLocation(kind: .jsonl, path: dir.path("plain-" + name))
    try Migrator.copy(from: source, to: plain)
    #expect(try found(plain.path) == needles)
}

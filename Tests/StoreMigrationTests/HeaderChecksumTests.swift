@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import LMDBStore
@_spi(Backend) import SQLiteStore
import StoreMigration
import Testing

private let headerSchema = Schema(entities: [
    EntitySchema("Note", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("title", .string),
    ]),
])

/// The store's engine, without the store above it: what it writes is not recorded in the feed.
/// Read-only, it upgrades nothing.
private func withEngine<T>(_ location: StoreLocation, readOnly: Bool = false,
                           _ body: (any StorageEngine) throws -> T) throws -> T {
    let engine: any StorageEngine = location.kind == .sqlite
        ? try SQLiteEngine(path: location.path, schema: nil, options: SQLiteOptions(readOnly: readOnly))
        : try LMDBEngine(path: location.path, schema: nil, options: LMDBOptions(readOnly: readOnly))
    defer { try? engine.close() }
    return try body(engine)
}

/// A store of two notes, each written by a commit the feed records.
private func makeStore(_ location: StoreLocation) throws {
    let store = try location.open(schema: headerSchema)
    defer { try? store.close() }
    for id in 1...2 {
        try store.writeSync { try $0.insert(["id": .int(Int64(id)), "title": "note \(id)"], into: "Note") }
    }
}

/// What an app does first with a store: opens it, reads the feed's head and its items, writes
/// one. Returns the first error.
private func useStore(_ location: StoreLocation) -> (any Error)? {
    do {
        let store = try location.open(schema: nil)
        defer { try? store.close() }
        _ = try store.currentChangeToken()
        _ = try store.read { try $0.fetch(FetchRequest("Note")) }
        try store.writeSync { try $0.insert(["id": 3, "title": "note 3"], into: "Note") }
        return nil
    } catch {
        return error
    }
}

/// Every byte of the store's header (its format version, its schema) and of the change feed's
/// state flipped in turn: each flip is damage (`corrupt`) when the store is opened, its feed
/// read or a commit made, never another schema, an older format to upgrade from or another
/// feed; the store is never written. `check` names each record's damage (exit 2). A schema
/// record whose sum was cut off is damage too.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func everyFlippedByteOfTheHeaderOrTheFeedsStateIsDamage(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let pristine = dir.location(kind, "pristine")
    try makeStore(pristine)
    let keys = [StoreHeader.formatKey, StoreHeader.schemaKey, ChangeLog.stateKey]
    let originals = try withEngine(pristine, readOnly: true) { engine in
        try engine.withReader { reader in try keys.map { try #require(try reader.metadata(forKey: $0)) } }
    }
    // Sealed as this version writes them: the schema's JSON, a NUL byte and its sum; the feed's
    // state of version 3 with its sum.
    #expect(originals[1][originals[1].count - 5] == 0)
    #expect(originals[2].count == 54 && originals[2].first == 3)
    let work = dir.location(kind, "work")
    let fileManager = FileManager.default
    func damaged(_ key: String, _ bytes: [UInt8]) throws {
        try? fileManager.removeItem(atPath: work.path)
        try fileManager.copyItem(atPath: pristine.path, toPath: work.path)
        try withEngine(work) { engine in try engine.withWriter { try $0.setMetadata(bytes, forKey: key) } }
    }
    // What `check` names for each record.
    let named = ["format version is missing or unreadable", "header is damaged", "feed's state is damaged"]
    var flips = 0
    for ((key, original), named) in zip(zip(keys, originals), named) {
        // Each bit of the format's digit alone too: '3' ^ 0x04 is '7', a newer format by its text.
        let patterns: [UInt8] = key == StoreHeader.formatKey ? [1, 2, 4, 8, 16, 32, 64, 128, 0xFF] : [1, 0xFF]
        for index in original.indices {
            for pattern in patterns {
                var bytes = original
                bytes[index] ^= pattern
                try damaged(key, bytes)
                let error = useStore(work)
                #expect((error as? StoreError)?.code == .corrupt,
                        "\(key), byte \(index) ^ \(pattern): \(String(describing: error))")
                flips += 1
            }
        }
        // The notes are as they were: the refused commit wrote nothing.
        try damaged(key, original)
        #expect(try contents(work)["Note"]?.count == 2)
        var bytes = original
        bytes[original.count - 1] ^= 0xFF  // in the sum, where one is kept: a schema that still decodes
        try damaged(key, bytes)
        let check = try runCLI(["check", work.description])
        #expect(check.status == 2 && check.errors.contains(work.path) && check.errors.contains(named),
                "\(key): \(check.output)\(check.errors)")
    }
    #expect(flips == originals[0].count * 9 + (originals[1].count + originals[2].count) * 2)
    // The sum cut off the schema record, leaving JSON that reads: damage in this format.
    try damaged(StoreHeader.schemaKey, Array(originals[1].dropLast(5)))
    let cut = useStore(work)
    #expect((cut as? StoreError)?.code == .corrupt && (cut as? StoreError)?.message.contains("no checksum") == true,
            "\(String(describing: cut))")
}

/// A store whose header and feed state a version before their checksums wrote (the schema's
/// JSON alone, the format before this one, the state of version 2) reads as it is when opened
/// read-only; a writable open writes the header with its sum and this format, and the next
/// recorded commit the feed's state with its sum.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func aHeaderWithoutItsChecksumIsSealedByAWritableOpen(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let location = dir.location(kind, "old")
    try makeStore(location)
    let current = try withEngine(location, readOnly: true) { engine in
        try engine.withReader { try #require(try $0.metadata(forKey: StoreHeader.formatKey)) }
    }
    let older = Array(String(Int(String(decoding: current, as: UTF8.self))! - 1).utf8)
    try withEngine(location) { engine in
        try engine.withWriter { writer in
            try writer.setMetadata(older, forKey: StoreHeader.formatKey)
            try writer.setMetadata(headerSchema.encodedForStorage(), forKey: StoreHeader.schemaKey)
            // Version 2: the same fields, without the sum.
            let state = try #require(try writer.metadata(forKey: ChangeLog.stateKey))
            try writer.setMetadata([2] + state.dropFirst().dropLast(4), forKey: ChangeLog.stateKey)
        }
    }
    func stored(_ key: String) throws -> [UInt8] {
        try withEngine(location, readOnly: true) { engine in
            try engine.withReader { try #require(try $0.metadata(forKey: key)) }
        }
    }
    do {
        let store: any DataStore = kind == .sqlite
            ? try SQLiteStore(path: location.path, schema: nil, options: SQLiteOptions(readOnly: true))
            : try LMDBStore(path: location.path, schema: nil, options: LMDBOptions(readOnly: true))
        #expect(try store.read { try $0.count(FetchRequest("Note")) } == 2)
        #expect(try store.currentChangeToken().sequence == 2)
        try store.close()
    }
    #expect(try stored(StoreHeader.formatKey) == older)
    do {
        let store = try location.open(schema: nil)
        #expect(try store.currentChangeToken().sequence == 2)
        try store.close()
    }
    #expect(try stored(StoreHeader.formatKey) == current)
    let schema = try stored(StoreHeader.schemaKey)
    #expect(schema[schema.count - 5] == 0)
    #expect(try stored(ChangeLog.stateKey).first == 2)
    #expect(useStore(location) == nil)
    #expect(try stored(ChangeLog.stateKey).count == 54)
    #expect(try contents(location)["Note"]?.count == 3)
}

@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import CChecksum
import Foundation
@_spi(Backend) @testable import LMDBStore
import Testing

/// The schema of the checksum tests: every kind of field, so that a flip lands in a tag, a
/// number, a length, a string, bytes, a date and a uuid.
private let checksumSchema = Schema(entities: [EntitySchema("Item", primaryKey: "id", attributes: [
    Attribute("id", .int), Attribute("name", .string), Attribute("score", .double),
    Attribute("payload", .bytes, optional: true), Attribute("seen", .date, optional: true),
    Attribute("tag", .uuid, optional: true), Attribute("done", .bool),
], indexes: [Index("byName", on: ["name"])])])

private func checksumItem(_ id: Int64) -> Record {
    ["id": .int(id), "name": .string("item \(id) é"), "score": .double(Double(id) / 3),
     "payload": .bytes([0, 1, 2, UInt8(truncatingIfNeeded: id)]), "seen": .date(Timestamp(microsecondsSinceEpoch: 1_700_000_000 + id)),
     "tag": .uuid(UUID(uuidString: "5F1C8A52-0B5E-4E0C-9C51-" + String(format: "%012llX", id))!), "done": .bool(id % 2 == 0)]
}

/// Where each of `needles` lies in `haystack`: each must be found exactly once.
private func offsets(of needles: [[UInt8]], in haystack: [UInt8]) throws -> [Int] {
    try needles.map { needle in
        var found: [Int] = []
        var start = 0
        while let range = haystack[start...].firstRange(of: needle) {
            found.append(range.lowerBound)
            start = range.lowerBound + 1
        }
        try #require(found.count == 1, "a record is in the file \(found.count) times")
        return found[0]
    }
}

/// Every byte of every record of a small store flipped in turn, in the file: each flip is found
/// by `check` (naming the item) and refused by every read of the item (a point get, a fetch, a
/// visit), with no crash. The structure checks cannot see most of these: a changed byte inside a
/// string, a number or a uuid is still a well-formed field; only the record's checksum tells.
@Test func everyFlippedByteOfARecordIsFoundByCheckAndRefusedOnRead() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("store.lmdb")
    let ids: [Int64] = [1, 2, 3]
    do {
        let store = try LMDBStore(path: path, schema: checksumSchema)
        // One transaction: each record's page is written once, so the file holds no older copy.
        try store.writeSync { writer in for id in ids { try writer.insert(checksumItem(id), into: "Item") } }
        try store.close()
    }
    let entity = try #require(checksumSchema.entity(named: "Item"))
    let records = ids.map { LMDBRecordCoding.encode(checksumItem($0), entity) }
    let file = path + "/data.mdb"
    let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
    let starts = try offsets(of: records, in: original)
    #expect(try LMDBStore.check(path: path).items == 3)
    var flips = 0
    for (number, (record, start)) in zip(records, starts).enumerated() {
        let name = "Item[\(ids[number])]"
        for offset in start..<(start + record.count) {
            var damaged = original
            damaged[offset] ^= 0xFF
            try Data(damaged).write(to: URL(fileURLWithPath: file))
            flips += 1
            func isDamage(_ error: any Error) -> Bool {
                (error as? StoreError)?.code == .corrupt && "\(error)".contains(name)
            }
            #expect(performing: { try LMDBStore.check(path: path) }, throws: { error in
                isDamage(error) && "\(error)".contains("1 damaged record of 3")
            })
            let store = try LMDBStore(path: path, schema: nil, options: LMDBOptions(readOnly: true))
            #expect(performing: { try store.read { try $0.get("Item", key: .int(ids[number])) } }, throws: isDamage)
            #expect(performing: { try store.read { try $0.fetch(FetchRequest("Item")) } }, throws: isDamage)
            #expect(performing: { try store.read { try $0.forEach(FetchRequest("Item")) { _ in } } }, throws: isDamage)
            #expect(performing: { try store.read { try $0.visit(FetchRequest("Item")) { _ in } } }, throws: isDamage)
            // The other items still read.
            for other in ids where other != ids[number] {
                #expect(try store.read { try $0.get("Item", key: .int(other)) } == checksumItem(other))
            }
            try store.close()
        }
    }
    #expect(flips == records.map(\.count).reduce(0, +))
    // Two damaged records are both reported, in key order.
    var twice = original
    twice[starts[0] + 3] ^= 0x01
    twice[starts[2] + 5] ^= 0x01
    try Data(twice).write(to: URL(fileURLWithPath: file))
    #expect(performing: { try LMDBStore.check(path: path) }, throws: { error in
        let text = "\(error)"
        guard let first = text.range(of: "Item[1]"), let third = text.range(of: "Item[3]") else { return false }
        return text.contains("2 damaged records of 3") && first.lowerBound < third.lowerBound && !text.contains("Item[2]")
    })
}

/// A store written before records carried checksums (format 2, records of format 1) reads as it
/// did when opened read-only; a writable open seals every record in one transaction and raises
/// the format; `check` then refuses a record without a checksum.
@Test func aStoreOfUnsealedRecordsIsSealedByAWritableOpen() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("old.lmdb")
    let ids: [Int64] = Array(1...2_500)
    do {
        let store = try LMDBStore(path: path, schema: checksumSchema)
        try store.writeSync { writer in for id in ids { try writer.insert(checksumItem(id), into: "Item") } }
        try store.close()
    }
    // Made old: each record without its checksum and with format byte 1, the header at format 2.
    func unseal(_ path: String) throws {
        let store = try LMDBStore(path: path, schema: nil)
        let engine = store.lmdb
        let txn = try LMDBRawTransaction(environment: engine.environment, write: true)
        let dbi = try #require(engine.databases.entities["Item"])
        let storage = LMDBTransaction(txn: txn, databases: engine.databases)
        try storage.rewriteRecords(dbi) { _, value, buffer in
            buffer.append(LMDBRecordCoding.unsealedVersion)
            buffer.append(contentsOf: value.dropFirst().dropLast(LMDBRecordCoding.checksumSize))
        } visited: { _ in }
        try StoreHeader.write(checksumSchema, format: 2) { try txn.put(engine.databases.meta, Array($0.utf8), $1) }
        try txn.commit()
        try store.close()
    }
    try unseal(path)
    func storedFormats() throws -> [UInt8: Int] {
        let store = try LMDBStore(path: path, schema: nil, options: LMDBOptions(readOnly: true))
        defer { try? store.close() }
        let engine = store.lmdb
        let txn = try LMDBRawTransaction(environment: engine.environment, write: false)
        defer { txn.finish() }
        var formats: [UInt8: Int] = [:]
        try txn.forEach(try #require(engine.databases.entities["Item"]), from: nil) { _, value in
            formats[value.first ?? 0, default: 0] += 1
            return true
        }
        return formats
    }
    #expect(try storedFormats() == [1: ids.count])
    do {
        let store = try LMDBStore(path: path, schema: nil, options: LMDBOptions(readOnly: true))
        #expect(try store.read { try $0.fetch(FetchRequest("Item")) } == ids.map(checksumItem))
        try store.close()
    }
    #expect(try LMDBStore.check(path: path).items == ids.count)
    do {
        let store = try LMDBStore(path: path, schema: checksumSchema)
        #expect(try store.read { try $0.fetch(FetchRequest("Item", filter: Field("name") == "item 7 é")) }
            == [checksumItem(7)])
        try store.close()
    }
    #expect(try storedFormats() == [2: ids.count])
    #expect(try LMDBStore.check(path: path).items == ids.count)
    // One record put back unsealed in the sealed store: check names it.
    do {
        let store = try LMDBStore(path: path, schema: nil)
        let engine = store.lmdb
        let txn = try LMDBRawTransaction(environment: engine.environment, write: true)
        let entity = try #require(checksumSchema.entity(named: "Item"))
        let sealed = LMDBRecordCoding.encode(checksumItem(9), entity)
        try txn.put(try #require(engine.databases.entities["Item"]), [0x00] + (try KeyEncoding.encodeKey(.int(9))),
                    [LMDBRecordCoding.unsealedVersion] + sealed.dropFirst().dropLast(LMDBRecordCoding.checksumSize))
        try txn.commit()
        try store.close()
    }
    #expect(performing: { try LMDBStore.check(path: path) }, throws: { error in
        (error as? StoreError)?.code == .corrupt && "\(error)".contains("Item[9]") && "\(error)".contains("no checksum")
    })
}

/// The checksum is CRC-32C: the standard check value, and the CPU's instruction and the tables
/// (what a machine without SSE 4.2 computes) agreeing on every length up to 300 bytes at every
/// alignment, and on a sum continued over two parts.
@Test func theRecordChecksumIsCRC32CWithOrWithoutTheCPUsInstruction() {
    let check = Array("123456789".utf8)
    #expect(ds_crc32c(0, check, check.count) == 0xE306_9283)
    #expect(ds_crc32c_table(0, check, check.count) == 0xE306_9283)
    #expect(ds_crc32c(0, nil, 0) == 0)
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<320).map { _ in UInt8.random(in: 0...255, using: &generator) }
    bytes.withUnsafeBytes { raw in
        for start in 0..<8 {
            for count in 0...(raw.count - start - 8) {
                let part = UnsafeRawBufferPointer(rebasing: raw[start..<(start + count)])
                let hardware = ds_crc32c(0, part.baseAddress, count)
                #expect(hardware == ds_crc32c_table(0, part.baseAddress, count), "\(count) bytes at \(start)")
                let split = count / 3
                let continued = ds_crc32c(ds_crc32c(0, part.baseAddress, split), part.baseAddress.map { $0 + split },
                                          count - split)
                #expect(continued == hardware, "\(count) bytes at \(start), continued after \(split)")
            }
        }
    }
}

/// A row's fields summed from their descriptions (`ds_crc32c_fields`: tags and numbers from
/// registers, bytes where they are), with and without the CPU's instruction, equal the CRC-32C
/// of the same fields written as a compact record holds them (``FieldWriter``), on rows of every
/// kind of field, lengths whose LEB128 takes one to three bytes included, continued from a sum.
@Test func aRowsFieldsSumAsTheirCompactBytesDo() {
    var rng = SystemRandomNumberGenerator()
    let payload = (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &rng) }
    payload.withUnsafeBytes { raw in
        for _ in 0..<2_000 {
            var fields: [ds_crc32c_field] = []
            var written: [UInt8] = []
            for _ in 0..<Int.random(in: 0...12, using: &rng) {
                let start = Int.random(in: 0..<raw.count - 16_400, using: &rng)
                let tag: FieldTag
                var (form, bits, count) = (UInt64(0), UInt64(0), 0)
                switch Int.random(in: 0..<7, using: &rng) {
                case 0: tag = .null
                case 1: tag = Bool.random(using: &rng) ? .trueValue : .falseValue
                case 2: (tag, form, bits) = (.int, 1, UInt64.random(in: .min ... .max, using: &rng))
                case 3: (tag, form, bits) = (.double, 1, Double.random(in: -1e9...1e9, using: &rng).bitPattern)
                case 4: (tag, form, count) = (.uuid, 3, 16)
                default:
                    tag = Bool.random(using: &rng) ? .string : .bytes
                    form = 2
                    count = [0, 1, 7, 8, 127, 128, 300, 16_383, 16_384].randomElement(using: &rng)!
                    bits = UInt64(count)
                }
                let bytes = raw.baseAddress! + start
                fields.append(ds_crc32c_field(tag: UInt64(tag.rawValue), bits: bits, bytes: count > 0 ? bytes : nil, form: form))
                var field = [UInt8](repeating: 0, count: 11 + count)
                let size = field.withUnsafeMutableBytes { out -> Int in
                    let base = out.baseAddress!
                    switch form {
                    case 0: return FieldWriter.write(tag: tag, at: base)
                    case 1: return FieldWriter.write(tag, bits: bits, at: base)
                    default: return FieldWriter.write(tag, bytes: UnsafeRawBufferPointer(start: bytes, count: count), at: base)
                    }
                }
                written += field[..<size]
            }
            let from = UInt32.random(in: 0 ... .max, using: &rng)
            let expected = ds_crc32c_table(from, written, written.count)
            #expect(ds_crc32c_fields(from, fields, fields.count) == expected, "\(fields.count) fields")
            #expect(ds_crc32c_fields_table(from, fields, fields.count) == expected, "\(fields.count) fields, tables")
        }
    }
}

/// A damaged page size in the second meta page, which liblmdb would take from the newer meta and
/// map the file with, is refused by the open's meta check as damage, naming both sizes (the
/// damaged-store corpus found it failing later, growing the map to 0 bytes).
@Test func aSecondMetaPageNamingAnotherPageSizeIsDamage() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("store.lmdb")
    do {
        let store = try LMDBStore(path: path, schema: checksumSchema)
        try store.writeSync { writer in try writer.insert(checksumItem(1), into: "Item") }
        try store.close()
    }
    let file = path + "/data.mdb"
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
    let pageSize = Int(bytes[40]) | Int(bytes[41]) << 8
    bytes[pageSize + 41] ^= 0xFF
    try Data(bytes).write(to: URL(fileURLWithPath: file))
    for readOnly in [true, false] {
        #expect(performing: { try LMDBStore(path: path, schema: nil, options: LMDBOptions(readOnly: readOnly)) },
                throws: { error in
                    (error as? StoreError)?.code == .corrupt && "\(error)".contains("meta page 1 names a page size")
                })
    }
    #expect(performing: { try LMDBStore.check(path: path) }, throws: { ($0 as? StoreError)?.code == .corrupt })
}

@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import CLMDB
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import LMDBStore
import Synchronization
import Testing

let itemSchema = Schema(entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("score", .int, optional: true),
        Attribute("payload", .bytes, optional: true),
    ], indexes: [Index("byName", on: ["name"]), Index("byScore", on: ["score"], unique: true)]),
])

/// A store of `itemSchema` whose map starts at 64 KiB, so that it must grow; with
/// `mapCoversDisk` false it doubles each time and keeps every transaction's journal to the end.
func tinyMapStore(_ path: String, mapCoversDisk: Bool = true) throws -> LMDBStore {
    try LMDBStore(path: path, schema: itemSchema,
                  options: LMDBOptions(durability: .normal, initialMapSize: 64 << 10, mapCoversDisk: mapCoversDisk))
}

/// The journal files this process holds open for the store at `path` (unlinked at once, they
/// show only among the process's descriptors).
func openJournalFiles(of path: String) -> [String] {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return descriptors.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
        .filter { $0.hasPrefix(path + "/.journal-") }
}

/// A transaction's journal file is unlinked as soon as it is made: none is ever left behind.
func expectNoJournalFile(in path: String) throws {
    let leftovers = try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasPrefix(".journal") }
    #expect(leftovers.isEmpty, "the journal's file is unlinked: \(leftovers)")
}

@Test func theMapGrowsFromTinyToHundredsOfMegabytesWithoutAnError() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("grow.lmdb")
    let engine = try LMDBEngine(path: path, schema: itemSchema,
                                options: LMDBOptions(durability: .normal, initialMapSize: 64 << 10))
    let store = try Store(engine: engine)
    let initial = engine.mapSize
    let payload = [UInt8](repeating: 0xAB, count: 64 << 10)
    // 3,200 items of 64 KiB: about 200 MiB, in batches and in one large transaction.
    for batch in 0..<20 {
        try store.writeSync { w in
            for i in 0..<100 {
                let id = Int64(batch * 100 + i)
                try w.insert(["id": .int(id), "name": .string("n\(id % 7)"), "score": .int(id), "payload": .bytes(payload)],
                             into: "Item")
            }
        }
    }
    try store.writeSync { w in
        for id in Int64(2_000)..<3_200 {
            try w.insert(["id": .int(id), "name": "big", "score": .int(id), "payload": .bytes(payload)], into: "Item")
        }
    }
    #expect(initial <= 64 << 10)
    #expect(engine.mapSize >= 200 << 20, "map grew to \(engine.mapSize)")
    #expect(try store.read { try $0.count(FetchRequest("Item")) } == 3_200)
    #expect(try store.read { try $0.get("Item", key: 3_199)?["payload"] } == .bytes(payload))
    #expect(try store.read { try $0.count(FetchRequest("Item", filter: Field("name") == "big")) } == 1_200)
    try store.close()
    let reopened = try LMDBStore(path: path, schema: nil)
    #expect(try reopened.read { try $0.count(FetchRequest("Item")) } == 3_200)
    try reopened.close()
}

@Test func fiveHundredConcurrentReadTransactionsWork() throws {
    let dir = try TemporaryDirectory()
    let store = try LMDBStore(path: dir.path("readers.lmdb"), schema: itemSchema)
    try store.writeSync { w in
        for i in 0..<100 { try w.insert(["id": .int(Int64(i)), "name": "n"], into: "Item") }
    }
    let readers = 500
    let inside = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    let counts = Mutex<[Int]>([])
    for _ in 0..<readers {
        done.enter()
        let thread = Thread {
            defer { done.leave() }
            let n = try? store.read { r -> Int in
                inside.signal()
                release.wait()
                return try r.count(FetchRequest("Item"))
            }
            counts.withLock { $0.append(n ?? -1) }
        }
        thread.stackSize = 256 << 10
        thread.start()
    }
    for _ in 0..<readers { inside.wait() }
    // Every reader holds an open read transaction now, far past LMDB's default of 126 slots.
    try store.writeSync { try $0.insert(["id": 1000, "name": "during"], into: "Item") }
    for _ in 0..<readers { release.signal() }
    done.wait()
    #expect(counts.withLock { $0 }.count == readers)
    #expect(counts.withLock { $0 }.allSatisfy { $0 == 100 }, "every reader saw its snapshot")
    try store.close()
}

/// A read transaction that ends is reset and kept for the next read rather than freed
/// (`mdb_txn_reset`, then `mdb_txn_renew`: a transaction begun anew allocates and zeroes a table
/// of 2,048 databases). Read from LMDB's reader table (`mdb_stat -r`): reads one after another
/// use one slot, which pins no snapshot between them (txnid `-`); reads at once use a slot each,
/// of which 8 are kept once they end. (That the close frees them cannot be read there:
/// `mdb_env_close` clears the process's slots itself.)
@Test func endedReadTransactionsAreKeptResetAndBounded() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("reads.lmdb")
    let store = try LMDBStore(path: path, schema: itemSchema)
    try store.writeSync { w in
        for i in 0..<10 { try w.insert(["id": .int(Int64(i)), "name": "n"], into: "Item") }
    }
    /// This process's slots in the reader table, each with its snapshot's txnid (`-`: none).
    func slots() throws -> [String] {
        let pid = Substring("\(getpid())")
        var found: [String] = []
        // mdb_stat -r prints the table and exits 1 (LMDBCrashTests reads it the same way).
        for line in try runCommand("/usr/bin/mdb_stat", ["-r", path], allowingFailure: true).split(separator: "\n") {
            let columns = line.split(separator: " ")
            if columns.first == pid, let txnid = columns.last { found.append(String(txnid)) }
        }
        return found
    }
    for _ in 0..<100 { #expect(try store.read { try $0.count(FetchRequest("Item")) } == 10) }
    #expect(try slots() == ["-"], "100 reads in turn: one slot, no snapshot held")
    let readers = 20
    let inside = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    for _ in 0..<readers {
        done.enter()
        Thread.detachNewThread {
            defer { done.leave() }
            _ = try? store.read { r -> Int in
                inside.signal()
                release.wait()
                return try r.count(FetchRequest("Item"))
            }
        }
    }
    for _ in 0..<readers { inside.wait() }
    let during = try slots()
    #expect(during.count == readers && during.allSatisfy { $0 != "-" }, "20 reads at once: \(during)")
    for _ in 0..<readers { release.signal() }
    done.wait()
    #expect(try slots() == Array(repeating: "-", count: 8), "8 kept once they ended")
    // A write while they are kept: they pin no page, and the next read sees it.
    try store.writeSync { try $0.insert(["id": 99, "name": "after"], into: "Item") }
    #expect(try store.read { try $0.count(FetchRequest("Item")) } == 11)
    try store.close()
}

@Test func mdbStatAndMdbDumpReadTheEnvironment() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("tools.lmdb")
    let store = try LMDBStore(path: path, schema: itemSchema)
    try store.writeSync { w in
        for i in 0..<42 { try w.insert(["id": .int(Int64(i)), "name": "n", "score": .int(Int64(i))], into: "Item") }
    }
    try store.close()
    let stat = try runCommand("/usr/bin/mdb_stat", ["-a", path])
    for name in ["e.Item", "i.Item.byName", "i.Item.byScore", "_ds_meta"] {
        #expect(stat.contains("Status of \(name)"), "\(name) is listed")
    }
    let entries = stat.components(separatedBy: "Status of ").filter { $0.hasPrefix("e.Item") }.first ?? ""
    #expect(entries.contains("Entries: 42"), "\(entries)")
    let dump = try runCommand("/usr/bin/mdb_dump", ["-p", "-s", "_ds_meta", path])
    #expect(dump.contains("datastore.schema") && dump.contains("datastore.format"))
}

@Test func queriesOnIndexedAttributesUseTheIndex() throws {
    let dir = try TemporaryDirectory()
    let engine = try LMDBEngine(path: dir.path("plan.lmdb"), schema: itemSchema)
    #expect(engine.plannedIndex(FetchRequest("Item", filter: Field("name") == "x")) == "byName")
    #expect(engine.plannedIndex(FetchRequest("Item", filter: Field("score") > 3 && Field("score") < 9)) == "byScore")
    #expect(engine.plannedIndex(FetchRequest("Item", filter: Field("name").hasPrefix("ab"))) == "byName")
    #expect(engine.plannedIndex(FetchRequest("Item", filter: Field("score").among([1, 2]))) == "byScore")
    #expect(engine.plannedIndex(FetchRequest("Item", filter: Field("payload") == .bytes([1]))) == nil)
    #expect(engine.plannedIndex(FetchRequest("Item", filter: Field("name") != "x")) == nil)
    try engine.close()
}

@Test func badEnvironmentsGetClearErrors() throws {
    let dir = try TemporaryDirectory()
    func expectError(_ code: StoreError.Code, _ path: String, schema: Schema? = itemSchema, naming: String) {
        do {
            _ = try LMDBStore(path: path, schema: schema)
            Issue.record("\(path) opened")
        } catch let error as StoreError {
            #expect(error.code == code && error.message.contains(naming), "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }
    try Data([1, 2, 3]).write(to: URL(fileURLWithPath: dir.path("file")))
    expectError(.notAStore, dir.path("file"), naming: "is a file")

    try FileManager.default.createDirectory(atPath: dir.path("other"), withIntermediateDirectories: false)
    try Data([1]).write(to: URL(fileURLWithPath: dir.path("other/notes.txt")))
    expectError(.notAStore, dir.path("other"), naming: "not empty")

    try FileManager.default.createDirectory(atPath: dir.path("random"), withIntermediateDirectories: false)
    let noise = Data((0..<(64 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) })
    try noise.write(to: URL(fileURLWithPath: dir.path("random/data.mdb")))
    expectError(.notAStore, dir.path("random"), naming: "random")
    #expect(try Data(contentsOf: URL(fileURLWithPath: dir.path("random/data.mdb"))) == noise, "untouched")

    let truncated = dir.path("truncated")
    try LMDBStore(path: truncated, schema: itemSchema).close()
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: truncated + "/data.mdb"))
    try handle.truncate(atOffset: 100)
    try handle.close()
    expectError(.notAStore, truncated, schema: nil, naming: "truncated")

    expectError(.notFound, dir.path("missing/x.lmdb"), naming: "missing")
    expectError(.notFound, dir.path("absent.lmdb"), schema: nil, naming: "absent.lmdb")
    #expect(!FileManager.default.fileExists(atPath: dir.path("absent.lmdb")), "opening did not create it")

    let newer = dir.path("newer")
    let store = try LMDBStore(path: newer, schema: itemSchema)
    // The header a newer version would write: format 99, the schema sealed with that format.
    try store.writeSync { writer in
        try StoreHeader.write(itemSchema, format: 99) { try writer.setReservedMetadata($1, forKey: $0) }
    }
    try store.close()
    expectError(.incompatibleFormat, newer, schema: nil, naming: "99")
}

/// A store of format 1 wrote index keys as tuple + primary key, with no separator; opening it
/// rebuilds its indexes, after which range queries find values that are prefixes of the bound.
@Test func aFormatOneStoreHasItsIndexesRebuiltOnOpen() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("old.lmdb")
    let schema = Schema(entities: [EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string),
    ], indexes: [Index("byName", on: ["name"])])])
    let keys: [Int64] = [.max, .max - 1, 0, .min]
    do {
        let store = try LMDBStore(path: path, schema: schema)
        try store.writeSync { writer in for key in keys { try writer.insert(["id": .int(key), "name": "ab"], into: "Item") } }
        let engine = store.lmdb
        let txn = try LMDBRawTransaction(environment: engine.environment, write: true)
        let dbi = try #require(engine.databases.indexes["Item"]?["byName"])
        try txn.drop(dbi)
        for key in keys {
            let encoded = try KeyEncoding.encodeKey(.int(key))
            try txn.put(dbi, LMDBIndexKeys.tuple(["ab"]) + encoded, encoded)
        }
        try txn.put(engine.databases.meta, Array("datastore.format".utf8), Array("1".utf8))
        // The schema's JSON without its NUL byte and checksum, as format 1 wrote it.
        let schema = try #require(try txn.withValue(engine.databases.meta, Array("datastore.schema".utf8)) { Array($0) })
        try txn.put(engine.databases.meta, Array("datastore.schema".utf8), Array(schema.dropLast(5)))
        try txn.commit()
        try store.close()
    }
    let store = try LMDBStore(path: path, schema: nil)
    #expect(try store.read { try $0.count(FetchRequest("Item", filter: Field("name") <= "ab\u{0}")) } == 4)
    #expect(try store.read { try $0.count(FetchRequest("Item", filter: Field("name") == "ab")) } == 4)
    let format = try store.lmdb.withReader { try $0.metadata(forKey: "datastore.format") }
    #expect(format == Array(String(LMDBEngine.formatVersion).utf8))
    try store.close()
}

/// Deletes write fresh pages too: one transaction that deletes from every page of a store whose
/// map is nearly full must grow the map instead of failing with MDB_MAP_FULL.
@Test func deletingFromAFullMapGrowsIt() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("full.lmdb")
    let store = try LMDBStore(path: path, schema: itemSchema, options: LMDBOptions(initialMapSize: 64 << 10))
    // The fill level below was found with items only: the change feed's entries would take part
    // of the map and move the point where it is nearly full.
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    // 296 bytes: with the record's four-byte checksum, records of the size the fill level was
    // found with.
    let payload = Array(repeating: UInt8(7), count: 296)
    var next = 0
    for _ in 0..<40 {
        try store.writeSync { writer in
            for _ in 0..<50 {
                let item: Record = ["id": .int(Int64(next)), "name": .string("n\(next)"), "payload": .bytes(payload)]
                try writer.insert(item, into: "Item")
                next += 1
            }
        }
    }
    let before = store.mapSize
    let deleted = try store.writeSync { writer -> Int in
        var count = 0
        for id in stride(from: 0, to: next, by: 2) where try writer.delete("Item", key: .int(Int64(id))) { count += 1 }
        return count
    }
    #expect(deleted == next / 2)
    #expect(store.mapSize > before, "the delete transaction needed a larger map (map \(before) -> \(store.mapSize))")
    #expect(try store.read { try $0.count(FetchRequest("Item")) } == next / 2)
    try store.close()
}

/// LMDB counts in a meta's last page number pages that a transaction dirtied and freed without
/// writing them (loose pages, mdb.c), so a healthy file may end before that page: such a store
/// opens and checks clean, while a file cut before its reachable pages is `corrupt`.
@Test func aFileEndingBeforeItsLastCountedPageIsHealthyWhenEveryReachablePageIsInIt() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("loose.lmdb")
    let store = try LMDBStore(path: path, schema: itemSchema)
    try store.writeSync { writer in
        for i in 0..<500 { try writer.insert(["id": .int(Int64(i)), "name": .string("n\(i)")], into: "Item") }
    }
    try store.close()
    let file = URL(fileURLWithPath: path + "/data.mdb")
    var bytes = try Data(contentsOf: file)
    let pageSize = 4_096
    for meta in [0, pageSize] {
        let offset = meta + 136
        let lastPage = bytes[offset..<offset + 8].enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * $1.offset) }
        for i in 0..<8 { bytes[offset + i] = UInt8(truncatingIfNeeded: (lastPage + 3) >> (8 * i)) }
    }
    try bytes.write(to: file)
    let reopened = try LMDBStore(path: path, schema: nil, options: LMDBOptions(readOnly: true, checkPages: true))
    #expect(try reopened.read { try $0.count(FetchRequest("Item")) } == 500)
    try reopened.close()
    #expect(try LMDBStore.check(path: path).items == 500)

    try bytes.prefix(3 * pageSize).write(to: file)
    #expect {
        try LMDBStore(path: path, schema: nil, options: LMDBOptions(readOnly: true))
    } throws: { ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("truncated") }
}

/// Threads that read without a pause, their blocks overlapping, must not keep the map from
/// growing: the writer waits for the blocks open when it asks, not for every block begun after.
/// (With glibc's default reader-preferring lock this write took 21.8 s instead of 0.07 s.)
@Test func readersThatNeverPauseDoNotKeepTheMapFromGrowing() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("busy-readers.lmdb")
    let store = try tinyMapStore(path)
    defer { try? store.close() }
    let stop = Atomic<Bool>(false)
    let reads = Atomic<Int>(0)
    let readers = DispatchGroup()
    for _ in 0..<3 {
        readers.enter()
        Thread.detachNewThread {
            defer { readers.leave() }
            while !stop.load(ordering: .relaxed) {
                _ = try? store.read { r -> Int in
                    usleep(3_000)
                    return try r.count(FetchRequest("Item"))
                }
                reads.add(1, ordering: .relaxed)
            }
        }
    }
    defer {
        stop.store(true, ordering: .relaxed)
        readers.wait()
    }
    while reads.load(ordering: .relaxed) < 10 { usleep(1_000) }
    let started = Date()
    let payload = [UInt8](repeating: 0x5A, count: 16 << 10)
    try store.writeSync { w in
        for id in Int64(0)..<256 {
            try w.insert(["id": .int(id), "name": "n", "score": .int(id), "payload": .bytes(payload)], into: "Item")
        }
    }
    let seconds = Date().timeIntervalSince(started)
    #expect(store.mapSize >= 4 << 20, "the map grew to \(store.mapSize)")
    #expect(seconds < 5, "the write took \(seconds) s while readers ran")
    #expect(try store.read { try $0.count(FetchRequest("Item")) } == 256)
}

/// A transaction whose journal outgrows its 16 MiB in memory goes on in a file, and a map that
/// fills later replays it from there: inserts, deletes and saves over them, in order.
@Test func aJournalThatSpillsToItsFileReplaysEveryChangeInOrder() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("spill.lmdb")
    let store = try tinyMapStore(path, mapCoversDisk: false)
    defer { try? store.close() }
    let count: Int64 = 150_000
    try store.writeSync { w in
        for id in 0..<count {
            try w.insert(["id": .int(id), "name": .string("n\(id % 100)"), "score": .int(id)], into: "Item")
        }
        for id in stride(from: Int64(0), to: count, by: 7) { _ = try w.delete("Item", key: .int(id)) }
        for id in stride(from: Int64(3), to: count, by: 7) {
            try w.save(["id": .int(id), "name": "saved", "score": .int(-id)], into: "Item")
        }
        #expect(openJournalFiles(of: path).count == 1, "the journal spilled to its file")
        // Written last, after the journal spilled: these too must replay when the map grows.
        for id in count..<(count + 2_000) {
            try w.insert(["id": .int(id), "name": "tail", "score": .int(id), "payload": .bytes([UInt8](repeating: 7, count: 16_000))],
                         into: "Item")
        }
    }
    #expect(store.mapSize >= 64 << 20, "the map grew while the journal was in its file: \(store.mapSize)")
    let (total, saved, firstDeleted, tail) = try store.read { r in
        (try r.count(FetchRequest("Item")), try r.count(FetchRequest("Item", filter: Field("name") == "saved")),
         try r.get("Item", key: 7), try r.get("Item", key: .int(count + 1_999)))
    }
    let deleted = (count + 6) / 7
    #expect(total == Int(count - deleted + 2_000))
    #expect(saved == Int((count - 3 + 6) / 7))
    #expect(firstDeleted == nil)
    #expect(tail?["payload"] == .bytes([UInt8](repeating: 7, count: 16_000)))
    #expect(try store.read { try $0.get("Item", key: 3)?["score"] } == -3)
    try expectNoJournalFile(in: path)
}

/// A write whose changes pass 64 KiB grows the map at once to cover the file and the disk's
/// free space, then writes on without a journal: 30 MB of changes from a 64 KiB map leave no
/// journal file, and every change, those replayed in the grown map included, is stored. With
/// `mapCoversDisk` off, or when the disk cannot be measured, the same write keeps its journal
/// (it spills to its file) and the map only doubles.
/// So does a process that cannot map a map that large (`ulimit -v`; here the test says so).
@Test(arguments: ["covers", "off", "unmeasured", "unmappable"])
func aLargeWriteSizesTheMapToTheDiskAndKeepsNoJournal(mode: String) throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("covers.lmdb")
    let store = try tinyMapStore(path, mapCoversDisk: mode != "off")
    defer { try? store.close() }
    if mode == "unmeasured" { store.lmdb.environment.diskSpace = { nil } }
    if mode == "unmappable" { store.lmdb.environment.mapFits = { $0 <= 1 << 30 } }
    let payload = [UInt8](repeating: 0x3C, count: 10_000)
    let journals = try store.writeSync { w -> [String] in
        for id in Int64(0)..<3_000 {
            try w.insert(["id": .int(id), "name": .string("n\(id % 10)"), "score": .int(id), "payload": .bytes(payload)],
                         into: "Item")
        }
        _ = try w.delete("Item", key: 5)
        try w.save(["id": 7, "name": "saved", "score": -7], into: "Item")
        return openJournalFiles(of: path)
    }
    var system = statvfs()
    #expect(statvfs(path, &system) == 0)
    let free = Int(system.f_bfree) * Int(system.f_frsize)
    if mode == "covers" {
        #expect(journals.isEmpty, "no journal file once the map covers the disk: \(journals)")
        #expect(store.mapSize >= free, "the map (\(store.mapSize)) covers the disk's free space (\(free))")
    } else {
        #expect(journals.count == 1, "the journal spilled to its file: \(journals)")
        #expect(store.mapSize < 1 << 30, "the map only doubled: \(store.mapSize)")
    }
    let (total, first, saved, gone, last) = try store.read { r in
        (try r.count(FetchRequest("Item")), try r.get("Item", key: 0), try r.get("Item", key: 7),
         try r.get("Item", key: 5), try r.get("Item", key: 2_999))
    }
    #expect(total == 2_999)
    #expect(first?["payload"] == .bytes(payload))
    #expect(saved?["name"] == "saved" && [nil, .null].contains(saved?["payload"]))
    #expect(gone == nil)
    #expect(last?["payload"] == .bytes(payload))
    try expectNoJournalFile(in: path)
}

/// Writes 100 small items, then, with `limit` in force, `count` items of `payloadSize` bytes in
/// one write, which must fail with `storeFull` and a message holding each of `words`, storing
/// nothing and leaving the 100 items; with `lift` run, the same write must succeed.
func expectLargeWriteFailsAndKeepsTheStore(_ store: LMDBStore, count: Int64, payloadSize: Int, naming words: [String],
                                           limit: () -> Void, lift: () -> Void) throws {
    try store.writeSync { w in
        for id in Int64(0)..<100 { try w.insert(["id": .int(id), "name": "kept", "score": .int(id)], into: "Item") }
    }
    limit()
    let payload = [UInt8](repeating: 0x11, count: payloadSize)
    func writeLarge() throws {
        try store.writeSync { w in
            for id in Int64(1_000)..<(1_000 + count) {
                try w.insert(["id": .int(id), "name": "big", "score": .int(id), "payload": .bytes(payload)], into: "Item")
            }
        }
    }
    do {
        try writeLarge()
        Issue.record("\(count) items of \(payloadSize) bytes written past the limit")
    } catch let error as StoreError {
        #expect(error.code == .storeFull, "\(error)")
        #expect(words.allSatisfy(error.message.contains), "\(error)")
    }
    #expect(try store.read { try $0.count(FetchRequest("Item")) } == 100)
    #expect(try store.read { try $0.count(FetchRequest("Item", filter: Field("name") == "big")) } == 0)
    #expect(try store.read { try $0.get("Item", key: 99)?["name"] } == "kept")
    lift()
    try writeLarge()
    #expect(try store.read { try $0.count(FetchRequest("Item")) } == 100 + Int(count))
}

/// Should the map fill after a transaction gave up its journal (the disk had more room than
/// it said when the map was sized), the write fails with `storeFull` naming the map, nothing of
/// it is stored, the store keeps what it held, and the next write sizes the map again.
@Test func aMapThatFillsAfterTheJournalWasGivenUpFailsTheWriteAndKeepsTheStore() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("filled.lmdb")
    let store = try tinyMapStore(path)
    defer { try? store.close() }
    let measure = store.lmdb.environment.diskSpace
    // 100 MB; a disk that says it is full gets a map of the file and 64 MiB.
    try expectLargeWriteFailsAndKeepsTheStore(store, count: 1_600, payloadSize: 64 << 10,
                                              naming: ["map", "nothing of it was written"], limit: {
        store.lmdb.environment.diskSpace = { measure().map { DiskSpace(fileSize: $0.fileSize, free: 0) } }
    }, lift: {
        #expect(store.mapSize < 256 << 20, "the map was sized to the disk that said it was full: \(store.mapSize)")
        store.lmdb.environment.diskSpace = measure
    })
    try expectNoJournalFile(in: path)
}

/// A map the process cannot map is refused before liblmdb sees it: liblmdb unmaps the old map
/// first and, when the new mapping fails, is left with none (valgrind, whose address space is
/// smaller than the disk, found it). The write fails with `storeFull` naming the map, nothing of
/// it is stored, and the store goes on working in its old map.
@Test func aMapTooLargeToMapFailsTheWriteAndKeepsTheStoreWorking() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("unmappable.lmdb")
    let store = try tinyMapStore(path, mapCoversDisk: false)
    defer { try? store.close() }
    // 10 MB in a process that says it can map 4 MiB.
    try expectLargeWriteFailsAndKeepsTheStore(store, count: 1_000, payloadSize: 10_000,
                                              naming: ["cannot grow the map", "address space"], limit: {
        store.lmdb.environment.mapFits = { $0 <= 4 << 20 }
    }, lift: {
        #expect(store.mapSize <= 4 << 20)
        store.lmdb.environment.mapFits = LMDBEnvironment.canMap
    })
}

/// Changes bigger than the journal's buffers: a 12 MiB record kept in memory, a second that makes
/// the journal spill and is written through to its file past the 1 MiB buffer, small changes
/// around them, and a delete; the map grows from 64 KiB many times, each time replaying them all.
@Test func changesBiggerThanTheJournalsBuffersReplayWhole() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("big.lmdb")
    let store = try tinyMapStore(path, mapCoversDisk: false)
    defer { try? store.close() }
    // Byte i is (i * 31) ^ seed, which repeats every 256 bytes: made from one period at a time,
    // since a closure per byte of 12 MB, unoptimized, took the test 12 s.
    func payload(_ seed: UInt8, _ count: Int) -> [UInt8] {
        let period = (0..<256).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count { bytes.append(contentsOf: period.prefix(count - bytes.count)) }
        return bytes
    }
    try store.writeSync { w in
        for id in Int64(0)..<100 { try w.insert(["id": .int(id), "name": "small", "score": .int(id)], into: "Item") }
        try w.insert(["id": 1_000, "name": "big", "score": 1_000, "payload": .bytes(payload(1, 12 << 20))], into: "Item")
        try w.insert(["id": 1_001, "name": "bigger", "score": 1_001, "payload": .bytes(payload(2, 12 << 20))], into: "Item")
        // 20 MB more, so that the map grows again after the change written through.
        for id in Int64(2_000)..<4_000 {
            try w.insert(["id": .int(id), "name": "after", "score": .int(id), "payload": .bytes(payload(3, 10_000))],
                         into: "Item")
        }
        _ = try w.delete("Item", key: 50)
        try w.save(["id": 1_000, "name": "big, saved", "score": 1_000, "payload": .bytes(payload(4, 2 << 20))], into: "Item")
    }
    #expect(store.mapSize >= 64 << 20, "the map grew past both big records and more: \(store.mapSize)")
    let (total, after, gone, big, bigger, last) = try store.read { r in
        (try r.count(FetchRequest("Item")), try r.count(FetchRequest("Item", filter: Field("name") == "after")),
         try r.get("Item", key: 50), try r.get("Item", key: 1_000), try r.get("Item", key: 1_001),
         try r.get("Item", key: 3_999))
    }
    #expect(total == 100 - 1 + 2 + 2_000)
    #expect(after == 2_000)
    #expect(gone == nil)
    #expect(big?["payload"] == .bytes(payload(4, 2 << 20)))
    #expect(big?["name"] == "big, saved")
    #expect(bigger?["payload"] == .bytes(payload(2, 12 << 20)))
    #expect(last?["payload"] == .bytes(payload(3, 10_000)))
    try expectNoJournalFile(in: path)
}

/// The schema of ``storeWithADamagedItem(_:_:)``.
private let damagedItemSchema = Schema(entities: [EntitySchema("Item", primaryKey: "id", attributes: [
    Attribute("id", .int), Attribute("name", .string), Attribute("score", .int),
])])

/// Records of `damagedItemSchema` damaged in the ways a decode must find, each with the words
/// its error names: a format byte, then per attribute a tag (3 int, 5 string, 6 bytes) and its
/// payload, then a checksum that matches (the damage a writer's bug would leave, which only the
/// fields' checks can see).
private let damagedItems: [(String, [UInt8])] = {
    func fixed(_ value: Int64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: value) >> (8 * $0)) } }
    func sealed(_ fields: [UInt8]) -> [UInt8] {
        var record = [LMDBRecordCoding.version] + fields
        LMDBRecordCoding.seal(&record, from: 0)
        return record
    }
    return [
        ("not valid UTF-8", sealed([3] + fixed(2) + [5, 2, 0xC3, 0x28, 3] + fixed(5))),
        ("holds bytes, not string", sealed([3] + fixed(2) + [6, 1, 0x41, 3] + fixed(5))),
        ("truncated name", sealed([3] + fixed(2) + [5, 9, 0x41])),
        ("is null, but it is required", sealed([3] + fixed(2) + [0, 3] + fixed(5))),
        ("trailing bytes", sealed([3] + fixed(2) + [5, 1, 0x41, 3] + fixed(5) + [0])),
        ("checksum does not match", [2, 3] + fixed(2) + [5, 1, 0x41, 3] + fixed(5) + [0, 0, 0, 0]),
    ]
}()

/// Whether `error` is `corrupt`, naming item 2 and the damage `why`.
private func isDamageOfItem2(_ error: any Error, _ why: String) -> Bool {
    (error as? StoreError)?.code == .corrupt && "\(error)".contains(why) && "\(error)".contains("Item[2]")
}

/// A store of items 1, 2 and 3 of `damagedItemSchema` whose item 2's record is `bytes`, written
/// under the store.
private func storeWithADamagedItem(_ path: String, _ bytes: [UInt8]) throws -> LMDBStore {
    let store = try LMDBStore(path: path, schema: damagedItemSchema)
    try store.writeSync { writer in
        for id in 1...3 { try writer.insert(["id": .int(Int64(id)), "name": "n", "score": .int(Int64(id))], into: "Item") }
    }
    let engine = store.lmdb
    let txn = try LMDBRawTransaction(environment: engine.environment, write: true)
    try txn.put(try #require(engine.databases.entities["Item"]), [0x00] + (try KeyEncoding.encodeKey(.int(2))), bytes)
    try txn.commit()
    return store
}

/// A filtered fetch, count or visit decodes first only the attributes its filter reads; the others
/// must still be checked as a full decode checks them, so that a damaged record is `corrupt`
/// whether or not the filter reads the damaged attribute (and whether or not it matches).
@Test func aFilterThatReadsOneAttributeStillFindsDamageInTheOthers() throws {
    let dir = try TemporaryDirectory()
    for (index, (why, bytes)) in damagedItems.enumerated() {
        let store = try storeWithADamagedItem(dir.path("store-\(index).lmdb"), bytes)
        func isDamage(_ error: any Error) -> Bool { isDamageOfItem2(error, why) }
        // Pages over the damaged record fail naming it, a page scanned into (its first record
        // refilled, the next read new) left empty rather than half refilled.
        #expect(performing: { try store.read { try $0.scan("Item", limit: 10) } }, throws: isDamage)
        var page: [Record] = []
        try store.read { try $0.scan("Item", limit: 1, into: &page) }
        #expect(page.count == 1)
        #expect(performing: { try store.read { try $0.scan("Item", limit: 10, into: &page) } }, throws: isDamage)
        #expect(page.isEmpty)
        // A fetch of every item decodes each into the answer on its own path; with an offset
        // past the damaged item, or sorted, it still reads it.
        for request in [FetchRequest("Item"), FetchRequest("Item", offset: 2), FetchRequest("Item", limit: 2),
                        FetchRequest("Item", sort: [SortKey("name")])] {
            #expect(performing: { try store.read { try $0.fetch(request) } }, throws: isDamage)
        }
        for filter in [Field("score") == 5, Field("score") == 1, Field("name") == "n"] {
            #expect(performing: { try store.read { try $0.fetch(FetchRequest("Item", filter: filter)) } }, throws: isDamage)
            #expect(performing: { try store.read { try $0.count(FetchRequest("Item", filter: filter)) } }, throws: isDamage)
            #expect(performing: { try store.read { try $0.forEach(FetchRequest("Item", filter: filter)) { _ in } } },
                    throws: isDamage)
        }
        try store.close()
    }
}

/// A visit checks each row whole before it hands it over, so a damaged record is `corrupt`,
/// naming it, however much of it the visitor reads, in whatever order, when it is the last row
/// the visit reads, and when an offset skips it; only the rows before it are handed over.
@Test func aVisitFindsDamageInTheFieldsItReadsAndInThoseItDoesNot() throws {
    let dir = try TemporaryDirectory()
    for (index, (why, bytes)) in damagedItems.enumerated() {
        let store = try storeWithADamagedItem(dir.path("visit-\(index).lmdb"), bytes)
        func isDamage(_ error: any Error) -> Bool { isDamageOfItem2(error, why) }
        let visitors: [(String, (borrowing Row) throws -> Int64)] = [
            ("nothing read", { _ in 0 }),
            ("in order", { row in
                try row.int("id") + Int64(try row.string("name").count) + (try row.int("score"))
            }),
            ("in reverse", { row in
                try row.int("score") + Int64(try row.withUTF8("name") { $0.count }) + (try row.int("id"))
            }),
            ("the first only", { row in try row.int("id") }),
            ("values", { row in try row.value("name") == "n" ? 1 : 0 }),
            ("a record", { row in row.record()["id"] == .int(1) ? 1 : 0 }),
        ]
        for (what, visitor) in visitors {
            for request in [FetchRequest("Item"), FetchRequest("Item", limit: 2)] {
                var handedOver = 0
                #expect("\(why), \(what), limit \(String(describing: request.limit))", performing: {
                    try store.read { r in
                        try r.visit(request) { row in
                            handedOver += 1
                            _ = try visitor(row)
                        }
                    }
                }, throws: isDamage)
                #expect(handedOver == 1, "\(why), \(what): \(handedOver) rows handed over")
            }
        }
        #expect(performing: { try store.read { try $0.visit(FetchRequest("Item", offset: 2)) { _ in } } },
                throws: isDamage)
        // In a sound row, a read of another type, and of a name the entity does not have, say so.
        func code(_ read: (borrowing Row) throws -> Void) -> StoreError.Code? {
            do {
                try store.read { try $0.visit(FetchRequest("Item", limit: 1), read) }
            } catch {
                return (error as? StoreError)?.code
            }
            return nil
        }
        #expect(code { _ = try $0.string("id") } == .typeMismatch)
        #expect(code { _ = try $0.int("weight") } == .unknownAttribute)
        try store.close()
    }
}

/// Every kind of value, null and not, short and long (a text or bytes of 128 bytes and more has
/// a length of two bytes), read by a visit's typed reads in the schema's order, in another
/// order, twice, and some not at all, is what a fetch returns.
@Test func aVisitReadsEveryKindOfFieldAsAFetchDoes() throws {
    let dir = try TemporaryDirectory()
    let schema = Schema(entities: [EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("score", .double, optional: true),
        Attribute("payload", .bytes, optional: true), Attribute("seen", .date, optional: true),
        Attribute("tag", .uuid, optional: true), Attribute("done", .bool),
        Attribute("note", .string, optional: true),
    ])])
    let texts = ["", "a", "é", "日本語のテキスト", String(repeating: "x", count: 127),
                 String(repeating: "y", count: 128),
                 String(repeating: "ü", count: 300), "nul\u{0}inside"]
    let store = try LMDBStore(path: dir.path("kinds.lmdb"), schema: schema)
    var records: [Record] = []
    for id in 0..<64 {
        let text = texts[id % texts.count]
        let record: Record = [
            "id": .int(Int64(id) - 32), "name": .string(text),
            "score": id % 3 == 0 ? .null
                : .double([0, -0.0, 1.5, -.infinity, .greatestFiniteMagnitude][id % 5]),
            "payload": id % 4 == 0 ? .null
                : .bytes(Array(repeating: UInt8(id), count: [0, 1, 127, 128, 1000][id % 5])),
            "seen": id % 5 == 0 ? .null
                : .date(Timestamp(microsecondsSinceEpoch: Int64(id) * 1_000_003 - 9_000_000)),
            "tag": id % 2 == 0 ? .null
                : .uuid(UUID(uuidString: "5F1C8A52-0B5E-4E0C-9C51-" + String(format: "%012X", id))!),
            "done": .bool(id % 3 == 1),
            "note": id % 6 == 0 ? .null : .string(texts[(id + 3) % texts.count]),
        ]
        records.append(record)
    }
    try store.writeSync { w in for record in records { try w.insert(record, into: "Item") } }
    let fetched = try store.read { try $0.fetch(FetchRequest("Item")) }
    // The fetch returns what was inserted (in key order, the order the ids were inserted in), so
    // that the visit is compared with the values stored, not only with another read of them.
    #expect(fetched.count == records.count)
    for (stored, inserted) in zip(fetched, records) {
        for attribute in schema.entities[0].attributes {
            #expect(stored[attribute.name] == inserted[attribute.name],
                    "\(attribute.name) of \(inserted["id"])")
        }
    }
    // The typed read first (the one decoded in place), a null told by the error it throws.
    func value(_ row: borrowing Row, _ name: String, _ type: ValueType) throws -> Value {
        do throws(StoreError) {
            switch type {
            case .int: return .int(try row.int(name))
            case .double: return .double(try row.double(name))
            case .string: return .string(try row.string(name))
            case .bytes: return .bytes(try row.bytes(name))
            case .date: return .date(try row.date(name))
            case .uuid: return .uuid(try row.uuid(name))
            case .bool: return .bool(try row.bool(name))
            }
        } catch {
            guard error.code == .typeMismatch, error.message.contains("is null"), try row.isNull(name) else {
                throw error
            }
            return .null
        }
    }
    let attributes = schema.entities[0].attributes
    let orders: [[Int]] = [Array(attributes.indices), Array(attributes.indices.reversed()),
                           [0, 1, 1, 2, 7, 3], [2, 0]]
    for order in orders {
        // Each read, in the order made (a name read twice is compared twice).
        var rows: [[(String, Value)]] = []
        try store.read { r in
            try r.visit(FetchRequest("Item")) { row in
                var reads: [(String, Value)] = []
                for slot in order {
                    let attribute = attributes[slot]
                    reads.append((attribute.name, try value(row, attribute.name, attribute.type)))
                }
                rows.append(reads)
            }
        }
        #expect(rows.count == fetched.count)
        for (reads, record) in zip(rows, fetched) {
            #expect(reads.count == order.count)
            for (name, read) in reads {
                #expect(read == record[name], "\(order): \(name) of \(record["id"])")
            }
        }
    }
    // The in-place reads, and a null read by its type, which names what the attribute holds.
    try store.read { r in
        var index = 0
        try r.visit(FetchRequest("Item")) { row in
            let record = fetched[index]
            index += 1
            guard case .string(let name) = record["name"] else {
                Issue.record("item \(index) has no name")
                return
            }
            let inPlace = try row.withUTF8("name") { Array($0) }
            #expect(inPlace == Array(name.utf8))
            if record["score"] == .null {
                var refused = false
                do throws(StoreError) {
                    _ = try row.double("score")
                } catch {
                    refused = error.code == .typeMismatch && error.message.contains("is null")
                }
                #expect(refused, "item \(index): a null read as a double")
            }
        }
    }
    try store.close()
}

/// A schema step that adds or removes attributes, or changes one's type, rewrites every LMDB
/// record by copying its stored fields, each checked first as a decode checks it, and a new index
/// is filled from the stored records checked the same way: a damaged record fails the migration
/// naming it, even when the damaged attribute is the one removed, not the one converted or not
/// indexed, and the store stays at its old version with every item as it was.
@Test func aSchemaRewriteOverADamagedRecordFailsNamingItAndChangesNothing() throws {
    let dir = try TemporaryDirectory()
    let steps: [SchemaStep] = [
        .addAttribute(entity: "Item", attribute: Attribute("note", .string, optional: true)),
        .addAttribute(entity: "Item", attribute: Attribute("rank", .int, default: .int(3))),
        .removeAttribute(entity: "Item", name: "name"),
        .changeType(entity: "Item", attribute: "score", to: .double),
        .addIndex(entity: "Item", index: Index("byScore", on: ["score"])),
    ]
    for (index, (why, bytes)) in damagedItems.enumerated() {
        for (number, step) in steps.enumerated() {
            let path = dir.path("store-\(index)-\(number).lmdb")
            try storeWithADamagedItem(path, bytes).close()
            var upgrades = SchemaUpgrades()
            upgrades.version(2, step)
            let next = try SchemaPlan([.init(2, [step])]).target(from: damagedItemSchema)
            #expect(performing: { try LMDBStore(path: path, schema: next, upgrades: upgrades) }, throws: { error in
                (error as? StoreError)?.code == .corrupt && "\(error)".contains(why) && "\(error)".contains("Item[2]")
            })
            let store = try LMDBStore(path: path, schema: damagedItemSchema)
            #expect(store.schema.version == damagedItemSchema.version)
            #expect(try store.read { try $0.count(FetchRequest("Item")) } == 3)
            for id in [1, 3] {
                #expect(try store.read { try $0.get("Item", key: .int(Int64(id))) }
                    == ["id": .int(Int64(id)), "name": "n", "score": .int(Int64(id))])
            }
            try store.close()
        }
    }
    // A value the conversion refuses fails naming the item and attribute, as the path that builds
    // records names them (an indexed attribute's change takes that path).
    let path = dir.path("unconvertible.lmdb")
    let store = try LMDBStore(path: path, schema: damagedItemSchema)
    try store.writeSync { writer in try writer.insert(["id": 1, "name": "n", "score": 1], into: "Item") }
    try store.close()
    var upgrades = SchemaUpgrades()
    let step = SchemaStep.changeType(entity: "Item", attribute: "name", to: .int)
    upgrades.version(2, step)
    let next = try SchemaPlan([.init(2, [step])]).target(from: damagedItemSchema)
    #expect(performing: { try LMDBStore(path: path, schema: next, upgrades: upgrades) }, throws: { error in
        (error as? StoreError)?.code == .invalidValue && "\(error)".contains("Item[1].name holds")
            && "\(error)".contains("does not convert to int")
    })
}

/// A read transaction two commits old has no meta page left (LMDB keeps two, and each commit
/// writes the older), though its pages are intact while it is open: the page check says so
/// rather than calling the file damaged, and the check of a store that a writer of its own
/// commits to as fast as it can (as another process's would) takes a newer snapshot and passes.
@Test func aSnapshotWhoseMetaPageAWriterReusedIsNotDamage() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("moving.lmdb")
    let engine = try LMDBEngine(path: path, schema: itemSchema, options: LMDBOptions(durability: .normal))
    defer { try? engine.close() }
    @Sendable func commit(_ n: UInt8) throws {
        let writer = try LMDBRawTransaction(environment: engine.environment, write: true, journaled: false)
        let dbi = try #require(try writer.openDatabase("scratch", create: true))
        try writer.put(dbi, [n], [n])
        try writer.commit()
    }
    try commit(0)
    let check = try LMDBPageCheck(path: path)
    defer { check.close() }
    let reader = try LMDBRawTransaction(environment: engine.environment, write: false)
    let snapshot = UInt64(mdb_txn_id(reader.txn))
    #expect(try check.walk(txnid: snapshot) != nil, "the snapshot's meta page is the newest")
    try commit(1)
    #expect(try check.walk(txnid: snapshot) != nil, "one commit later, the other meta page still holds it")
    try commit(2)
    #expect(try check.walk(txnid: snapshot) == nil, "two commits later, no meta page holds it")
    reader.finish()

    // A writer that never stops, and checks of the store under it.
    let stop = Atomic<Bool>(false)
    let writer = Thread {
        var n: UInt8 = 3
        while !stop.load(ordering: .relaxed) {
            try? commit(n)
            n &+= 1
        }
    }
    writer.start()
    defer { stop.store(true, ordering: .relaxed) }
    for _ in 0..<200 {
        #expect(try LMDBEngine.walk(engine.environment).pages > 0)
    }
    stop.store(true, ordering: .relaxed)
    while !writer.isFinished { usleep(1_000) }
}

/// A free-page list whose page count is past what a signed integer holds (a damaged store the
/// corpus test made) is damage the check names, not a trap on converting the count.
@Test func aFreePageListWithAHugeCountIsNamedAsDamage() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("freed.lmdb")
    let store = try LMDBStore(path: path, schema: itemSchema, options: LMDBOptions(durability: .normal))
    try store.writeSync { writer in
        for id in 0..<200 { try writer.insert(["id": .int(Int64(id)), "name": .string("item \(id)")], into: "Item") }
    }
    try store.writeSync { writer in
        for id in 0..<200 { _ = try writer.delete("Item", key: .int(Int64(id))) }
    }
    try store.writeSync { writer in try writer.insert(["id": 1, "name": "again"], into: "Item") }
    try store.close()

    let file = URL(fileURLWithPath: path + "/data.mdb")
    var bytes = [UInt8](try Data(contentsOf: file))
    func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
    func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
    let pageSize = Int(UInt32(truncatingIfNeeded: u64(40)))
    // The newer meta page (by transaction id, at 144) names the free list's root at 80.
    let meta = u64(144) >= u64(pageSize + 144) ? 0 : pageSize
    let root = Int(u64(meta + 80))
    try #require(root != Int(UInt32.max) && root >= 2, "the deletes left a free-page list")
    let page = root * pageSize
    try #require(u16(page + 10) & 0x02 != 0, "the free list's root is a leaf")
    let node = page + u16(page + 16)
    let dataStart = node + 8 + u16(node + 6)
    for i in 0..<8 { bytes[dataStart + i] = UInt8(truncatingIfNeeded: 0xE467_7214_C39F_4C03 as UInt64 >> (8 * i)) }
    try Data(bytes).write(to: file)

    do {
        _ = try LMDBStore(path: path, schema: itemSchema, options: LMDBOptions(checkPages: true))
        Issue.record("a store with a damaged free-page list passed its page check")
    } catch let error as StoreError {
        #expect(error.code == .corrupt && error.message.contains("free-page list"), "\(error)")
    }
}

/// A feed entry under the largest number a key can hold (a damaged or edited store; it sorts
/// where entries sort, so the page check passes it): the next recorded write fails naming the
/// damage, not a trap on numbering the entry after it, and the items stay as they were.
@Test func aFeedEntryNumberedPastTheLargestIsDamageNotACrash() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("numbers.lmdb")
    var store = try LMDBStore(path: path, schema: itemSchema)
    try store.writeSync { try $0.insert(["id": 1, "name": "before"], into: "Item") }
    try store.close()
    let engine = try LMDBEngine(path: path, schema: itemSchema, options: LMDBOptions(durability: .normal))
    let writer = try LMDBRawTransaction(environment: engine.environment, write: true, journaled: false)
    let meta = try #require(try writer.openDatabase("_ds_meta", create: false))
    try writer.put(meta, ChangeLog.entryKeyBytes(UInt64.max), [0])
    try writer.commit()
    try engine.close()

    store = try LMDBStore(path: path, schema: itemSchema)
    defer { try? store.close() }
    #expect(performing: { try store.writeSync { try $0.insert(["id": 2, "name": "after"], into: "Item") } },
            throws: { ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("largest number") })
    #expect(try store.read { try $0.fetch(FetchRequest("Item")).count } == 1)
}

/// A main database whose branch-page count is past what adds up with its leaf pages (both meta
/// pages overwritten): the page check names the counts, not a trap on adding them for its message.
@Test func countsThatCannotBeAddedAreNamedAsDamage() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("counts.lmdb")
    let store = try LMDBStore(path: path, schema: itemSchema)
    try store.writeSync { try $0.insert(["id": 1, "name": "one"], into: "Item") }
    try store.close()
    let file = URL(fileURLWithPath: path + "/data.mdb")
    var bytes = [UInt8](try Data(contentsOf: file))
    let pageSize = Int(bytes[40]) | Int(bytes[41]) << 8 | Int(bytes[42]) << 16
    // The main database's record starts at byte 88 of a meta page; its branch pages at 96.
    for meta in [0, pageSize] { for i in 0..<8 { bytes[meta + 96 + i] = 0xFF } }
    try Data(bytes).write(to: file)
    do {
        _ = try LMDBStore(path: path, schema: itemSchema, options: LMDBOptions(checkPages: true))
        Issue.record("a store with damaged page counts passed its page check")
    } catch let error as StoreError {
        #expect(error.code == .corrupt && error.message.contains("18446744073709551615 branch"), "\(error)")
    }
}

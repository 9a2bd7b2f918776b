// crash-writer: a test tool. Opens a store and commits numbered transactions until killed,
// printing each number once its writeSync has returned (acknowledged). It continues from the
// counter an earlier run left. Each transaction
// inserts ten items and moves a counter, so a partial commit would be visible.
//
//     crash-writer sqlite|lmdb|postgres PATH COUNT [with-reader]   (postgres with the trait Postgres; PATH is
//                                                 its URL; with-reader: a thread of the same process reads
//                                                 all along, each read block lasting about a millisecond)
//     crash-writer sqlite|lmdb PATH hold-read    (prints "reading" inside a read block, then waits to be killed)
//     crash-writer sqlite|lmdb PATH grow MB      (commits 1 MB transactions until MB megabytes are written;
//                                                 LMDB starts from a 64 KiB map; prints the final map size)
//     crash-writer sqlite|lmdb PATH read-loop    (reads until PATH.stop exists, checking in every snapshot that
//                                                 the items equal the counter; prints "reads N failures F")
//     crash-writer sqlite|lmdb PATH seed-v1 N    (creates a store of `UpgradeFixture.v1` with N entries)
//     crash-writer sqlite|lmdb PATH upgrade      (opens it with `UpgradeFixture.v2` and its upgrades, printing
//                                                 "progress ITEMS" as the migration goes and "done" at the end)
//     crash-writer sqlite|lmdb PATH feed-write N [PAUSE_MS] / feed-observe N   (the cross-process feed tests;
//                                                 see FeedFixture)
//     crash-writer sqlite|lmdb|memory|postgres PATH async-probe / saturate [blocking]   (see AsyncProbe)
//     crash-writer postgres URL error-code open|write   (error codes in the environment's language; see
//                                                 ErrorCodeProbe)
//     crash-writer postgres URL concurrent-writers SECONDS SEED STORES THREADS   (the concurrent writers'
//                                                 correctness test; see ConcurrencyFixture)
//     crash-writer postgres URL increment NAME COUNT   (COUNT read-modify-write increments of the counter
//                                                 NAME, each its own writeSync; prints "incremented COUNT")
//     crash-writer switch OLD NEW SEED [die-at STEP] …   (an app switching backends; see SwitchFixture)
//     crash-writer switch-bench OLD NEW ITEMS [gap MS]     (what a switch costs its app; see SwitchBench)
//
// Every transaction moves the counter "items" to the number of entries, in the same transaction.
import DataStoreAPI
import Foundation
import LMDBStore
import SQLiteStore
#if Postgres
import PostgresStore
#endif

let schema = Schema(entities: [
    EntitySchema("Entry", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("batch", .int), Attribute("text", .string),
    ], indexes: [Index("byBatch", on: ["batch"])]),
    EntitySchema("Counter", primaryKey: "name", attributes: [Attribute("name", .string), Attribute("value", .int)]),
])

let arguments = CommandLine.arguments

// The tests start this tool as a child of their process: it goes when that process goes (killed
// or crashed), rather than run on (a read loop left by a stopped test run kept a core busy for
// half an hour, under a benchmark). Watched from a thread of its own; Linux's PR_SET_PDEATHSIG
// is set through prctl, which Swift cannot call (the function is variadic).
let parent = getppid()
Thread.detachNewThread {
    while getppid() == parent { usleep(100_000) }
    _exit(3)  // As a kill would end it: no exit handlers, no flush racing the main thread's.
}

if arguments.count >= 2, arguments[1] == "switch" {
    exit(SwitchFixture.main(arguments))
}
if arguments.count >= 2, arguments[1] == "switch-bench" {
    exit(SwitchBench.main(arguments))
}
if arguments.count >= 4, arguments[3] == "seed-v1" || arguments[3] == "upgrade" {
    exit(UpgradeFixture.main(arguments))
}
if arguments.count >= 4, arguments[3] == "async-probe" || arguments[3] == "saturate" {
    exit(AsyncProbe.main(arguments))
}
if arguments.count >= 5, arguments[3] == "error-code" {
    exit(ErrorCodeProbe.main(arguments))
}
if arguments.count >= 4, arguments[3] == "concurrent-writers" {
    exit(ConcurrencyFixture.main(arguments))
}
#if Postgres
if arguments.count == 6, arguments[3] == "increment", let times = Int(arguments[5]) {
    do {
        let store = try PostgresStore(url: arguments[2], schema: schema, durability: .normal)
        defer { try? store.close() }
        let name = arguments[4]
        for _ in 0..<times {
            try store.writeSync { w in
                guard case .int(let n)? = try w.get("Counter", key: .string(name))?["value"] else {
                    throw StoreError(.notFound, "no counter \(name)")
                }
                try w.save(["name": .string(name), "value": .int(n + 1)], into: "Counter")
            }
        }
        print("incremented \(times)")
        exit(0)
    } catch {
        print("failed \(error)")
        exit(1)
    }
}
#endif
if arguments.count >= 4, arguments[3] == "feed-write" || arguments[3] == "feed-observe" {
    exit(FeedFixture.main(arguments))
}
let mode = arguments.count >= 4 ? arguments[3] : ""
let holdRead = arguments.count == 4 && mode == "hold-read"
let readLoop = arguments.count == 4 && mode == "read-loop"
let growMegabytes = arguments.count == 5 && mode == "grow" ? Int(arguments[4]) : nil
let withReader = arguments.count == 5 && arguments[4] == "with-reader"
guard arguments.count >= 4, let count = holdRead || readLoop || growMegabytes != nil ? 0 : Int(mode) else {
    FileHandle.standardError.write(Data("usage: crash-writer sqlite|lmdb PATH COUNT|hold-read|read-loop|grow MB\n".utf8))
    exit(2)
}

/// The counter of entries, moved in the same transaction as the entries.
@Sendable func itemCount(_ reader: ReadAccessor) throws -> Int64 {
    if case .int(let n)? = try reader.get("Counter", key: "items")?["value"] { return n }
    return 0
}
do {
    let store: any DataStore
    switch arguments[1] {
    case "sqlite": store = try SQLiteStore(path: arguments[2], schema: schema, options: SQLiteOptions(durability: .normal))
    case "lmdb":
        store = try LMDBStore(path: arguments[2], schema: schema,
                              options: LMDBOptions(durability: .normal,
                                                   initialMapSize: growMegabytes != nil ? 64 << 10 : 256 << 10))
    #if Postgres
    case "postgres": store = try PostgresStore(url: arguments[2], schema: schema, durability: .normal)
    #endif
    default:
        FileHandle.standardError.write(Data("unknown kind \(arguments[1])\n".utf8))
        exit(2)
    }
    if holdRead {
        try store.read { _ in
            FileHandle.standardOutput.write(Data("reading\n".utf8))
            while true { sleep(60) }
        }
    }
    if readLoop {
        var reads = 0
        var failures = 0
        var firstFailure = ""
        while !FileManager.default.fileExists(atPath: arguments[2] + ".stop") {
            do {
                let (counted, counter) = try store.read { r in (try r.count(FetchRequest("Entry")), try itemCount(r)) }
                if Int64(counted) != counter {
                    failures += 1
                    if firstFailure.isEmpty { firstFailure = "snapshot holds \(counted) entries, counter \(counter)" }
                }
            } catch {
                failures += 1
                if firstFailure.isEmpty { firstFailure = "\(error)" }
            }
            reads += 1
        }
        let last = try store.read { try itemCount($0) }
        print("reads \(reads) failures \(failures) items \(last) \(firstFailure)")
        try store.close()
        exit(failures == 0 ? 0 : 1)
    }
    if let growMegabytes {
        let text = String(repeating: "g", count: 10_000)
        var written = try store.read { Int(try itemCount($0)) }
        var batch = 0
        while written * 10_000 < growMegabytes << 20 {
            batch += 1
            try store.writeSync { w in
                for i in 0..<100 {
                    try w.insert(["id": .int(Int64(written + i)), "batch": .int(Int64(batch)), "text": .string(text)],
                                 into: "Entry")
                }
                try w.save(["name": "items", "value": .int(Int64(written + 100))], into: "Counter")
            }
            written += 100
        }
        if let lmdb = store as? LMDBStore { print("map \(lmdb.mapSize)") } else { print("written \(written)") }
        try store.close()
        exit(0)
    }
    if withReader {
        // An app reads while it writes: on LMDB this reader keeps the map from growing until its
        // block ends, the moment another process's writer takes the write lock.
        let reading = store
        Thread.detachNewThread {
            while true {
                _ = try? reading.read { r -> Int64 in
                    usleep(1_000)
                    return try itemCount(r)
                }
            }
        }
    }
    // Each transaction takes the next batch number from the counter inside the transaction, so
    // that several writer processes on one store interleave without clashing.
    for _ in 0..<count {
        let batch = try store.writeSync { w -> Int in
            var batch = 1
            if case .int(let done)? = try w.get("Counter", key: "committed")?["value"] { batch = Int(done) + 1 }
            for i in 0..<10 {
                try w.insert(["id": .int(Int64(batch * 10 + i)), "batch": .int(Int64(batch)),
                              "text": .string(String(repeating: "x", count: 200))], into: "Entry")
            }
            try w.save(["name": "committed", "value": .int(Int64(batch))], into: "Counter")
            try w.save(["name": "items", "value": .int(try itemCount(w) + 10)], into: "Counter")
            return batch
        }
        FileHandle.standardOutput.write(Data("\(batch)\n".utf8))
    }
    try store.close()
} catch {
    FileHandle.standardError.write(Data("crash-writer: \(error)\n".utf8))
    exit(1)
}

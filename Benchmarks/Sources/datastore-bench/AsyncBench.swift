import BenchSupport
import DataStoreAPI
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore

/// The async API next to the synchronous one, the same work in the same run, on every embedded
/// backend with `n` items: 20,000 read transactions of one point get each, and 2,000 write
/// transactions of one insert each. The synchronous side runs them in a loop on one thread; the
/// async side as a server's handlers would, from 64 concurrent tasks (`readAsync`, and the
/// `async` form of `writeAsync`), and also one at a time. A ratio above 1 is the async API
/// faster. With `key`, on encrypted stores.
@MainActor func benchmarkAsync(n: Int, key: StoreKey? = nil) throws {
    let directory = scratch("async")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let suffix = key == nil ? "" : ", encrypted"
    let stores: [(String, any DataStore)] = [
        ("in-memory" + suffix, try InMemoryStore(schema: Workload.schema, key: key)),
        ("SQLite" + suffix, try SQLiteStore(path: directory + "/a.sqlite", schema: Workload.schema,
                                            options: SQLiteOptions(durability: .normal, key: key))),
        ("LMDB" + suffix, try LMDBStore(path: directory + "/a.lmdb", schema: Workload.schema,
                                        options: LMDBOptions(durability: .normal, initialMapSize: 1 << 30, key: key))),
    ]
    let workload = Workload(count: n)
    let reads = 20_000
    let writes = 2_000
    let keys = (0..<reads).map { workload.lookups[$0 % workload.lookups.count] }
    for (name, store) in stores {
        try APIBench(store: store, workload: workload).insertAll(from: 0, count: n, batch: 10_000)
        let syncReads = try time {
            for key in keys {
                let found = try store.read { try $0.get("Item", key: .int(Int64(key))) != nil }
                precondition(found)
            }
        }
        let concurrentReads = try time {
            try blocking { [keys] in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for lane in 0..<64 {
                        group.addTask {
                            for index in stride(from: lane, to: keys.count, by: 64) {
                                let key = Int64(keys[index])
                                let found = try await store.readAsync { try $0.get("Item", key: .int(key)) != nil }
                                precondition(found)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
        let sequentialReads = try time {
            try blocking { [keys] in
                for key in keys {
                    let found = try await store.readAsync { try $0.get("Item", key: .int(Int64(key))) != nil }
                    precondition(found)
                }
            }
        }
        let syncWrites = try time {
            for i in n..<(n + writes) { try store.writeSync { try $0.insert(workload.record(i), into: "Item") } }
        }
        let start = n + writes
        let concurrentWrites = try time {
            try blocking {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for lane in 0..<64 {
                        group.addTask {
                            for i in stride(from: start + lane, to: start + writes, by: 64) {
                                let record = workload.record(i)
                                try await store.writeAsync { try $0.insert(record, into: "Item") }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
        let after = start + writes
        let sequentialWrites = try time {
            try blocking {
                for i in after..<(after + writes) {
                    let record = workload.record(i)
                    try await store.writeAsync { try $0.insert(record, into: "Item") }
                }
            }
        }
        let count = try store.read { try $0.count(FetchRequest("Item")) }
        precondition(count == n + 3 * writes)
        record(name, "readAsync from 64 tasks (vs read in a loop)", n, operations: reads, api: concurrentReads,
               raw: syncReads, memory: false)
        record(name, "readAsync one at a time (vs read in a loop)", n, operations: reads, api: sequentialReads,
               raw: syncReads, memory: false)
        record(name, "await writeAsync from 64 tasks (vs writeSync in a loop)", n, operations: writes,
               api: concurrentWrites, raw: syncWrites, memory: false)
        record(name, "await writeAsync one at a time (vs writeSync in a loop)", n, operations: writes,
               api: sequentialWrites, raw: syncWrites, memory: false)
        try store.close()
    }
}

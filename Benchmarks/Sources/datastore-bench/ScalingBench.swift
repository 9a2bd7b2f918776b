import BenchSupport
import DataStoreAPI
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore
import Synchronization

/// How a small write's cost grows with the store (it should not), and how point gets scale
/// from one thread to two, on every embedded backend. No raw C side: these compare the API with
/// itself at two sizes and two thread counts.
struct ScalingRow {
    var backend: String
    var n: Int
    var writeMicroseconds: Double
    var getsOneThread: Double
    var getsTwoThreads: Double
}

@MainActor var scalingRows: [ScalingRow] = []

/// With `key`, the stores encrypted.
@MainActor func benchmarkScaling(n: Int, key: StoreKey? = nil) throws {
    let directory = scratch("scaling")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let suffix = key == nil ? "" : ", encrypted"
    let stores: [(String, any DataStore)] = [
        ("in-memory" + suffix, try InMemoryStore(schema: Workload.schema, key: key)),
        ("SQLite" + suffix, try SQLiteStore(path: directory + "/s.sqlite", schema: Workload.schema,
                                            options: SQLiteOptions(durability: .normal, key: key))),
        ("LMDB" + suffix, try LMDBStore(path: directory + "/s.lmdb", schema: Workload.schema,
                                        options: LMDBOptions(durability: .normal, initialMapSize: 1 << 30, key: key))),
    ]
    let workload = Workload(count: n)
    for (name, store) in stores {
        let api = APIBench(store: store, workload: workload)
        try api.insertAll(from: 0, count: n, batch: 10_000)
        let writes = 1_000
        let writeSeconds = try time {
            for i in n..<(n + writes) { try store.writeSync { try $0.insert(workload.record(i), into: "Item") } }
        }
        // At least 200,000 gets per thread, so that starting a thread does not count.
        let sample = workload.lookups
        let keys = Array(repeating: sample, count: max(1, 200_000 / sample.count)).flatMap { $0 }
        let one = try time { _ = try api.pointGets(keys) }
        let two = try time {
            let failures = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                if (try? api.pointGets(keys)) != keys.count { failures.add(1, ordering: .relaxed) }
            }
            precondition(failures.load(ordering: .relaxed) == 0, "\(name): a point get failed")
        }
        let row = ScalingRow(backend: name, n: n, writeMicroseconds: writeSeconds / Double(writes) * 1e6,
                             getsOneThread: Double(keys.count) / one, getsTwoThreads: Double(2 * keys.count) / two)
        scalingRows.append(row)
        FileHandle.standardError.write(Data(String(
            format: "%@ n=%d: small writeSync %.1f µs, point gets %.0f/s on 1 thread, %.0f/s on 2 (%.2fx)\n",
            name, n, row.writeMicroseconds, row.getsOneThread, row.getsTwoThreads,
            row.getsTwoThreads / row.getsOneThread).utf8))
        try store.close()
    }
}

@MainActor func printScalingTable() {
    guard !scalingRows.isEmpty else { return }
    print("")
    print("| backend | items in store | small writeSync µs | point gets/s, 1 thread | 2 threads | 2 / 1 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for row in scalingRows {
        print(String(format: "| %@ | %d | %.1f | %.0f | %.0f | %.2f |", row.backend, row.n, row.writeMicroseconds,
                     row.getsOneThread, row.getsTwoThreads, row.getsTwoThreads / row.getsOneThread))
    }
}

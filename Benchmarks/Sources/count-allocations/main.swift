// count-allocations: heap allocations per visited record, on LMDB, SQLite and in memory, next to
// the raw C loops of the harness doing the same work (BenchSupport). The process counts every call
// to malloc and its kin, whoever makes it (the AllocationCounter target); each count is of one
// full visit of COUNT items, divided by COUNT.
//
//     swift build -c release --product count-allocations && .build/release/count-allocations [COUNT]
import AllocationCounter
import BenchSupport
import DataStoreAPI
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let workload = Workload(count: count)


/// Allocations per item of `body`, which visits `count` items.
func perItem(_ body: () throws -> Void) rethrows -> Double {
    let before = allocation_count()
    try body()
    return Double(allocation_count() - before) / Double(count)
}

var rows: [(backend: String, visit: String, perItem: Double)] = []
@MainActor func note(_ backend: String, _ visit: String, _ value: Double) {
    rows.append((backend, visit, value))
    FileHandle.standardError.write(Data(String(format: "%@ %@: %.4f allocations per item\n", backend, visit, value).utf8))
}

let directory = NSTemporaryDirectory() + "count-allocations-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

let stores: [(String, any DataStore)] = [
    ("LMDB", try LMDBStore(path: directory + "/store.lmdb", schema: Workload.schema,
                           options: LMDBOptions(durability: .normal, initialMapSize: 4 << 30))),
    ("SQLite", try SQLiteStore(path: directory + "/store.sqlite", schema: Workload.schema,
                               options: SQLiteOptions(durability: .normal))),
    ("in-memory", try InMemoryStore(schema: Workload.schema)),
]
for (backend, store) in stores {
    let api = APIBench(store: store, workload: workload)
    try api.insertAll(from: 0, count: count, batch: 10_000)
    // One visit first, so that what is made once per store (statements, layouts) is not counted.
    _ = try api.visitInPlace()
    var total: Int64 = 0
    note(backend, "visit, fields read in place", try perItem { total = try api.visitInPlace() })
    note(backend, "visit, each row decoded into a struct", try perItem { _ = try api.visitRows() })
    note(backend, "typed forEach (Codable model)", try perItem {
        try store.read { r in try r.forEach(WorkloadItem.self) { consume($0) } }
    })
    note(backend, "forEach (Record)", try perItem { _ = try api.visit() })
    precondition(total != 0)
    try store.close()
}
try FileManager.default.createDirectory(atPath: directory + "/raw-lmdb", withIntermediateDirectories: true)
let rawLMDB = RawLMDBBench(path: directory + "/raw-lmdb", workload: workload)
let rawSQLite = RawSQLiteBench(path: directory + "/raw.sqlite", workload: workload)
rawLMDB.insertAll(from: 0, count: count, batch: 10_000)
rawSQLite.insertAll(from: 0, count: count, batch: 10_000)
_ = rawLMDB.visitInPlace()
_ = rawSQLite.visitInPlace()
note("raw LMDB", "visit, fields read in place", perItem { _ = rawLMDB.visitInPlace() })
note("raw LMDB", "visit, each row decoded into a struct", perItem { _ = rawLMDB.visit() })
note("raw SQLite", "visit, fields read in place", perItem { _ = rawSQLite.visitInPlace() })
note("raw SQLite", "visit, each row decoded into a struct", perItem { _ = rawSQLite.visit() })

print("| backend | visit of \(count) items | heap allocations per item |")
print("| --- | --- | ---: |")
for row in rows { print(String(format: "| %@ | %@ | %.3f |", row.backend, row.visit, row.perItem)) }

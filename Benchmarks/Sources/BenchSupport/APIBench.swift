import DataStoreAPI
import Foundation

/// The same work through the DataStore API, on any backend.
package struct APIBench {
    package let store: any DataStore
    package let workload: Workload

    package init(store: any DataStore, workload: Workload) {
        self.store = store
        self.workload = workload
    }

    package func insertAll(from start: Int, count: Int, batch: Int) throws {
        var i = start
        while i < start + count {
            let end = min(start + count, i + batch)
            try store.writeSync { w in
                for j in i..<end { try w.insert(workload.record(j), into: "Item") }
            }
            i = end
        }
    }

    package func pointGets(_ keys: [Int]) throws -> Int {
        try store.read { r in try keys.reduce(0) { $0 + (try r.get("Item", key: .int(Int64($1))) == nil ? 0 : 1) } }
    }

    package func scan() throws -> Int {
        try store.read { try $0.fetch(FetchRequest("Item")).count }
    }

    package func visit() throws -> Int {
        try store.read { r in
            var count = 0
            try r.forEach(FetchRequest("Item")) { record in
                consume(record)
                count += 1
            }
            return count
        }
    }

    /// Every item as a ``Row`` read in place, each decoded into the same struct the raw side
    /// builds and handed on, none kept.
    package func visitRows() throws -> Int {
        try store.read { r in
            var count = 0
            try r.visit(FetchRequest("Item")) { row in
                consume(RawRow(id: try row.int("id"), name: try row.string("name"), score: try row.int("score"),
                               ratio: try row.double("ratio"), payload: try row.bytes("payload")))
                count += 1
            }
            return count
        }
    }

    /// Every item as a ``Row``, its fields read where the store keeps them and nothing built: the
    /// sum ``RawRow/inPlaceSum(id:score:ratio:name:payload:)`` of each.
    package func visitInPlace() throws -> Int64 {
        try store.read { r in
            var total: Int64 = 0
            try r.visit(FetchRequest("Item")) { row in
                total &+= RawRow.inPlaceSum(id: try row.int("id"), score: try row.int("score"), ratio: try row.double("ratio"),
                                            name: try row.withUTF8("name") { $0 }, payload: try row.withBytes("payload") { $0 })
            }
            return total
        }
    }

    package func indexedQueries() throws -> Int {
        try store.read { r in
            try (0..<Workload.queriedScores).reduce(0) { total, score in
                total + (try r.fetch(FetchRequest("Item", filter: Field("score") == .int(Int64(score))))).count
            }
        }
    }

    package func unindexedQuery() throws -> Int {
        try store.read { try $0.fetch(FetchRequest("Item", filter: Field("ratio") < .double(Workload.ratioBound))).count }
    }

    package func smallTransactions(from start: Int, count: Int = Workload.smallTransactions) throws {
        for i in start..<(start + count) {
            try store.writeSync { try $0.insert(workload.record(i), into: "Item") }
        }
    }

    package func asyncWrites(from start: Int, count: Int = Workload.smallTransactions) throws {
        for i in start..<(start + count) {
            let record = workload.record(i)
            store.enqueueWrite { try $0.insert(record, into: "Item") }
        }
        try store.waitForPendingWrites()
    }
}

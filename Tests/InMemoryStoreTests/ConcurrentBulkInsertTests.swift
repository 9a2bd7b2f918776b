import DataStoreAPI
import Foundation
import InMemoryStore
import Synchronization
import Testing

/// Bulk inserts of several stores at once share the one thread that checks their next batches:
/// 8 threads, each inserting 35,000 items into a store of its own (four batches each, three
/// of them checked ahead), every other one with a refused value at item 25,000. Each store then
/// holds exactly the items before its refused one, or all of them.
@Test func concurrentBulkInsertsEachStoreWhatInsertingInOrderWould() throws {
    let schema = Schema(entities: [
        EntitySchema("Item", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)]),
    ])
    let stores = try (0..<8).map { _ in try InMemoryStore(schema: schema) }
    let outcomes = Mutex([Int: String]())
    DispatchQueue.concurrentPerform(iterations: stores.count) { index in
        let refused = index % 2 == 1
        let items: [Record] = (0..<35_000).map { i in
            ["id": .int(Int64(i)), "name": refused && i == 25_000 ? .int(1) : .string("item \(i) of \(index)")]
        }
        let outcome: String
        do {
            try stores[index].writeSync { writer in
                do {
                    try writer.insert(contentsOf: items, into: "Item")
                } catch let error as StoreError where error.code == .typeMismatch {}
            }
            outcome = try stores[index].read { reader in
                let count = try reader.count(FetchRequest("Item"))
                let last = try reader.get("Item", key: .int(Int64(count - 1)))?["name"]
                return "\(count) \(last.map { "\($0)" } ?? "none")"
            }
        } catch {
            outcome = "\(error)"
        }
        outcomes.withLock { $0[index] = outcome }
    }
    let seen = outcomes.withLock { $0 }
    for index in stores.indices {
        let stored = index % 2 == 1 ? 25_000 : 35_000
        #expect(seen[index] == "\(stored) \(Value.string("item \(stored - 1) of \(index)"))", "store \(index)")
    }
    for store in stores { try store.close() }
}

// At the top level of main.swift, `try await store.writeAsync { … }` is the awaited form: a block
// that throws makes the statement throw. (It once resolved to a fire-and-forget overload there,
// and a duplicate key went unnoticed.) Exits 0 when the error reaches the caller.
import DataStoreAPI
import Foundation
import InMemoryStore

let store = try InMemoryStore(schema: Schema(entities: [
    EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int)]),
]))
try await store.writeAsync { try $0.insert(["id": 1], into: "Note") }
do {
    try await store.writeAsync { try $0.insert(["id": 1], into: "Note") }
    print("FAILED: the duplicate insert did not throw at the top level")
    exit(1)
} catch let error as StoreError where error.code == .keyExists {
    print("the duplicate insert threw keyExists")
}
let count = try await store.writeAsync { try $0.count(FetchRequest("Note")) }
guard count == 1 else {
    print("FAILED: \(count) notes")
    exit(1)
}
try store.close()

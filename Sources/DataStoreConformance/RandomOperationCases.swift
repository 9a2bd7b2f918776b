import DataStoreAPI
import Foundation
import Synchronization

/// A seeded random sequence of inserts, saves, updates, deletes, async writes and child merges,
/// applied to the store and to a plain dictionary; the two must end equal.
enum RandomOperationCases {
    struct Model {
        var items: [Int64: Record] = [:]

        func codeTaken(_ code: Value, by id: Int64) -> Bool {
            !code.isNull && items.contains { $0.key != id && $0.value["code"] == code }
        }
    }

    static func run(_ c: ConformanceContext, seed: UInt64) throws {
        let store = try c.open()
        var rng = SplitMix64(seed: seed)
        var model = Model()
        for step in 0..<400 {
            let id = Int64(rng.next() % 50) - 10
            var item = Fixtures.item(id, using: &rng)
            item["code"] = rng.next() % 4 == 0 ? .string("c\(rng.next() % 8)") : .null
            let expectedError: StoreError.Code?
            let op = rng.next() % 7
            switch op {
            case 0:
                expectedError = model.items[id] != nil ? .keyExists
                    : (model.codeTaken(item["code"], by: id) ? .uniqueViolation : nil)
            case 1, 5, 6:
                expectedError = model.codeTaken(item["code"], by: id) ? .uniqueViolation : nil
            case 2:
                expectedError = model.items[id] == nil ? .notFound : nil
            default:
                expectedError = nil
            }
            let write: @Sendable (WriteAccessor) throws -> Void = { [item] w in
                switch op {
                case 0: try w.insert(item, into: "Item")
                case 1, 5: try w.save(item, into: "Item")
                case 2: try w.update("Item", key: .int(id), set: ["score": item["score"], "name": item["name"]])
                case 3: _ = try w.delete("Item", key: .int(id))
                case 6: try w.save(item, into: "Item")
                default: _ = try w.delete(FetchRequest("Item", filter: Field("score") == item["score"], limit: 2))
                }
            }
            var actualError: StoreError.Code?
            do {
                switch op {
                case 5:
                    try store.waitForPendingWrites()
                    _ = try awaitAsync(store, write)
                case 6:
                    let child = try store.makeChild()
                    try child.writeSync(write)
                    try store.merge(child)
                default:
                    try store.writeSync(write)
                }
            } catch let error as StoreError {
                actualError = error.code
            }
            c.expectEqual(actualError, expectedError, "step \(step) op \(op) id \(id)")
            if expectedError == nil {
                switch op {
                case 0, 1, 5, 6: model.items[id] = item
                case 2:
                    model.items[id]?["score"] = item["score"]
                    model.items[id]?["name"] = item["name"]
                case 3: model.items[id] = nil
                default:
                    let doomed = Oracle.answer(FetchRequest("Item", filter: Field("score") == item["score"], limit: 2),
                                               over: Array(model.items.values), primaryKey: "id")
                    for d in doomed { if case .int(let k) = d["id"] { model.items[k] = nil } }
                }
            }
        }
        let final = try store.read { try $0.fetch(FetchRequest("Item")) }
        c.expectEqual(final, model.items.sorted { $0.key < $1.key }.map(\.value))
    }

    /// Runs a write through writeAsync and waits for it.
    static func awaitAsync(_ store: any DataStore, _ body: @escaping @Sendable (WriteAccessor) throws -> Void) throws {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<Void, any Error>>(.success(()))
        store.writeAsync(body) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        try outcome.withLock { $0 }.get()
    }

    static let all: [ConformanceCase] = [1, 2, 3].map { seed in
        ConformanceCase("Random operations", "seededSequence\(seed)EndsEqualToTheOracle") { c in
            try run(c, seed: UInt64(seed))
        }
    }
}

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
                expectedError =
                    model.items[id] != nil
                    ? .keyExists
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
                case 2:
                    try w.update("Item", key: .int(id), set: ["score": item["score"], "name": item["name"]])
                case 3: _ = try w.delete("Item", key: .int(id))
                case 6: try w.save(item, into: "Item")
                default:
                    _ = try w.delete(FetchRequest("Item", filter: Field("score") == item["score"], limit: 2))
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
                    let doomed = Oracle.answer(
                        FetchRequest("Item", filter: Field("score") == item["score"], limit: 2),
                        over: Array(model.items.values), primaryKey: "id")
                    for d in doomed { if case .int(let k) = d["id"] { model.items[k] = nil } }
                }
            }
            // Ordered reads between writes, not only at the end: a backend that keeps its key
            // order incrementally (in-memory) merges each version's changes into the last order read.
            if step % 10 == 9 {
                c.expectEqual(try store.read { try $0.fetch(FetchRequest("Item")) },
                              model.items.sorted { $0.key < $1.key }.map(\.value), "ordered read after step \(step)")
                let after = Int64(rng.next() % 50) - 10
                c.expectEqual(try store.read { try $0.scan("Item", after: .int(after), limit: 5) },
                              Array(model.items.filter { $0.key > after }.sorted { $0.key < $1.key }.map(\.value).prefix(5)),
                              "scan after \(after) at step \(step)")
            }
        }
        let final = try store.read { try $0.fetch(FetchRequest("Item")) }
        c.expectEqual(final, model.items.sorted { $0.key < $1.key }.map(\.value))
    }

    /// Runs a write through writeAsync and waits for it.
    static func awaitAsync(
        _ store: any DataStore, _ body: @escaping @Sendable (WriteAccessor) throws -> Void
    ) throws {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<Void, any Error>>(.success(()))
        store.writeAsync(body) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        try outcome.withLock { $0 }.get()
    }

    /// Keys and unique values from the edges (NUL, unnormalized Unicode, 0x00/0xFF key bytes):
    /// inserts, saves, updates and deletes, directly and through children that change several
    /// items before they merge, against a model keyed by exact values.
    static func runEdge(_ c: ConformanceContext, seed: UInt64) throws {
        let store = try c.open(EdgeDomain.schema, name: "edge")
        var rng = SplitMix64(seed: seed)
        var model: [String: [Value: Record]] = [:]
        var keys: [String: [Value]] = [:]
        for entity in EdgeDomain.entityNames {
            // Sorted, not in the set's order (which differs from process to process), so that a
            // seed names one sequence of operations.
            keys[entity] = Set((0..<12).map { _ in EdgeDomain.key(for: entity, &rng) })
                .sorted { Value.compareCanonical($0, $1) < 0 }
        }
        let uniques: [Value] = [.null, "a", "a\u{0}", "A", "\u{E9}", "e\u{301}", ""]

        func clash(_ record: Record, _ entity: String, _ items: [Value: Record]) -> Bool {
            let u = record["u"]
            return !u.isNull && items.contains { $0.key != record["id"] && $0.value["u"] == u }
        }
        /// Applies one random operation to `writer` and `items`; returns the error it expects.
        func operation(
            _ entity: String, _ items: inout [Value: Record],
            _ rng: inout SplitMix64
        ) -> (StoreError.Code?, (WriteAccessor) throws -> Void) {
            let key = EdgeDomain.pick(keys[entity] ?? [], &rng)
            var record = EdgeDomain.item(entity, key: key, &rng)
            record["u"] = EdgeDomain.pick(uniques, &rng)
            switch rng.next() % 4 {
            case 0:
                let error: StoreError.Code? =
                    items[key] != nil
                    ? .keyExists
                    : (clash(record, entity, items) ? .uniqueViolation : nil)
                if error == nil { items[key] = record }
                return (error, { [record] in try $0.insert(record, into: entity) })
            case 1:
                let error: StoreError.Code? = clash(record, entity, items) ? .uniqueViolation : nil
                if error == nil { items[key] = record }
                return (error, { [record] in try $0.save(record, into: entity) })
            case 2:
                let changes = ["s": record["s"], "u": record["u"]]
                guard var updated = items[key] else {
                    return (.notFound, { try $0.update(entity, key: key, set: changes) })
                }
                updated["s"] = record["s"]
                updated["u"] = record["u"]
                let error: StoreError.Code? = clash(updated, entity, items) ? .uniqueViolation : nil
                if error == nil { items[key] = updated }
                return (error, { try $0.update(entity, key: key, set: changes) })
            default:
                items[key] = nil
                return (nil, { _ = try $0.delete(entity, key: key) })
            }
        }
        func code(_ body: () throws -> Void) -> StoreError.Code? {
            do {
                try body()
                return nil
            } catch let error as StoreError {
                return error.code
            } catch {
                return .io
            }
        }

        for step in 0..<300 {
            let entity = EdgeDomain.pick(EdgeDomain.entityNames, &rng)
            var items = model[entity] ?? [:]
            if rng.next() % 4 == 0 {
                let child = try store.makeChild()
                for _ in 0..<(1 + rng.next() % 4) {
                    let before = items
                    let (expected, write) = operation(entity, &items, &rng)
                    let actual = code { try child.writeSync(write) }
                    c.expectEqual(actual, expected, "step \(step): child write on \(entity)")
                    if actual != nil { items = before }
                }
                let merged = code { try store.merge(child) }
                c.expectEqual(merged, nil, "step \(step): merging a valid child into \(entity)")
                if merged != nil { return }
            } else {
                let before = items
                let (expected, write) = operation(entity, &items, &rng)
                let actual = code { try store.writeSync(write) }
                c.expectEqual(actual, expected, "step \(step): write on \(entity)")
                if actual != nil { items = before }
            }
            model[entity] = items
        }
        for entity in EdgeDomain.entityNames {
            let expected = (model[entity] ?? [:]).values.sorted {
                Value.compareCanonical($0["id"], $1["id"]) < 0
            }
            let fetched = try store.read { try $0.fetch(FetchRequest(entity)) }
            c.expectEqual(fetched, expected, "final \(entity) on \(c.backend.name)")
            // The store's records (compact ones, on backends that keep a row's fields as stored)
            // against the model's dictionaries: value by value, hashed, and changed.
            for (got, want) in zip(fetched, expected) {
                let item = "\(entity)[\(want["id"])] on \(c.backend.name)"
                c.expectEqual(got.hashValue, want.hashValue, "hash of \(item)")
                c.expectEqual(got.count, want.count, "attribute count of \(item)")
                for name in want.attributeNames {
                    c.expectEqual(got.value(ifPresent: name), want[name], "\(name) of \(item)")
                }
                c.expectEqual(got.values, want.values, "values of \(item)")
                var (changed, wanted) = (got, want)
                changed["s"] = "changed \u{E9}"
                wanted["s"] = "changed \u{E9}"
                c.expectEqual(changed, wanted, "\(item) changed")
                c.expect(changed != got || want["s"] == "changed \u{E9}", "\(item) unchanged by a change")
                c.expectEqual(got, want, "\(item) after a copy of it changed")
            }
            // A point get of every edge key, present or not (backends look a key up without
            // the encoded key a write builds: SQLite binds the value, LMDB encodes it on the stack).
            try store.read { reader in
                for key in keys[entity] ?? [] {
                    c.expectEqual(try reader.get(entity, key: key), model[entity]?[key],
                                  "get \(entity)[\(key)] on \(c.backend.name)")
                }
            }
        }
    }

    static let all: [ConformanceCase] =
        [1, 2, 3].map { seed in
            ConformanceCase("Random operations", "seededSequence\(seed)EndsEqualToTheOracle") { c in
                try run(c, seed: UInt64(seed))
            }
        }
        + [4, 5, 6].map { seed in
            ConformanceCase("Random operations", "seededEdgeSequence\(seed)EndsEqualToTheModel") { c in
                try runEdge(c, seed: UInt64(seed))
            }
        }
}

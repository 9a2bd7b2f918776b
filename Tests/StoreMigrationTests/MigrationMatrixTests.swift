import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

extension TemporaryDirectory {
    func location(_ kind: StoreKind, _ name: String) -> StoreLocation {
        kind == .memory ? StoreLocation(kind: .memory, path: "\(url.lastPathComponent)-\(name)")
            : StoreLocation(kind: kind, path: url.appendingPathComponent("\(name).\(kind.rawValue)").path)
    }
}

/// Every item of every entity, in key order.
func contents(_ location: StoreLocation) throws -> [String: [Record]] {
    let store = try location.open(schema: nil)
    defer { try? store.close() }
    return try store.read { r in
        try Dictionary(uniqueKeysWithValues: store.schema.entities.map { ($0.name, try r.fetch(FetchRequest($0.name))) })
    }
}

/// A source holding the suite's fixture items plus values at their edges.
func writeEdgeCaseStore(_ location: StoreLocation) throws {
    let store = try location.open(schema: Fixtures.schema)
    defer { try? store.close() }
    try Fixtures.load(Fixtures.items(150, seed: 4), into: store)
    try Fixtures.writeEdgeValues(into: store)
}

let kinds: [StoreKind] = [.sqlite, .lmdb, .memory]
let matrix: [(StoreKind, StoreKind)] = kinds.flatMap { a in kinds.map { (a, $0) } }

@Test(arguments: matrix)
func migrationIntoEveryBackendAndBackIsItemForItem(_ from: StoreKind, _ to: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(from, "source")
    let middle = dir.location(to, "middle")
    let back = dir.location(from, "back")
    defer { for l in [source, middle, back] where l.kind == .memory { try? l.destroy() } }
    try writeEdgeCaseStore(source)
    let there = try Migrator.copy(from: source, to: middle, options: MigrationOptions(batchSize: 37))
    #expect(there.verified && there.differences == 0)
    #expect(there.entities.map(\.itemsWritten) == [154, 5, 50])
    let returned = try Migrator.copy(from: middle, to: back, options: MigrationOptions(batchSize: 1_000))
    #expect(returned.differences == 0)
    let original = try contents(source)
    #expect(try contents(middle) == original)
    #expect(try contents(back) == original)
    let verify = try Migrator.verify(from: back, to: middle)
    #expect(verify.differences == 0 && verify.entities.map(\.itemsVerified) == [154, 5, 50])
}

@Test func verifyReportsEveryKindOfDifferenceAndSyncRepairsThem() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    let copy = dir.location(.lmdb, "copy")
    try writeEdgeCaseStore(source)
    _ = try Migrator.copy(from: source, to: copy)
    let store = try copy.open(schema: nil)
    try store.writeSync { w in
        _ = try w.delete("Item", key: 100_000)
        try w.update("Item", key: 100_001, set: ["ratio": 0.0])
        try w.insert(["id": 5_000_000, "name": "extra"], into: "Item")
    }
    try store.close()
    let verify = try Migrator.verify(from: source, to: copy)
    #expect(verify.differences == 3)
    #expect(verify.sampleDifferences.contains { $0.contains("100001") && $0.contains("differs") })
    let sync = try Migrator.sync(from: source, to: copy)
    let item = try #require(sync.entities.first { $0.entity == "Item" })
    #expect(item.itemsWritten == 2 && item.itemsDeleted == 1)
    #expect(try Migrator.verify(from: source, to: copy).differences == 0)
}

@Test func anUnfinishedDestinationCannotBeOpenedAsComplete() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    let destination = dir.location(.lmdb, "destination")
    try writeEdgeCaseStore(source)
    var batches = 0
    #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 20),
                          shouldStop: { batches += 1; return batches == 3 })
    }
    do {
        _ = try destination.open(schema: nil)
        Issue.record("an unfinished destination opened")
    } catch let error as StoreError {
        #expect(error.code == .incompleteMigration && error.message.contains("--resume"), "\(error)")
    }
    let resumed = try Migrator.copy(from: source, to: destination, options: MigrationOptions(resume: true))
    #expect(resumed.resumed && resumed.differences == 0)
    #expect(try contents(destination) == contents(source))
    #expect(throws: StoreError.self) { try Migrator.copy(from: source, to: destination, options: MigrationOptions(resume: true)) }
}

@Test func aSubsetOfEntitiesCopiesOnlyThose() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.lmdb, "source")
    let destination = dir.location(.sqlite, "subset")
    try writeEdgeCaseStore(source)
    let report = try Migrator.copy(from: source, to: destination, options: MigrationOptions(entities: ["Keyed"]))
    #expect(report.entities.map(\.entity) == ["Keyed"])
    #expect(try contents(destination).keys.sorted() == ["Keyed"])
    #expect(throws: StoreError.self) {
        try Migrator.copy(from: source, to: dir.location(.sqlite, "bad"), options: MigrationOptions(entities: ["Nope"]))
    }
}

/// A resume compares what the interrupted copy wrote with the current snapshot only up to its
/// checkpoint and copies the rest plainly; the source changed meanwhile before the checkpoint,
/// after it, in a finished entity and in one not reached yet. A resume interrupted in its own
/// comparison is resumed again (its checkpoint says nothing about what follows it). Each time
/// the destination ends equal to the source, and the counts of written and deleted items are
/// exactly the changes plus what was never copied.
@Test(arguments: [(StoreKind.sqlite, StoreKind.lmdb), (.lmdb, .sqlite)])
func aResumeComparesUpToItsCheckpointAndCopiesTheRest(_ from: StoreKind, _ to: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(from, "source")
    let destination = dir.location(to, "destination")
    try DemoData.seed(source, items: 3_000, seed: 11)  // 600 customers, 300 products, 900 orders, 1,200 pairs
    var batches = 0
    #expect(throws: MigrationInterrupted.self) {
        // 6 batches of customers, 2 of products: the checkpoint is the 200th product.
        try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 100),
                          shouldStop: { batches += 1; return batches == 8 })
    }
    let store = try source.open(schema: nil)
    let (customers, products, orders) = try store.read { r in
        (try r.scan("Customer", after: nil, limit: 1_000), try r.scan("Product", after: nil, limit: 1_000),
         try r.scan("Order", after: nil, limit: 10))
    }
    try store.writeSync { w in
        var customer = customers[10]
        customer["name"] = "Renamed after the checkpoint"
        try w.save(customer, into: "Customer")                     // a finished entity
        _ = try w.delete("Product", key: products[50]["sku"])       // before the checkpoint
        var inserted = products[100]
        guard case .string(let sku) = inserted["sku"] else { return }
        inserted["sku"] = .string(sku + "x")
        try w.insert(inserted, into: "Product")                     // before the checkpoint, new
        var later = products[250]
        later["title"] = "Changed after the checkpoint"
        try w.save(later, into: "Product")                          // after the checkpoint
        _ = try w.delete("Order", key: orders[5]["id"])              // an entity not reached
    }
    try store.close()
    var phases: [String: Set<String>] = [:]
    let resumed = try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 100, resume: true),
                                    progress: { phases[$0.entity, default: []].insert($0.phase.rawValue) })
    #expect(resumed.resumed && resumed.verified && resumed.differences == 0)
    // The entity no batch had reached is copied, not compared.
    #expect(phases["Order"] == ["copy", "verify"] && phases["Customer"] == ["sync", "verify"], "\(phases)")
    func written(_ entity: String) -> Int { resumed.entities.first { $0.entity == entity }?.itemsWritten ?? -1 }
    func deleted(_ entity: String) -> Int { resumed.entities.first { $0.entity == entity }?.itemsDeleted ?? -1 }
    #expect(written("Customer") == 1 && deleted("Customer") == 0)
    // The insert before the checkpoint, and the 100 products after it (one of them changed).
    #expect(written("Product") == 101 && deleted("Product") == 1)
    #expect(written("Order") == 899 && deleted("Order") == 0)
    #expect(try contents(destination) == contents(source))

    // A resume interrupted in its comparison, resumed again.
    let second = dir.location(to, "second")
    batches = 0
    #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: second, options: MigrationOptions(batchSize: 100),
                          shouldStop: { batches += 1; return batches == 8 })
    }
    batches = 0
    #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: second, options: MigrationOptions(batchSize: 100, resume: true),
                          shouldStop: { batches += 1; return batches == 7 })
    }
    let again = try Migrator.copy(from: source, to: second, options: MigrationOptions(batchSize: 100, resume: true))
    #expect(again.resumed && again.verified && again.differences == 0)
    #expect(try contents(second) == contents(source))
}

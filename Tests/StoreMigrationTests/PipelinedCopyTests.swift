import DataStoreAPI
import DataStoreTestSupport
import Foundation
import InMemoryStore
@testable import StoreMigration
import Testing

private let pipelineSchema = Schema(entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)]),
])

/// A copy reads the next page while a worker writes the one before. Stopped after any page, it
/// has waited for the write in flight: the destination holds every page read before the stop,
/// whole, and a resume finishes the copy from the checkpoint that write left.
@Test(arguments: [(StoreKind.sqlite, StoreKind.lmdb), (.lmdb, .sqlite)])
func aStoppedCopyHoldsEveryPageItReadAndResumes(_ from: StoreKind, _ to: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(from, "source")
    let store = try source.open(schema: pipelineSchema)
    try store.writeSync { w in
        try w.insert(contentsOf: (0..<1_000).map { ["id": .int(Int64($0)), "name": .string("item \($0)")] }, into: "Item")
    }
    try store.close()
    for stopAfter in [1, 2, 7] {
        let destination = dir.location(to, "destination-\(stopAfter)")
        var asked = 0
        do {
            _ = try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 50),
                                  shouldStop: {
                                      asked += 1
                                      return asked > stopAfter
                                  })
            Issue.record("the copy did not stop")
        } catch is MigrationInterrupted {}
        let partial = try Migrator.acceptingUnfinished { try destination.openSource() }
        let held = try partial.read { try $0.count(FetchRequest("Item")) }
        try partial.close()
        // One check after each page: the page that answered yes was read, and written too.
        #expect(held == 50 * (stopAfter + 1), "stopped after \(stopAfter) checks, holds \(held)")
        let resumed = try Migrator.copy(from: source, to: destination, options: MigrationOptions(resume: true))
        #expect(resumed.resumed && resumed.differences == 0)
        #expect(try Migrator.verify(from: source, to: destination).differences == 0)
    }
}

/// A copy's progress counts committed items only: at every tick, the destination already holds
/// that many, so that a process killed right after a progress line loses none of the items it
/// reported (the SIGKILL tests kill at the first progress line and expect a resume to write
/// less than everything).
@Test func aCopysProgressCountsOnlyCommittedItems() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.lmdb, "source")
    let destination = dir.location(.sqlite, "destination")
    let store = try source.open(schema: pipelineSchema)
    try store.writeSync { w in
        try w.insert(contentsOf: (0..<1_000).map { ["id": .int(Int64($0)), "name": .string("item \($0)")] }, into: "Item")
    }
    try store.close()
    var ticks: [(done: Int, held: Int)] = []
    _ = try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 50), progress: { progress in
        guard progress.phase == .copy else { return }
        let held = (try? Migrator.acceptingUnfinished {
            let copy = try destination.openSource()
            defer { try? copy.close() }
            return try copy.read { try $0.count(FetchRequest("Item")) }
        }) ?? -1
        ticks.append((progress.done, held))
    })
    #expect(ticks.count >= 20)
    #expect(ticks.last?.done == 1_000)
    for tick in ticks { #expect(tick.held >= tick.done, "progress \(tick.done) with \(tick.held) items committed") }
}

/// A copy whose batch the destination chose (PostgreSQL's 10,000) reads 1,000 items first, then
/// pages of as many items as fit in 32 MiB of values by the size of the first page's items, never
/// fewer than 1,000 nor more than the batch: large items keep a page's memory near 32 MiB, small
/// ones fill the batch; every item is copied once, in key order.
@Test(arguments: [(valueBytes: 4_000, pages: [1_000, 8_363, 8_363, 248]), (valueBytes: 100, pages: [1_000, 10_000, 7_000])])
func aCopysPagesAfterTheFirstHoldWhatFitsIn32MiB(_ valueBytes: Int, _ pages: [Int]) throws {
    let source = try InMemoryStore(schema: pipelineSchema)
    let total = pages.reduce(0, +)
    let text = String(repeating: "x", count: valueBytes)
    try source.writeSync { w in
        try w.insert(contentsOf: (0..<total).map { ["id": .int(Int64($0)), "name": .string(text)] }, into: "Item")
    }
    let destination = try InMemoryStore(schema: pipelineSchema)
    var copy = PagedCopy(destination: destination, batchSize: 10_000, shouldStop: { false })
    copy.measurePages(batchChosen: false)
    var committed: [Int] = []
    let copied = try source.read { snapshot in
        try copy.copy(pipelineSchema.entities[0], after: nil, reading: { try $0(snapshot) },
                      checkpoint: { _, _ in }, committed: { committed.append($0) })
    }
    #expect(copied == total)
    let sizes = zip(committed, [0] + committed).map { $0 - $1 }
    #expect(sizes == pages, "pages of \(sizes)")
    // Each later page's values within 32 MiB: an item is its key's 9 bytes and its text's tag,
    // length (2 bytes at most here) and bytes (4,012 bytes: 8,363 fit).
    for size in sizes.dropFirst() { #expect(size * (valueBytes + 12) <= 32 << 20) }
    let keys = try destination.read { try $0.fetch(FetchRequest("Item")) }.map { $0["id"] }
    #expect(keys == (0..<total).map { .int(Int64($0)) })
}

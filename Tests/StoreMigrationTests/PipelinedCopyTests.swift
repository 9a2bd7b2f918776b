import DataStoreAPI
import DataStoreTestSupport
import Foundation
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

import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// The items of the checksum tests: even ids 0, 2, 4, …, so that an item can be planted
/// between two others.
private let checksumSchema = Schema(entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("ratio", .double),
        Attribute("payload", .bytes, optional: true),
    ]),
    EntitySchema("Empty", primaryKey: "key", attributes: [Attribute("key", .string)]),
])

private func checksumItem(_ i: Int64) -> Record {
    ["id": .int(2 * i), "name": .string("name-\(i % 977)"), "ratio": .double(Double(i % 13) / 13),
     "payload": i % 5 == 0 ? .null : .bytes([UInt8(truncatingIfNeeded: i), 1, 2])]
}

/// A source of `count` checksum items and a copy of it, in a new temporary directory.
private func copiedStores(_ dir: TemporaryDirectory, _ from: StoreKind, _ to: StoreKind,
                          count: Int64) throws -> (source: StoreLocation, destination: StoreLocation) {
    let source = dir.location(from, "source")
    let destination = dir.location(to, "destination")
    let store = try source.open(schema: checksumSchema)
    try store.writeSync { w in try w.insert(contentsOf: (0..<count).map(checksumItem), into: "Item") }
    try store.close()
    _ = try Migrator.copy(from: source, to: destination)
    return (source, destination)
}

/// How many items: 100,000 in the suite (set `DATASTORE_CHECKSUM_ITEMS=1000000` for the size the
/// README reports).
private let checksumItems = Int64(ProcessInfo.processInfo.environment["DATASTORE_CHECKSUM_ITEMS"] ?? "") ?? 100_000

/// `verify --checksum` finds exactly the differences the item-by-item verify finds, planted at
/// the first and last keys, at random keys, between keys, before the first and after the last,
/// and in values the item compare tells apart by bits or bytes (-0.0, unnormalized Unicode, an
/// empty payload against none), and compares items only in the ranges whose digests differ.
@Test(arguments: [(StoreKind.sqlite, StoreKind.lmdb), (.lmdb, .memory)])
func aChecksumVerifyFindsTheSameDifferencesAsTheItemVerifyReadingOnlyTheRangesThatDiffer(
    _ from: StoreKind, _ to: StoreKind
) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(from, "source")
    let destination = dir.location(to, "destination")
    defer { for l in [source, destination] where l.kind == .memory { try? l.destroy() } }
    let n = checksumItems
    let store = try source.open(schema: checksumSchema)
    try store.writeSync { w in try w.insert(contentsOf: (0..<n).map(checksumItem), into: "Item") }
    try store.close()
    _ = try Migrator.copy(from: source, to: destination)
    let clean = try Migrator.verify(from: source, to: destination, options: MigrationOptions(checksum: true))
    #expect(clean.differences == 0 && clean.verified)
    #expect(clean.entities.first?.rangesCompared == Int((n + 999) / 1_000) + 1)
    #expect(clean.entities.first?.rangesDiffering == 0)

    // Random items, each in a range of 1,000 of its own, none in the first or last range, so
    // that every planted difference must show in a digest of its own.
    var rng = SplitMix64(seed: 0xC4EC)
    var blocks = Array(1..<(n / 1_000 - 1))
    for i in blocks.indices.reversed() { blocks.swapAt(i, Int(rng.next() % UInt64(i + 1))) }
    let random = blocks.prefix(5).map { $0 * 1_000 + Int64(rng.next() % 998) }
    let target = try destination.open(schema: nil)
    try target.writeSync { w in
        _ = try w.update("Item", key: 0, set: ["name": "changed"])
        _ = try w.update("Item", key: .int(2 * (n - 1)), set: ["ratio": 0.5])
        _ = try w.update("Item", key: .int(2 * random[0]), set: ["ratio": -0.0])
        _ = try w.update("Item", key: .int(2 * random[1]), set: ["name": "e\u{301}"])
        _ = try w.update("Item", key: .int(2 * random[2]), set: ["payload": .bytes([])])
        _ = try w.delete("Item", key: .int(2 * random[3]))
        try w.insert(["id": .int(2 * random[4] + 1), "name": "between", "ratio": 1.0], into: "Item")
        try w.insert(["id": -1, "name": "before the first", "ratio": 1.0], into: "Item")
        try w.insert(["id": .int(2 * n + 7), "name": "after the last", "ratio": 1.0], into: "Item")
        try w.insert(["key": "only in the destination"], into: "Empty")
    }
    try target.close()
    // The source side of two of them, so that the item compare sees them as differences.
    let sourceStore = try source.open(schema: nil)
    try sourceStore.writeSync { w in
        _ = try w.update("Item", key: .int(2 * random[0]), set: ["ratio": 0.0])
        _ = try w.update("Item", key: .int(2 * random[1]), set: ["name": "\u{E9}"])
    }
    try sourceStore.close()

    let items = try Migrator.verify(from: source, to: destination)
    let ranges = try Migrator.verify(from: source, to: destination, options: MigrationOptions(checksum: true))
    #expect(items.differences == 10, "\(items.sampleDifferences)")
    #expect(ranges.differences == items.differences)
    #expect(ranges.sampleDifferences == items.sampleDifferences)
    #expect(ranges.entities.map(\.differences) == items.entities.map(\.differences))
    #expect(ranges.entities.map(\.itemsVerified) == items.entities.map(\.itemsVerified))
    // The first range (a changed item and one before it), the last, the one after it, and
    // one per random item: only these are read again.
    let differing = ranges.entities.first?.rangesDiffering ?? 0
    #expect(differing == 8, "ranges compared item by item: \(differing)")
    #expect(ranges.entities.last?.rangesDiffering == 1, "the empty entity's one range after the last key")
    print("checksum verify of \(n) items: \(ranges.entities.first?.rangesCompared ?? 0) ranges, \(differing) "
        + "differing; \(String(format: "%.2f", ranges.seconds)) s against \(String(format: "%.2f", items.seconds)) s "
        + "item by item")
}

/// The command: `verify --checksum` prints the ranges and the same differences, and exits 1.
@Test func verifyChecksumOnTheCommandLineExitsOneAndListsTheDifferences() throws {
    let dir = try TemporaryDirectory()
    let (source, destination) = try copiedStores(dir, .sqlite, .sqlite, count: 2_500)
    let ok = try runCLI(["verify", "--from", source.description, "--to", destination.description,
                                  "--checksum", "--progress", "none"])
    #expect(ok.status == 0, "\(ok.output)")
    #expect(ok.output.contains("every item equals the source snapshot"))
    let target = try destination.open(schema: nil)
    try target.writeSync { _ = try $0.delete("Item", key: 4_000) }
    try target.close()
    let bad = try runCLI(["verify", "--from", source.description, "--to", destination.description,
                                   "--checksum", "--progress", "none"])
    #expect(bad.status == 1)
    #expect(bad.output.contains("Item[4000]: missing in the destination"), "\(bad.output)")
    #expect(bad.output.contains("1 of 5 ranges differed"), "\(bad.output)")
}

/// The item verify reads the destination's pages ahead on a worker thread while it compares the
/// source's: with pages of 1, 3, 7 and 1,000 items, over random edits on either side (items only
/// in the source, only in the destination, changed, runs of them at page edges), it reports
/// exactly the keys that differ, in key order, and the checksum verify the same.
@Test(arguments: [(StoreKind.sqlite, StoreKind.lmdb), (.lmdb, .sqlite), (.memory, .lmdb)])
func anItemVerifyReadingAheadReportsExactlyTheDifferingKeysForEveryPageSize(_ from: StoreKind, _ to: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let n: Int64 = 2_000
    let (source, destination) = try copiedStores(dir, from, to, count: n)
    defer { for l in [source, destination] where l.kind == .memory { try? l.destroy() } }
    var rng = SplitMix64(seed: 0x5EED)
    var differing = Set<Int64>()
    let target = try destination.open(schema: nil)
    let original = try source.open(schema: nil)
    for _ in 0..<60 {
        let i = Int64(rng.next() % UInt64(n))
        let run = Int64(rng.next() % 4)  // up to four neighbours, across page edges
        for id in i..<min(n, i + 1 + run) {
            switch rng.next() % 4 {
            case 0: try target.writeSync { _ = try $0.delete("Item", key: .int(2 * id)) }
            case 1: try original.writeSync { _ = try $0.delete("Item", key: .int(2 * id)) }
            case 2: try target.writeSync { _ = try $0.save(["id": .int(2 * id + 1), "name": "extra", "ratio": 0.0], into: "Item") }
            default:
                var changed = checksumItem(id)
                changed["name"] = "changed"
                try target.writeSync { [changed] in try $0.save(changed, into: "Item") }
            }
        }
    }
    let mine = try original.read { try $0.fetch(FetchRequest("Item")) }
    let theirs = try target.read { try $0.fetch(FetchRequest("Item")) }
    try original.close()
    try target.close()
    let left = Dictionary(uniqueKeysWithValues: mine.map { ($0["id"], $0) })
    let right = Dictionary(uniqueKeysWithValues: theirs.map { ($0["id"], $0) })
    for key in Set(left.keys).union(right.keys) where left[key] != right[key] {
        if case .int(let id) = key { differing.insert(id) }
    }
    #expect(!differing.isEmpty)
    for batchSize: PositiveInt in [1, 3, 7, 1_000] {
        let report = try Migrator.verify(from: source, to: destination, options: MigrationOptions(batchSize: batchSize))
        let checksum = try Migrator.verify(from: source, to: destination,
                                           options: MigrationOptions(batchSize: batchSize, checksum: true))
        #expect(report.differences == differing.count, "pages of \(batchSize)")
        #expect(checksum.differences == differing.count, "pages of \(batchSize), by checksum")
        // The samples (the first 20) name the first differing keys, in key order.
        let expected = differing.sorted().prefix(20).map { "Item[\($0)]" }
        let named = report.sampleDifferences.map { String($0.prefix { $0 != ":" }) }
        #expect(named == Array(expected), "pages of \(batchSize): \(report.sampleDifferences.prefix(3))")
        #expect(checksum.sampleDifferences == report.sampleDifferences, "pages of \(batchSize)")
    }
}

/// The checksum verify reads the destination on a worker thread that follows the source's
/// ranges; a verify stopped partway (or whose source pass fails) ends that worker too, instead
/// of leaving it waiting for ranges that never come.
@Test func aChecksumVerifyStoppedPartwayEndsItsDestinationPass() throws {
    let dir = try TemporaryDirectory()
    let (source, destination) = try copiedStores(dir, .sqlite, .lmdb, count: 10_000)
    for stopAfter in [0, 1, 5, 50] {
        var asked = 0
        #expect(throws: MigrationInterrupted.self, "stopped after \(stopAfter) checks") {
            try Migrator.verify(from: source, to: destination, options: MigrationOptions(batchSize: 100, checksum: true),
                                shouldStop: {
                                    asked += 1
                                    return asked > stopAfter
                                })
        }
    }
    // The run after them finds the stores equal.
    let report = try Migrator.verify(from: source, to: destination, options: MigrationOptions(checksum: true))
    #expect(report.differences == 0 && report.verified)
}

#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import StoreMigration
import Testing

/// Every item of every entity, in key order.
private func contents(_ location: StoreLocation) throws -> [String: [Record]] {
    let store = try location.open(schema: nil)
    defer { try? store.close() }
    return try store.read { r in
        try Dictionary(uniqueKeysWithValues: store.schema.entities.map { ($0.name, try r.fetch(FetchRequest($0.name))) })
    }
}

/// The suite's fixture items plus values at their edges (``Fixtures/writeEdgeValues(into:)``),
/// and what PostgreSQL's text and COPY's text format treat specially: U+0001 (the escape's
/// own byte), NUL twice, tabs, line breaks, backslashes, `\N`.
private func writeEdges(_ location: StoreLocation) throws {
    let store = try location.open(schema: Fixtures.schema)
    defer { try? store.close() }
    try Fixtures.load(Fixtures.items(150, seed: 4), into: store)
    try Fixtures.writeEdgeValues(into: store)
    try store.writeSync { w in
        // COPY's text format: tabs, line breaks, backslashes and its null marker as text.
        for (i, name) in ["tab\there", "line\nbreak\r", "back\\slash", "\\N", "\\x00", "\u{1}\u{2}"].enumerated() {
            try w.insert(["id": .int(Int64(100_010 + i)), "name": .string(name), "label": .string(name)], into: "Item")
        }
        for key in ["a\u{1}", "a\u{0}\u{0}", "tab\there", "line\nbreak\r", "back\\slash", "\\N", "\\x00"] {
            try w.insert(["key": .string(key), "value": .int(Int64(key.utf8.count)), "note": .string(key)], into: "Keyed")
        }
    }
}

@Test(arguments: [StoreKind.sqlite, .lmdb, .memory, .jsonl])
func everyBackendMigratesIntoPostgreSQLAndBackItemForItem(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    func location(_ kind: StoreKind, _ name: String) -> StoreLocation {
        kind == .memory ? StoreLocation(kind: .memory, path: "\(dir.url.lastPathComponent)-\(name)")
            : StoreLocation(kind: kind, path: dir.url.appendingPathComponent("\(name).\(kind.rawValue)").path)
    }
    let postgres = StoreLocation(kind: "postgres",
                                 path: String(PostgresTestServer.location(dir.url.path).description.dropFirst(9)))
    let source = location(kind == .jsonl ? .sqlite : kind, "source")
    let back = location(kind, "back")
    defer { for l in [source, back] where l.kind == .memory { try? l.destroy() } }
    try writeEdges(source)
    var from = source
    if kind == .jsonl {
        from = location(.jsonl, "file")
        _ = try Migrator.copy(from: source, to: from)
    }
    // Batches of 80 go by COPY (Item: 160 items, the edge values in the second), short ones by INSERT.
    let there = try Migrator.copy(from: from, to: postgres, options: MigrationOptions(batchSize: 80))
    #expect(try contents(source)["Item"]?.count == 160)
    #expect(there.verified && there.differences == 0)
    let returned = try Migrator.copy(from: postgres, to: back)
    #expect(returned.verified && returned.differences == 0)
    let original = try contents(source)
    #expect(try contents(postgres) == original)
    #expect(try contents(back) == original)
    #expect(try Migrator.verify(from: back, to: postgres).differences == 0)
    // Doubles bit for bit.
    let ratios = { (l: StoreLocation) in
        try contents(l)["Item"]!.map { record -> UInt64? in
            if case .double(let d) = record["ratio"] { return d.bitPattern }
            return nil
        }
    }
    #expect(try ratios(postgres) == ratios(source))
    try postgres.destroy()
}
#endif

@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import SQLiteStore
import Testing

/// Every kind of value, each attribute but the key optional or not, and a unique index.
private let fieldsSchema = Schema(entities: [EntitySchema("Item", primaryKey: "id", attributes: [
    Attribute("id", .int), Attribute("name", .string), Attribute("score", .double),
    Attribute("payload", .bytes, optional: true), Attribute("seen", .date, optional: true),
    Attribute("tag", .uuid, optional: true), Attribute("done", .bool), Attribute("note", .string, optional: true),
], indexes: [Index("byTag", on: ["tag"], unique: true)])])

private let names = ["id", "name", "score", "payload", "seen", "tag", "done", "note"]

private func int(_ value: Value) -> Int64? {
    if case .int(let i) = value { return i }
    return nil
}

/// A record of the schema's attributes with random edge values: in the schema's order (what
/// SQLite takes as it is, ``SQLiteTransaction/insertRecordFields(_:in:)``) or in another order,
/// with now and then a value the store converts (an int for a double) or refuses (a null, a
/// NaN, a text for an int), or a name out of its place or misspelt.
private func randomRecord(_ id: Int64, using rng: inout some RandomNumberGenerator) -> (Record, [(String, Value)]) {
    let texts = ["", "a", "é", String(repeating: "x", count: 200), "tab\tline\nend", "\u{1F600}"]
    func text() -> Value { .string(texts.randomElement(using: &rng)!) }
    var pairs: [(String, Value)] = [
        ("id", .int(id)),
        ("name", text()),
        ("score", [Value.double(-0.0), .double(1e300), .double(Double(id) / 7), .int(id)].randomElement(using: &rng)!),
        ("payload", [Value.null, .bytes([]), .bytes((0..<Int.random(in: 1...300, using: &rng)).map { UInt8(truncatingIfNeeded: $0) })]
            .randomElement(using: &rng)!),
        ("seen", [Value.null, .date(Timestamp(microsecondsSinceEpoch: .min)), .date(Timestamp(microsecondsSinceEpoch: id))]
            .randomElement(using: &rng)!),
        ("tag", Bool.random(using: &rng) ? .null : .uuid(UUID())),
        ("done", .bool(Bool.random(using: &rng))),
        ("note", Bool.random(using: &rng) ? .null : text()),
    ]
    switch Int.random(in: 0..<20, using: &rng) {
    case 0: pairs[1].1 = .null
    case 1: pairs[2].1 = .double(.nan)
    case 2: pairs[0].1 = .string("\(id)")
    case 3: pairs.reverse()
    // Two attributes of one type in each other's place, and a name the entity does not have in
    // an attribute's place: as many names as the entity, not its names in its order.
    case 4: pairs.swapAt(1, 7)
    case 5: pairs[3].0 = "paylod"
    default: break
    }
    return (Record(pairs: pairs), pairs)
}

/// Records inserted one by one on SQLite (most of them in the schema's order, which SQLite binds
/// from their values as they are) store exactly what the normalized record holds, with a row
/// sum that checks; a record whose value must be converted is stored converted, and one with a
/// value the store refuses, a taken key or a taken unique value fails with the error the
/// normalized record's insert gives, storing nothing.
@Test func recordsInsertedFromTheirValuesStoreWhatTheNormalizedRecordHolds() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("store.sqlite")
    let store = try SQLiteStore(path: path, schema: fieldsSchema)
    let entity = try #require(fieldsSchema.entity(named: "Item"))
    var rng = SystemRandomNumberGenerator()
    var expected: [Int64: Record] = [:]
    var (stored, refused) = (0, 0)
    for id in Int64(1)...600 {
        var (record, pairs) = randomRecord(id, using: &rng)
        // Now and then a taken key, or the unique tag of an item stored before.
        if id % 50 == 0, let taken = expected.keys.min() { record = Record(pairs: pairs.map { $0.0 == "id" ? ($0.0, .int(taken)) : $0 }) }
        if id % 40 == 0, let tagged = expected.values.first(where: { $0["tag"] != .null }) {
            record = Record(pairs: pairs.map { $0.0 == "tag" ? ($0.0, tagged["tag"]) : $0 })
        }
        let reference: Result<Record, StoreError> = Result { () throws(StoreError) in try entity.normalize(record) }
        do {
            try store.writeSync { try $0.insert(record, into: "Item") }
            guard case .success(let normalized) = reference else {
                Issue.record("\(record) was stored, which normalize refuses")
                continue
            }
            let key = try #require(int(normalized["id"]))
            #expect(expected[key] == nil, "\(record) stored over a taken key")
            expected[key] = normalized
            stored += 1
        } catch let error as StoreError {
            refused += 1
            switch reference {
            case .failure(let normalizeError):
                #expect(error.code == normalizeError.code && "\(error)" == "\(normalizeError)", "\(record)")
            case .success(let normalized):
                // A valid record refused: its key or its unique tag was taken.
                let keyTaken = expected[int(normalized["id"]) ?? -1] != nil
                #expect(keyTaken ? error.code == .keyExists : error.code == .uniqueViolation, "\(error) for \(record)")
            }
        }
    }
    #expect(stored > 400 && refused > 30, "\(stored) stored, \(refused) refused")
    let fetched = try store.read { try $0.fetch(FetchRequest("Item")) }
    #expect(fetched.count == expected.count)
    for record in fetched {
        let key = try #require(int(record["id"]))
        #expect(record == expected[key], "item \(key)")
        for name in names { #expect(record[name] == expected[key]?[name], "item \(key)'s \(name)") }
    }
    try store.close()
    #expect(try SQLiteStore.integrityCheck(path: path) == "ok")
}

import DataStoreAPI
import Foundation

/// Versioned schemas: every step kind, failures that leave the store unchanged, the history,
/// and a seeded random sequence of schema changes and writes, each compared with
/// ``UpgradeOracle``.
enum SchemaUpgradeCases {
    /// A version-1 store with items in every entity, closed; and the oracle holding the same.
    static func prepared(_ c: ConformanceContext, name: String = "store") throws -> UpgradeOracle {
        var oracle = UpgradeOracle(schema: Fixtures.schema)
        let store = try c.open(name: name)
        let items = Fixtures.items(60)
        var keyed: [Record] = []
        var idents: [Record] = []
        for i in 0..<20 {
            keyed.append(["key": .string("k\(i)"), "value": .int(Int64(i % 5)),
                          "note": i % 3 == 0 ? .null : .string("n\(i % 4)")])
        }
        for i in 0..<10 {
            idents.append(["id": .uuid(UUID(uuid: (UInt8(i * 25), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))),
                           "payload": i % 2 == 0 ? .bytes([UInt8(i), 0, 255]) : .null])
        }
        try store.writeSync { w in
            for item in items { try w.insert(item, into: "Item") }
            for item in keyed { try w.insert(item, into: "Keyed") }
            for item in idents { try w.insert(item, into: "Ident") }
        }
        try store.close()
        for item in items { oracle.insert(item.values, into: "Item") }
        for item in keyed { oracle.insert(item.values, into: "Keyed") }
        for item in idents { oracle.insert(item.values, into: "Ident") }
        return oracle
    }

    /// Opens the store with the next version, whose steps are `steps`, and checks the result
    /// against the oracle (then again after a reopen without upgrades). When the oracle
    /// expects the steps to fail, expects `failure` and checks that the store is unchanged.
    static func migrate(_ c: ConformanceContext, _ oracle: inout UpgradeOracle, _ steps: [SchemaStep],
                        failure: StoreError.Code? = nil, naming: String? = nil, name: String = "store") throws {
        var next = oracle
        let succeeds = steps.allSatisfy { next.apply($0) }
        next.schema.version = oracle.schema.version + 1
        var upgrades = SchemaUpgrades()
        upgrades.version(next.schema.version, steps.map { .step($0) })
        let what = steps.map(\.description).joined(separator: ", ")
        if let failure {
            c.expect(!succeeds, "the oracle agrees that '\(what)' fails")
            c.expectError(failure, naming: naming, "for \(what)") {
                _ = try c.open(next.schema, name: name, upgrades: upgrades)
            }
            do {
                _ = try c.open(next.schema, name: name, upgrades: upgrades)
            } catch let error as StoreError {
                c.expect(!error.message.contains("\n"), "a one-line error: \(error.message)")
            }
            let unchanged = try c.open(oracle.schema, name: name)
            try oracle.check(unchanged, c, "after the failed '\(what)'")
            try unchanged.close()
            return
        }
        c.expect(succeeds, "the oracle applies '\(what)'")
        let store = try c.open(next.schema, name: name, upgrades: upgrades)
        try next.check(store, c, what)
        let history = try store.schemaHistory().last
        c.expectEqual(history?.toVersion, next.schema.version, "the history records version \(next.schema.version)")
        c.expectEqual(history?.steps, steps.map(\.description), "the history lists the steps")
        try store.close()
        let reopened = try c.open(next.schema, name: name)
        try next.check(reopened, c, "\(what), reopened")
        try reopened.close()
        oracle = next
    }

    static func addAndRemoveEntities(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        let note = EntitySchema("Note", primaryKey: "id", attributes: [
            Attribute("id", .string), Attribute("text", .string, optional: true),
        ], indexes: [Index("byText", on: ["text"], unique: true)])
        try migrate(c, &oracle, [.addEntity(note), .removeEntity("Ident")])
        let store = try c.open(oracle.schema)
        try store.writeSync { try $0.insert(["id": "a", "text": "x"], into: "Note") }
        c.expectError(.uniqueViolation, "a new entity's unique index holds") {
            try store.writeSync { try $0.insert(["id": "b", "text": "x"], into: "Note") }
        }
        try store.close()
        oracle.insert(["id": "a", "text": "x"], into: "Note")
        try migrate(c, &oracle, [.addEntity(note)], failure: .invalidArgument, naming: "Note")
    }

    static func renameEntityKeepsItemsAndIndexes(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        try migrate(c, &oracle, [.renameEntity(from: "Keyed", to: "Pair"), .renameEntity(from: "Item", to: "Thing")])
        try migrate(c, &oracle, [.renameEntity(from: "Pair", to: "Thing")], failure: .invalidArgument,
                    naming: "Thing")
        try migrate(c, &oracle, [.renameEntity(from: "Missing", to: "Other")], failure: .unknownEntity,
                    naming: "Missing")
    }

    static func addAttributesOptionalAndWithDefaults(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        try migrate(c, &oracle, [
            .addAttribute(entity: "Item", attribute: Attribute("extra", .int, optional: true)),
            .addAttribute(entity: "Item", attribute: Attribute("rank", .int, default: .int(7))),
            .addAttribute(entity: "Item", attribute: Attribute("motto", .string, default: .string("it's \u{0}here"))),
            .addAttribute(entity: "Item", attribute: Attribute("plain", .string, default: .string("don't"))),
            .addAttribute(entity: "Keyed", attribute: Attribute("weight", .double, default: .double(-0.0))),
            .addAttribute(entity: "Keyed", attribute: Attribute("tag", .bytes, optional: true, default: .bytes([0, 255]))),
            .addAttribute(entity: "Ident", attribute: Attribute("seen", .date, default: .date(
                Timestamp(microsecondsSinceEpoch: -1)))),
            .addAttribute(entity: "Ident", attribute: Attribute("flag", .bool, default: .bool(true))),
            .addAttribute(entity: "Ident", attribute: Attribute("other", .uuid, default: .uuid(UUID(uuid:
                (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255))))),
        ])
        let store = try c.open(oracle.schema)
        try store.writeSync { try $0.insert(["key": "new"], into: "Keyed") }
        c.expectEqual(try store.read { try $0.get("Keyed", key: "new")?["weight"] }, .double(-0.0),
                      "the default applies to new writes")
        try store.close()
        c.expectError(.invalidArgument, naming: "default", "for a required attribute without a default") {
            var upgrades = SchemaUpgrades()
            let bad = Attribute("needed", .int)
            upgrades.version(oracle.schema.version + 1, .addAttribute(entity: "Item", attribute: bad))
            var schema = oracle.schema
            schema.version += 1
            schema.entities[schema.entities.firstIndex { $0.name == "Item" }!].attributes.append(bad)
            _ = try c.open(schema, upgrades: upgrades)
        }
    }

    static func removeAndRenameAttributes(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        try migrate(c, &oracle, [
            .removeAttribute(entity: "Item", name: "label"),
            .renameAttribute(entity: "Item", from: "name", to: "title"),
            .renameAttribute(entity: "Item", from: "id", to: "itemID"),
            .renameAttribute(entity: "Keyed", from: "value", to: "amount"),
            .removeAttribute(entity: "Keyed", name: "note"),
        ])
        try migrate(c, &oracle, [.removeAttribute(entity: "Item", name: "score")], failure: .invalidArgument,
                    naming: "byScore")
        try migrate(c, &oracle, [.removeAttribute(entity: "Item", name: "itemID")], failure: .invalidArgument,
                    naming: "primary key")
        try migrate(c, &oracle, [.removeIndex(entity: "Item", name: "byScore"),
                                 .removeAttribute(entity: "Item", name: "score")])
    }

    static func changeTypeConvertsEveryValue(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        try migrate(c, &oracle, [
            .changeType(entity: "Item", attribute: "score", to: .double),
            .changeType(entity: "Item", attribute: "flag", to: .int),
            .changeType(entity: "Item", attribute: "when", to: .int),
            .changeType(entity: "Item", attribute: "ratio", to: .string),
            .changeType(entity: "Item", attribute: "ref", to: .string),
            .changeType(entity: "Keyed", attribute: "value", to: .string),
        ])
        try migrate(c, &oracle, [
            .changeType(entity: "Item", attribute: "score", to: .int),
            .changeType(entity: "Keyed", attribute: "value", to: .int, optional: true),
            .changeType(entity: "Item", attribute: "when", to: .date),
        ])
    }

    /// Values at the edges of their domain convert and come back unchanged on every backend:
    /// ints to doubles wherever the double is exact (`Int64.min` is, 2^53 is no bound), dates
    /// at both ends of the Int64 microsecond range to text (ISO 8601's expanded years) and back,
    /// whole seconds with their microseconds field, uuids and bools to text and back.
    static func conversionsAtTheEdgesOfTheDomainComeBack(_ c: ConformanceContext) throws {
        var store = try c.open()
        let scores: [Int64] = [.min, -(1 << 62), -9_007_199_254_740_994, -1, 0, 9_007_199_254_740_994, 1 << 60]
        let dates: [Int64] = [.min, .max, -1_000_000, 0, 1_700_000_000_000_000, 1_700_000_000_123_456]
        let refs = [UUID(bytes: [UInt8](repeating: 0, count: 16)), UUID(bytes: [UInt8](repeating: 0xFF, count: 16))]
        var originals: [Record] = []
        try store.writeSync { w in
            for (n, score) in scores.enumerated() {
                var item = Fixtures.items(1)[0]
                item["id"] = .int(Int64(n + 1))
                item["code"] = .null
                item["score"] = .int(score)
                item["when"] = .date(Timestamp(microsecondsSinceEpoch: dates[n % dates.count]))
                item["ref"] = refs[n % refs.count].map(Value.uuid) ?? .null
                item["flag"] = .bool(n % 2 == 0)
                try w.insert(item, into: "Item")
                originals.append(try w.get("Item", key: .int(Int64(n + 1))) ?? [:])
            }
        }
        try store.close()
        var entities = Fixtures.schema.entities
        entities[0].attributes[3] = Attribute("score", .double, optional: true)
        entities[0].attributes[5] = Attribute("flag", .string, optional: true)
        entities[0].attributes[7] = Attribute("when", .string, optional: true)
        entities[0].attributes[8] = Attribute("ref", .string, optional: true)
        var upgrades = SchemaUpgrades()
        upgrades.version(2, [.step(.changeType(entity: "Item", attribute: "score", to: .double)),
                               .step(.changeType(entity: "Item", attribute: "flag", to: .string)),
                               .step(.changeType(entity: "Item", attribute: "when", to: .string)),
                               .step(.changeType(entity: "Item", attribute: "ref", to: .string))])
        store = try c.open(Schema(version: 2, entities: entities), upgrades: upgrades)
        let converted = try store.read { r in try r.fetch(FetchRequest("Item")) }
        try store.close()
        c.expectEqual(converted.map(\.["score"]), scores.map { .double(Double($0)) })
        c.expectEqual(converted.prefix(dates.count).map(\.["when"]),
                      ["-290308-12-21T19:59:05.224192Z", "+294247-01-10T04:00:54.775807Z",
                       "1969-12-31T23:59:59.000000Z", "1970-01-01T00:00:00.000000Z", "2023-11-14T22:13:20.000000Z",
                       "2023-11-14T22:13:20.123456Z"])

        upgrades.version(3, [.step(.changeType(entity: "Item", attribute: "score", to: .int)),
                               .step(.changeType(entity: "Item", attribute: "flag", to: .bool)),
                               .step(.changeType(entity: "Item", attribute: "when", to: .date)),
                               .step(.changeType(entity: "Item", attribute: "ref", to: .uuid))])
        store = try c.open(Schema(version: 3, entities: Fixtures.schema.entities), upgrades: upgrades)
        defer { try? store.close() }
        let back = try store.read { r in try r.fetch(FetchRequest("Item")) }
        c.expectEqual(back, originals, "every value back as it was")
    }

    static func aValueThatDoesNotConvertFailsNamingItAndChangesNothing(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        try migrate(c, &oracle, [.changeType(entity: "Item", attribute: "name", to: .int)], failure: .invalidValue,
                    naming: "does not convert to int")
        try migrate(c, &oracle, [.changeType(entity: "Item", attribute: "label", to: .string, optional: false)],
                    failure: .invalidValue, naming: "becomes required")
        try migrate(c, &oracle, [.changeType(entity: "Item", attribute: "blob", to: .double)],
                    failure: .invalidArgument, naming: "no conversion")
        try migrate(c, &oracle, [.changeType(entity: "Item", attribute: "id", to: .string)],
                    failure: .invalidArgument, naming: "primary key")
    }

    static func addAndRemoveIndexes(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        try migrate(c, &oracle, [
            .addIndex(entity: "Item", index: Index("byRatio", on: ["ratio", "name"])),
            .removeIndex(entity: "Item", name: "byName"),
            .addIndex(entity: "Keyed", index: Index("byNote", on: ["note"])),
            .removeIndex(entity: "Item", name: "byCode"),
            .addIndex(entity: "Item", index: Index("byCode", on: ["code", "id"], unique: true)),
        ])
        let store = try c.open(oracle.schema)
        let found = try store.read { try $0.count(FetchRequest("Item", filter: .compare("ratio", .equal, .double(0)))) }
        let expected = oracle.items["Item"]!.values.filter {
            if case .double(let d) = $0["ratio"]!, d == 0 { return true }
            return false
        }.count
        c.expectEqual(found, expected, "the new index answers -0.0 == 0.0 like the oracle")
        try store.close()
    }

    static func aUniqueIndexOverDuplicatesListsThemAndChangesNothing(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        try migrate(c, &oracle, [.addIndex(entity: "Keyed", index: Index("uniqueValue", on: ["value"], unique: true))],
                    failure: .uniqueViolation, naming: "Keyed[")
        var schema = oracle.schema.withVersion(2)
        schema.entities[1].indexes.append(Index("uniqueValue", on: ["value"], unique: true))
        var upgrades = SchemaUpgrades()
        upgrades.version(2, .addIndex(entity: "Keyed", index: Index("uniqueValue", on: ["value"], unique: true)))
        do {
            _ = try c.open(schema, upgrades: upgrades)
            c.expect(false, "duplicates under a new unique index must fail")
        } catch let error as StoreError {
            // value i % 5 over 20 items: 5 groups of 4.
            c.expectEqual(error.items.count, 20, "every conflicting item is listed: \(error.message)")
            c.expect(error.message.contains("Keyed[\"k0\"]") && error.message.contains("Keyed[\"k5\"]"),
                     "the message names the items: \(error.message)")
        }
    }

    static func customStepsTransformItemsAndWriteTheStore(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        var item = oracle.schema.entity(named: "Item")!
        item.attributes.append(Attribute("shout", .string, optional: true))
        var next = oracle
        next.schema.version = 2
        next.schema.entities[0] = item
        for (key, record) in next.items["Item"]! {
            guard case .int(let id) = key, id >= 0 else {
                next.items["Item"]![key] = nil
                continue
            }
            var updated = record
            if case .string(let name) = record["name"]! { updated["shout"] = .string(name.uppercased()) }
            else { updated["shout"] = .null }
            next.items["Item"]![key] = updated
        }
        next.insert(["key": "made-by-step", "value": .int(99)], into: "Keyed")
        var upgrades = SchemaUpgrades()
        upgrades.version(2, [
            .transformItems(entity: "Item", to: item, name: "drop negative ids, shout names") { record in
                guard case .int(let id) = record["id"], id >= 0 else { return nil }
                var updated = record.values
                if case .string(let name) = record["name"] { updated["shout"] = .string(name.uppercased()) }
                return Record(updated)
            },
            .custom("count items into Keyed") { w in
                let count = try w.count(FetchRequest("Item"))
                try w.insert(["key": "made-by-step", "value": .int(count > 0 ? 99 : -1)], into: "Keyed")
            },
        ])
        let store = try c.open(next.schema, upgrades: upgrades)
        try next.check(store, c, "custom steps")
        c.expectEqual(try store.schemaHistory().last?.steps,
                      ["transform items of Item: drop negative ids, shout names", "custom: count items into Keyed"])
        try store.close()
        oracle = next
        var bad = SchemaUpgrades()
        bad.version(3, [.transformItems(entity: "Item", to: nil, name: "change keys") { record in
            var changed = record.values
            changed["id"] = .int(1_000_000)
            return Record(changed)
        }])
        c.expectError(.invalidArgument, naming: "may not change an item's key") {
            _ = try c.open(oracle.schema.withVersion(3), upgrades: bad)
        }
        var throwing = SchemaUpgrades()
        throwing.version(3, [.custom("fails") { _ in throw StoreError(.conflict, "the app's step gave up") }])
        c.expectError(.conflict, naming: "gave up") { _ = try c.open(oracle.schema.withVersion(3), upgrades: throwing) }
        let unchanged = try c.open(oracle.schema)
        try oracle.check(unchanged, c, "after failed custom steps")
    }

    static func versionsApplyInOrderInOneOpenOrMany(_ c: ConformanceContext) throws {
        var stepwise = try prepared(c, name: "stepwise")
        let direct = try prepared(c, name: "direct")
        let v2: [SchemaStep] = [.addAttribute(entity: "Keyed", attribute: Attribute("rank", .int, default: .int(1)))]
        let v3: [SchemaStep] = [.changeType(entity: "Keyed", attribute: "rank", to: .string),
                                .renameAttribute(entity: "Keyed", from: "rank", to: "grade")]
        try migrate(c, &stepwise, v2, name: "stepwise")
        try migrate(c, &stepwise, v3, name: "stepwise")
        var upgrades = SchemaUpgrades()
        upgrades.version(3, v3.map { .step($0) })
        upgrades.version(2, v2.map { .step($0) })
        let store = try c.open(stepwise.schema, name: "direct", upgrades: upgrades)
        try stepwise.check(store, c, "v1 to v3 in one open")
        let history = try store.schemaHistory()
        c.expectEqual(history.map(\.fromVersion), [1])
        c.expectEqual(history.map(\.toVersion), [3])
        c.expectEqual(history.first?.steps, (v2 + v3).map(\.description))
        _ = direct
    }

    static func aNewerStoreIsRefusedNamingBothVersions(_ c: ConformanceContext) throws {
        let oracle = try prepared(c)
        var upgrades = SchemaUpgrades()
        upgrades.version(2, .addAttribute(entity: "Keyed", attribute: Attribute("x", .int, optional: true)))
        var v2 = oracle.schema.withVersion(2)
        v2.entities[1].attributes.append(Attribute("x", .int, optional: true))
        try c.open(v2, upgrades: upgrades).close()
        c.expectError(.newerSchemaVersion, naming: "version 2") { _ = try c.open(oracle.schema) }
        c.expectError(.newerSchemaVersion, naming: "version 1") { _ = try c.open(oracle.schema) }
        let still = try c.open(v2)
        c.expectEqual(still.schema, v2, "the newer store is unchanged")
    }

    static func unexplainedDifferencesAreListedAndChangeNothing(_ c: ConformanceContext) throws {
        let oracle = try prepared(c)
        var changed = oracle.schema.withVersion(2)
        changed.entities[0].attributes.removeAll { $0.name == "label" }
        changed.entities[0].attributes[changed.entities[0].attributes.firstIndex { $0.name == "score" }!].type = .string
        changed.entities[1].attributes.append(Attribute("extra", .int))
        do {
            _ = try c.open(changed)
            c.expect(false, "an unexplained difference must fail")
        } catch let error as StoreError {
            c.expectEqual(error.code, .schemaMismatch)
            for words in ["attribute 'Item.label' was removed", "attribute 'Item.score' changed type from int to string",
                          "attribute 'Keyed.extra' is new", "step: remove attribute Item.label", "needs a default"] {
                c.expect(error.message.contains(words), "the message lists '\(words)': \(error.message)")
            }
        }
        var sameVersion = oracle.schema
        sameVersion.entities[2].attributes.append(Attribute("more", .int, optional: true))
        c.expectError(.schemaMismatch, naming: "same version 1") { _ = try c.open(sameVersion) }
        var newKey = oracle.schema.withVersion(2)
        newKey.entities[1].primaryKey = "note"
        newKey.entities[1].attributes[2].isOptional = false
        c.expectError(.schemaMismatch, naming: "primary key of 'Keyed'") { _ = try c.open(newKey) }
        let unchanged = try c.open(oracle.schema)
        try oracle.check(unchanged, c, "after refused opens")
        c.expectEqual(try unchanged.schemaHistory().count, 0, "nothing was migrated")
    }

    /// Random valid steps, one version at a time, with random writes in between.
    static func randomSchemaChangesAndWritesMatchTheOracle(_ c: ConformanceContext) throws {
        var oracle = try prepared(c)
        var rng = SplitMix64(seed: 12)
        let types: [ValueType] = [.int, .double, .string, .bool, .date]
        for round in 0..<10 {
            var steps: [SchemaStep] = []
            var planned = oracle
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                let entity = planned.schema.entities[Int(rng.next() % UInt64(planned.schema.entities.count))]
                let plain = entity.attributes.filter { a in
                    a.name != entity.primaryKey && !entity.indexes.contains { $0.attributes.contains(a.name) }
                }
                let candidate: SchemaStep
                switch rng.next() % 7 {
                case 0:
                    let type = types[Int(rng.next() % UInt64(types.count))]
                    candidate = .addAttribute(entity: entity.name, attribute: Attribute("a\(round)", type, optional: true))
                case 1:
                    candidate = .addAttribute(entity: entity.name, attribute: Attribute("d\(round)", .int,
                                                                                       default: .int(Int64(round))))
                case 2 where !plain.isEmpty:
                    candidate = .removeAttribute(entity: entity.name, name: plain[Int(rng.next() % UInt64(plain.count))].name)
                case 3 where !plain.isEmpty:
                    candidate = .renameAttribute(entity: entity.name, from: plain[Int(rng.next() % UInt64(plain.count))].name,
                                                 to: "r\(round)")
                case 4 where !plain.isEmpty:
                    let attribute = plain[Int(rng.next() % UInt64(plain.count))]
                    let target: ValueType = attribute.type == .string ? .string : .string
                    candidate = .changeType(entity: entity.name, attribute: attribute.name, to: target)
                case 5 where !plain.isEmpty:
                    candidate = .addIndex(entity: entity.name, index: Index("i\(round)", on: [plain[0].name]))
                default:
                    candidate = .renameEntity(from: entity.name, to: "E\(round)")
                }
                var trial = planned
                if trial.apply(candidate) {
                    planned = trial
                    steps.append(candidate)
                }
            }
            try migrate(c, &oracle, steps)
            // Writes between versions: insert, update, delete on the first entity with int keys.
            let store = try c.open(oracle.schema)
            let target = oracle.schema.entities[0]
            if target.primaryKeyAttribute.type == .int {
                let keys = Array(oracle.items[target.name, default: [:]].keys)
                let victim: Value? = keys.isEmpty ? nil : keys[Int(rng.next() % UInt64(keys.count))]
                var record: [String: Value] = [target.primaryKey: .int(Int64(10_000 + round))]
                for attribute in target.attributes where !attribute.isOptional && attribute.defaultValue == nil
                    && attribute.name != target.primaryKey {
                    record[attribute.name] = sample(attribute.type, round)
                }
                try store.writeSync { [record] w in
                    if let victim { _ = try w.delete(target.name, key: victim) }
                    try w.insert(Record(record), into: target.name)
                }
                if let victim { oracle.items[target.name]![victim] = nil }
                oracle.insert(record, into: target.name)
            }
            try oracle.check(store, c, "round \(round) after writes")
            try store.close()
        }
    }

    static func sample(_ type: ValueType, _ n: Int) -> Value {
        switch type {
        case .bool: return .bool(n % 2 == 0)
        case .int: return .int(Int64(n))
        case .double: return .double(Double(n) / 4)
        case .string: return .string("s\(n)")
        case .bytes: return .bytes([UInt8(n % 256)])
        case .date: return .date(Timestamp(microsecondsSinceEpoch: Int64(n)))
        case .uuid: return .uuid(UUID(uuid: (UInt8(n % 256), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9)))
        }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("SchemaUpgrade", "addAndRemoveEntities", addAndRemoveEntities),
        ConformanceCase("SchemaUpgrade", "conversionsAtTheEdgesOfTheDomainComeBack",
                        conversionsAtTheEdgesOfTheDomainComeBack),
        ConformanceCase("SchemaUpgrade", "renameEntityKeepsItemsAndIndexes", renameEntityKeepsItemsAndIndexes),
        ConformanceCase("SchemaUpgrade", "addAttributesOptionalAndWithDefaults", addAttributesOptionalAndWithDefaults),
        ConformanceCase("SchemaUpgrade", "removeAndRenameAttributes", removeAndRenameAttributes),
        ConformanceCase("SchemaUpgrade", "changeTypeConvertsEveryValue", changeTypeConvertsEveryValue),
        ConformanceCase("SchemaUpgrade", "aValueThatDoesNotConvertFailsNamingItAndChangesNothing",
                        aValueThatDoesNotConvertFailsNamingItAndChangesNothing),
        ConformanceCase("SchemaUpgrade", "addAndRemoveIndexes", addAndRemoveIndexes),
        ConformanceCase("SchemaUpgrade", "aUniqueIndexOverDuplicatesListsThemAndChangesNothing",
                        aUniqueIndexOverDuplicatesListsThemAndChangesNothing),
        ConformanceCase("SchemaUpgrade", "customStepsTransformItemsAndWriteTheStore",
                        customStepsTransformItemsAndWriteTheStore),
        ConformanceCase("SchemaUpgrade", "versionsApplyInOrderInOneOpenOrMany", versionsApplyInOrderInOneOpenOrMany),
        ConformanceCase("SchemaUpgrade", "aNewerStoreIsRefusedNamingBothVersions",
                        aNewerStoreIsRefusedNamingBothVersions),
        ConformanceCase("SchemaUpgrade", "unexplainedDifferencesAreListedAndChangeNothing",
                        unexplainedDifferencesAreListedAndChangeNothing),
        ConformanceCase("SchemaUpgrade", "randomSchemaChangesAndWritesMatchTheOracle",
                        randomSchemaChangesAndWritesMatchTheOracle),
    ]
}

extension Schema {
    /// The same schema with another version number.
    func withVersion(_ version: Int) -> Schema {
        var copy = self
        copy.version = version
        return copy
    }
}

@_spi(Backend) import DataStoreAPI
import Foundation
import Synchronization

/// The change feed and live queries: the same transactions, tokens and deliveries on every
/// backend.
enum ChangeFeedCases {
    /// What the feed must say about one transaction, computed from a model of the store.
    struct Expected: Equatable, CustomStringConvertible {
        var cleared: [String] = []
        var items: [ItemChange] = []
        var description: String { "cleared \(cleared) items \(items)" }
    }

    /// A model of `Keyed` and `Item` that computes each transaction's net effect independently
    /// of the recorder: which keys existed before, which exist after, which the transaction
    /// touched, and whether it emptied an entity holding items it did not touch.
    struct Model {
        var tables: [String: [Value: Record]] = ["Keyed": [:], "Item": [:]]
        private var before: [String: [Value: Record]] = [:]
        private var touched: [String: [Value]] = [:]
        private var cleared: Set<String> = []

        mutating func begin() {
            before = tables
            touched = [:]
            cleared = []
        }

        mutating func touch(_ entity: String, _ key: Value) {
            if !(touched[entity] ?? []).contains(key) { touched[entity, default: []].append(key) }
        }

        mutating func put(_ entity: String, _ key: Value, _ record: Record) {
            touch(entity, key)
            tables[entity]![key] = record
        }

        mutating func delete(_ entity: String, _ key: Value) -> Bool {
            guard tables[entity]![key] != nil else { return false }
            touch(entity, key)
            tables[entity]![key] = nil
            return true
        }

        mutating func deleteAll(_ entity: String) -> Int {
            let count = tables[entity]!.count
            guard count > 0 else { return 0 }
            let untouched = tables[entity]!.keys.contains { !(touched[entity] ?? []).contains($0) }
            if untouched {
                cleared.insert(entity)
                touched[entity] = []
                before[entity] = [:]
            } else {
                for key in tables[entity]!.keys { touch(entity, key) }
            }
            tables[entity] = [:]
            return count
        }

        func expected() -> Expected? {
            var result = Expected()
            for entity in ["Item", "Keyed"] {
                if cleared.contains(entity) { result.cleared.append(entity) }
                let keys = (touched[entity] ?? []).sorted { KeyOrder.before($0, $1) }
                for key in keys {
                    switch (before[entity]?[key] != nil, tables[entity]![key] != nil) {
                    case (false, true): result.items.append(ItemChange(entity: entity, key: key, kind: .inserted))
                    case (true, true): result.items.append(ItemChange(entity: entity, key: key, kind: .updated))
                    case (true, false): result.items.append(ItemChange(entity: entity, key: key, kind: .deleted))
                    case (false, false): break
                    }
                }
            }
            return result.items.isEmpty && result.cleared.isEmpty ? nil : result
        }
    }

    static func feedListsEveryTransactionOnceInCommitOrderAsAModelPredicts(_ c: ConformanceContext) throws {
        let store = try c.open()
        let start = try store.currentChangeToken()
        c.expectEqual(start, ChangeToken(store: nil, sequence: 0), "a new store's token")
        var model = Model()
        var expected: [Expected] = []
        var rng = SplitMix64(seed: 13)
        func item(_ id: Int64) -> Record {
            ["id": .int(id), "name": .string("n\(id)"), "label": .null, "score": .int(Int64(rng.next() % 3)),
             "ratio": .null, "flag": .null, "blob": .null, "when": .null, "ref": .null, "code": .null]
        }
        for round in 0..<80 {
            model.begin()
            let fails = rng.next() % 11 == 0
            var trial = model
            do {
                try store.writeSync { w in
                    // Every tenth transaction is long: its keys come in and out of order and
                    // are touched again (the recorder keeps an in-order run sorted without
                    // hashing, and switches to hashing at the first key out of order).
                    let ops = 1 + Int(rng.next() % (round % 10 == 9 ? 40 : 6))
                    for op in 0..<ops {
                        let key = Value.string("k\(rng.next() % 12)")
                        let id = Int64(rng.next() % 10) - 5
                        switch rng.next() % 9 {
                        case 0 where op == 0 && round % 3 == 0:
                            c.expectEqual(try w.deleteAll("Keyed"), trial.deleteAll("Keyed"))
                        case 0, 1:
                            if trial.tables["Keyed"]![key] == nil {
                                try w.insert(["key": key, "value": .int(Int64(round))], into: "Keyed")
                                trial.put("Keyed", key, [:])
                            }
                        case 2, 3:
                            try w.save(["key": key, "value": .int(Int64(op))], into: "Keyed")
                            trial.put("Keyed", key, [:])
                        case 4:
                            if trial.tables["Keyed"]![key] != nil {
                                try w.update("Keyed", key: key, set: ["note": .string("r\(round)")])
                                trial.put("Keyed", key, [:])
                            }
                        case 5:
                            c.expectEqual(try w.delete("Keyed", key: key), trial.delete("Keyed", key))
                        case 6:
                            try w.save(item(id), into: "Item")
                            trial.put("Item", .int(id), [:])
                        case 7:
                            c.expectEqual(try w.delete("Item", key: .int(id)), trial.delete("Item", .int(id)))
                        default:
                            // Deleting by request deletes item by item.
                            let doomed = try w.fetch(FetchRequest("Item", filter: .compare("score", .equal, .int(1))))
                            for record in doomed { _ = trial.delete("Item", record["id"]) }
                            c.expectEqual(try w.delete(FetchRequest("Item", filter: .compare("score", .equal, .int(1)))),
                                          doomed.count)
                        }
                    }
                    try w.setMetadata([UInt8(round % 256)], forKey: "app.round")
                    if fails { throw StoreError(.invalidArgument, "rolled back on purpose") }
                }
                model = trial
                if let transaction = model.expected() { expected.append(transaction) }
            } catch let error as StoreError where fails && error.message == "rolled back on purpose" {
                continue
            }
        }
        let feed = try store.changes(since: start, limit: 1_000)
        c.expectEqual(feed.count, expected.count, "one feed entry per committed transaction that changed items")
        c.expectEqual(feed.map(\.sequence), Array(1...UInt64(max(1, feed.count))).prefix(feed.count).map { $0 },
                      "dense sequence numbers from 1")
        for (got, want) in zip(feed, expected) {
            c.expectEqual(Expected(cleared: got.cleared, items: got.items), want, "transaction \(got.sequence)")
            c.expectEqual(got.overflowed, [])
        }
        c.expectEqual(try store.currentChangeToken().sequence, UInt64(expected.count))
        // Pages: reading two at a time gives the same list.
        var paged: [ChangeSet] = []
        var cursor = start
        while case let page = try store.changes(since: cursor, limit: 2), let last = page.last {
            paged += page
            cursor = last.token
        }
        c.expectEqual(paged, feed)
    }

    /// One transaction that writes twelve entities in turn (more than the recorder finds by name
    /// without an index) lists each entity once, in the UTF-8 order of the names (not the order
    /// they were written or declared in), each with its keys in order and its net effect.
    static func aTransactionOverManyEntitiesListsEachOnceInNameOrder(_ c: ConformanceContext) throws {
        let names = ["b", "C", "a9", "a10", "Zz", "c1", "A", "aa", "_x", "m1", "N1", "z"]
        let schema = Schema(entities: names.map {
            EntitySchema($0, primaryKey: "id", attributes: [Attribute("id", .int), Attribute("v", .int)])
        })
        let store = try c.open(schema)
        try store.writeSync { w in
            for name in names { try w.insert(["id": 5, "v": 0], into: name) }
        }
        let start = try store.currentChangeToken()
        try store.writeSync { w in
            // Three turns over every entity: the recorder meets each entity again after eleven
            // others each time.
            for name in names { try w.insert(["id": 2, "v": 1], into: name) }
            for (i, name) in names.enumerated() {
                try w.insert(["id": 1, "v": 1], into: name)
                if i % 3 == 0 { _ = try w.delete(name, key: 5) }
                if i % 3 == 1 { try w.save(["id": 5, "v": 7], into: name) }
            }
            for (i, name) in names.enumerated() {
                if i % 2 == 0 { _ = try w.delete(name, key: 2) } else { try w.save(["id": 2, "v": 3], into: name) }
            }
        }
        var want: [ItemChange] = []
        for (i, name) in names.enumerated().sorted(by: { Array($0.1.utf8).lexicographicallyPrecedes(Array($1.1.utf8)) }) {
            want.append(ItemChange(entity: name, key: 1, kind: .inserted))
            if i % 2 == 1 { want.append(ItemChange(entity: name, key: 2, kind: .inserted)) }
            if i % 3 == 0 { want.append(ItemChange(entity: name, key: 5, kind: .deleted)) }
            if i % 3 == 1 { want.append(ItemChange(entity: name, key: 5, kind: .updated)) }
        }
        let feed = try store.changes(since: start, limit: 10)
        c.expectEqual(feed.count, 1, "one entry for the transaction")
        c.expectEqual(feed.first?.items ?? [], want)
        c.expectEqual(feed.first?.cleared ?? ["?"], [])
        c.expectEqual(feed.first?.overflowed ?? ["?"], [])
    }

    static func concurrentWritersCommitOrderIsFeedOrder(_ c: ConformanceContext) async throws {
        let store = try c.open()
        let start = try store.currentChangeToken()
        try store.writeSync { try $0.insert(["key": "clock", "value": 0], into: "Keyed") }
        // Each transaction advances the clock and inserts an item named after the clock value
        // it saw, so the clock order is the commit order.
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for i in 0..<25 {
                        let body: @Sendable (WriteAccessor) throws -> Void = { w in
                            let now = try w.get("Keyed", key: "clock")!["value"]
                            guard case .int(let t) = now else { return }
                            try w.update("Keyed", key: "clock", set: ["value": .int(t + 1)])
                            try w.insert(["key": .string("t\(t + 1)"), "note": .string("w\(writer)-\(i)")], into: "Keyed")
                        }
                        if i % 2 == 0 { _ = try? store.writeSync(body) } else { _ = try? await store.writeAsync(body) }
                    }
                }
            }
        }
        let feed = try store.changes(since: start, limit: 1_000)
        c.expectEqual(feed.count, 101)
        for (n, transaction) in feed.dropFirst().enumerated() {
            c.expectEqual(transaction.items, [
                ItemChange(entity: "Keyed", key: "clock", kind: .updated),
                ItemChange(entity: "Keyed", key: .string("t\(n + 1)"), kind: .inserted),
            ].sorted { KeyOrder.before($0.key, $1.key) }, "transaction \(transaction.sequence)")
        }
    }

    static func tokensSurviveReopenAndEncoding(_ c: ConformanceContext) throws {
        var store = try c.open()
        try store.writeSync { try $0.insert(["key": "a"], into: "Keyed") }
        let token = try store.currentChangeToken()
        let decoded = try JSONDecoder().decode(ChangeToken.self, from: JSONEncoder().encode(token))
        c.expectEqual(decoded, token)
        try store.close()
        store = try c.open()
        c.expectEqual(try store.currentChangeToken(), token, "the head after reopening")
        try store.writeSync { try $0.insert(["key": "b"], into: "Keyed") }
        let after = try store.changes(since: decoded, limit: 10)
        c.expectEqual(after.map(\.items), [[ItemChange(entity: "Keyed", key: "b", kind: .inserted)]])
        c.expectEqual(after.first?.token.store, token.store)
        c.expectEqual(after.first?.sequence, token.sequence + 1)
        // A transaction that changes no item (metadata only, or nothing) gets no number.
        try store.writeSync { try $0.setMetadata([1], forKey: "app.x") }
        try store.writeSync { _ in }
        c.expectEqual(try store.currentChangeToken().sequence, token.sequence + 1)
        // Tokens of another store, or from the future, are refused by name.
        let other = try c.open(name: "other")
        try other.writeSync { try $0.insert(["key": "z"], into: "Keyed") }
        c.expectError(.invalidArgument, naming: "another store") {
            _ = try store.changes(since: try other.currentChangeToken(), limit: 1)
        }
        c.expectError(.invalidArgument, naming: "ahead") {
            _ = try store.changes(since: ChangeToken(store: token.store, sequence: 99), limit: 1)
        }
    }

    /// A write block that reads the feed sees it as it stood when the block began: its token is
    /// the head before it, and the commits before it are listed; after the block, its own commit
    /// is next.
    static func aWriteBlockReadsTheFeedAsItStoodBeforeIt(_ c: ConformanceContext) throws {
        let store = try c.open()
        let start = try store.currentChangeToken()
        for key in ["a", "b", "c"] {
            try store.writeSync { try $0.insert(["key": .string(key)], into: "Keyed") }
        }
        let before = try store.currentChangeToken()
        let (inside, listed) = try store.writeSync { w -> (ChangeToken, [ChangeSet]) in
            let read = (try w.changeToken(), try w.changes(since: start))
            try w.insert(["key": "d"], into: "Keyed")
            return read
        }
        c.expectEqual(inside, before, "the token inside the block")
        c.expectEqual(listed.map(\.items), ["a", "b", "c"].map { [ItemChange(entity: "Keyed", key: .string($0), kind: .inserted)] })
        c.expectEqual(listed.last?.token, before)
        let after = try store.changes(since: before, limit: 10)
        c.expectEqual(after.map(\.items), [[ItemChange(entity: "Keyed", key: "d", kind: .inserted)]])
    }

    static func tokensOlderThanTheRetentionExpireWithAClearError(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 5)) }
        var tokens: [ChangeToken] = [try store.currentChangeToken()]
        for i in 0..<10 {
            try store.writeSync { try $0.insert(["key": .string("k\(i)")], into: "Keyed") }
            tokens.append(try store.currentChangeToken())
        }
        c.expectEqual(tokens.last?.sequence, 10)
        // The feed holds transactions 6 to 10: a reader at 5 or later can go on, one at 4 cannot.
        c.expectEqual(try store.changes(since: tokens[5], limit: 100).map(\.sequence), [6, 7, 8, 9, 10])
        c.expectError(.changesExpired, naming: "expired") { _ = try store.changes(since: tokens[4], limit: 100) }
        c.expectError(.changesExpired) { _ = try store.changes(since: ChangeToken(store: nil, sequence: 0), limit: 1) }
        // Turning the feed off expires every token; turning it on again starts afresh.
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
        try store.writeSync { try $0.insert(["key": "off"], into: "Keyed") }
        c.expectError(.changesExpired, naming: "off") { _ = try store.changes(since: tokens[10], limit: 1) }
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings()) }
        let restarted = try store.currentChangeToken()
        c.expectError(.changesExpired) { _ = try store.changes(since: tokens[10], limit: 1) }
        try store.writeSync { try $0.insert(["key": "on"], into: "Keyed") }
        c.expectEqual(try store.changes(since: restarted, limit: 10).map(\.items),
                      [[ItemChange(entity: "Keyed", key: "on", kind: .inserted)]])
        c.expectEqual(try store.read { try $0.changeFeedSettings() }, ChangeFeedSettings())
        c.expectError(.invalidArgument, naming: "retention") {
            try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 0)) }
        }
        c.expectError(.invalidArgument, naming: "datastore.") {
            try store.writeSync { try $0.setMetadata([1], forKey: "datastore.feed") }
        }
    }

    /// The retention's bound is exact after every commit, though a backend may remove entries
    /// past it in batches: with a retention of 24 (entries removed 3 at a time), after each of
    /// 80 transactions the newest 24 can be followed and the one before them has expired; tokens
    /// that expired stay expired when the retention grows, and shrinking it takes effect at once.
    static func theRetentionBoundIsExactAfterEveryCommit(_ c: ConformanceContext) throws {
        let store = try c.open()
        let keep = 24
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: keep)) }
        var tokens: [ChangeToken] = [try store.currentChangeToken()]
        func expectWindow(_ oldest: Int, _ step: String) throws {
            let newest = tokens.count - 1
            c.expectEqual(try store.changes(since: tokens[oldest - 1], limit: 1_000).map(\.sequence),
                          (UInt64(oldest)...UInt64(newest)).map { $0 }, "followable after \(step)")
            c.expectEqual(try store.changes(since: tokens[oldest - 1], limit: 1_000).map { $0.items.map(\.key) },
                          (oldest...newest).map { [Value.string("k\($0)")] }, "entries after \(step)")
            if oldest >= 2 {
                c.expectError(.changesExpired, naming: "expired", "expired after \(step)") {
                    _ = try store.changes(since: tokens[oldest - 2], limit: 1)
                }
            }
        }
        for i in 1...80 {
            try store.writeSync { try $0.insert(["key": .string("k\(i)")], into: "Keyed") }
            tokens.append(try store.currentChangeToken())
            try expectWindow(max(1, i - keep + 1), "commit \(i)")
        }
        // Growing the retention does not bring back what had expired.
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 1_000)) }
        try expectWindow(80 - keep + 1, "growing the retention")
        try store.writeSync { try $0.insert(["key": "k81"], into: "Keyed") }
        tokens.append(try store.currentChangeToken())
        try expectWindow(80 - keep + 1, "a commit under the longer retention")
        // Shrinking it expires the older tokens at once, before any further commit.
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 5)) }
        try expectWindow(81 - 5 + 1, "shrinking the retention")
        try store.close()
        let reopened = try c.open()
        c.expectError(.changesExpired, naming: "expired", "expired after reopening") {
            _ = try reopened.changes(since: tokens[81 - 6], limit: 1)
        }
        c.expectEqual(try reopened.changes(since: tokens[81 - 5], limit: 10).map(\.sequence), [77, 78, 79, 80, 81])
    }

    /// The feed's state is stored as version 3, which ends with its checksum; a state of version
    /// 1 (what the toolkit wrote before it stopped rewriting the state at every commit) is read,
    /// and rewritten as 3 at the next recorded commit, the numbering going on; one of version 2
    /// (before the checksum) is read; a sealed state whose version byte changed is damage; a
    /// version it does not know is `incompatibleFormat`, naming the version, for a reader of the
    /// feed and for a writer, and the items stay readable.
    static func theFeedStateVersionIsCheckedAndUpgraded(_ c: ConformanceContext) throws {
        let store = try c.open()
        guard let engine = (store as? Store)?.engine else {
            c.expect(false, "the backend's store is not a Store")
            return
        }
        for i in 1...3 { try store.writeSync { try $0.insert(["key": .string("k\(i)")], into: "Keyed") } }
        let first = try store.currentChangeToken()
        func stateVersion() throws -> UInt8? { try engine.withReader { try $0.metadata(forKey: "datastore.feed") }?.first }
        /// The state as `version` wrote it: the same fields, without the sum the current version
        /// ends it with; or, `sealed`, with only its version byte changed.
        func setStateVersion(_ version: UInt8, sealed: Bool = false) throws {
            try engine.withWriter { writer in
                guard var bytes = try writer.metadata(forKey: "datastore.feed") else { return }
                bytes[0] = version
                if !sealed && bytes.count == 54 { bytes.removeLast(4) }
                try writer.setMetadata(bytes, forKey: "datastore.feed")
            }
        }
        c.expectEqual(try stateVersion(), 3, "a new feed's state")
        try setStateVersion(1)
        try store.writeSync { try $0.insert(["key": "k4"], into: "Keyed") }
        c.expectEqual(try stateVersion(), 3, "rewritten at the next recorded commit")
        c.expectEqual(try store.changes(since: ChangeToken(store: first.store, sequence: 1), limit: 10).map(\.sequence),
                      [2, 3, 4])
        let sealed = try engine.withReader { try $0.metadata(forKey: "datastore.feed") }
        // Version 4 with the sum of version 3: the sum, read first, finds the change (an unknown
        // version would otherwise be incompatibleFormat).
        try setStateVersion(4, sealed: true)
        c.expectError(.corrupt, naming: "feed's state is damaged", "a sealed state whose version byte changed") {
            _ = try store.changes(since: first, limit: 10)
        }
        try engine.withWriter { try $0.setMetadata(sealed, forKey: "datastore.feed") }
        try setStateVersion(2)
        c.expectEqual(try store.changes(since: ChangeToken(store: first.store, sequence: 1), limit: 10).map(\.sequence),
                      [2, 3, 4], "a state of version 2 (without its sum)")
        try setStateVersion(4)
        c.expectError(.incompatibleFormat, naming: "unknown version (4)", "reading the feed") {
            _ = try store.changes(since: first, limit: 10)
        }
        c.expectError(.incompatibleFormat, naming: "unknown version (4)", "writing") {
            try store.writeSync { try $0.insert(["key": "k5"], into: "Keyed") }
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 4)
    }

    /// Settings changed in a transaction that already wrote items hold after its commit, and
    /// the transaction is recorded (or not) by the settings it leaves; the transactions after
    /// it see them too (a store keeps the feed's state from one write to the next).
    static func settingsChangedAfterAWriteInTheSameTransactionHold(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "a"], into: "Keyed") }
        let before = try store.currentChangeToken()
        try store.writeSync { w in
            try w.insert(["key": "b"], into: "Keyed")
            try w.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 2))
        }
        c.expectEqual(try store.read { try $0.changeFeedSettings() }, ChangeFeedSettings(retainedTransactions: 2))
        c.expectEqual(try store.changes(since: before, limit: 10).map(\.items),
                      [[ItemChange(entity: "Keyed", key: "b", kind: .inserted)]])
        for key in ["c", "d", "e"] { try store.writeSync { try $0.insert(["key": .string(key)], into: "Keyed") } }
        c.expectError(.changesExpired, naming: "expired") { _ = try store.changes(since: before, limit: 10) }
        let last = try store.currentChangeToken()
        // Turned off after a write: nothing of that transaction is recorded, and every token expires.
        try store.writeSync { w in
            try w.insert(["key": "f"], into: "Keyed")
            try w.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false))
        }
        c.expectEqual(try store.read { try $0.changeFeedSettings() }.isEnabled, false)
        c.expectError(.changesExpired, naming: "off") { _ = try store.changes(since: last, limit: 10) }
        // Turned on again after a write: the feed starts after that transaction.
        try store.writeSync { w in
            try w.insert(["key": "g"], into: "Keyed")
            try w.setChangeFeedSettings(ChangeFeedSettings())
        }
        let restarted = try store.currentChangeToken()
        c.expectEqual(try store.changes(since: restarted, limit: 10).count, 0)
        try store.writeSync { try $0.insert(["key": "h"], into: "Keyed") }
        c.expectEqual(try store.changes(since: restarted, limit: 10).map(\.items),
                      [[ItemChange(entity: "Keyed", key: "h", kind: .inserted)]])
        try store.close()
        let reopened = try c.open()
        c.expectEqual(try reopened.read { try $0.changeFeedSettings() }, ChangeFeedSettings())
        c.expectEqual(try reopened.changes(since: restarted, limit: 10).map(\.items),
                      [[ItemChange(entity: "Keyed", key: "h", kind: .inserted)]])
    }

    /// Int keys inserted one by one in ascending order (a bulk load's, which the recorder
    /// appends after one comparison), then out of order, touched again, deleted and inserted
    /// again, inserted as a batch across the sign bit, and past the per-transaction limit: each
    /// transaction lists each key once, with its net effect, in key order.
    static func intKeysInsertedInAndOutOfOrderAppearOnceWithTheirNetEffect(_ c: ConformanceContext) throws {
        let store = try c.open()
        let start = try store.currentChangeToken()
        var rng = SplitMix64(seed: 29)
        func item(_ id: Int64) -> Record { Fixtures.item(id, using: &rng) }
        func inserted(_ ids: [Int64]) -> [ItemChange] {
            ids.map { ItemChange(entity: "Item", key: .int($0), kind: .inserted) }
        }
        try store.writeSync { w in
            for id in Int64(10)..<20 { try w.insert(item(id), into: "Item") }
            try w.insert(item(-3), into: "Item")
            try w.insert(item(25), into: "Item")
            try w.update("Item", key: .int(12), set: ["score": .int(1)])
            c.expectEqual(try w.delete("Item", key: .int(13)), true)
            try w.insert(item(14_000), into: "Item")
            c.expectEqual(try w.delete("Item", key: .int(14_000)), true)
            try w.insert(item(13), into: "Item")
        }
        try store.writeSync { w in
            c.expectEqual(try w.delete("Item", key: .int(10)), true)
            try w.insert(item(30), into: "Item")
            try w.insert(item(31), into: "Item")
            try w.insert(item(10), into: "Item")
            c.expectError(.keyExists, naming: "31") { try w.insert(item(31), into: "Item") }
        }
        try store.writeSync { w in
            try w.insert(contentsOf: [item(.min), item(-1), item(0), item(.max)], into: "Item")
        }
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(maxKeysPerTransaction: 3)) }
        try store.writeSync { w in for id in Int64(40)..<45 { try w.insert(item(id), into: "Item") } }
        try store.writeSync { w in for id in Int64(50)..<53 { try w.insert(item(id), into: "Item") } }
        let sets = try store.changes(since: start, limit: 10)
        c.expectEqual(sets.map(\.items), [
            inserted([-3] + Array(10..<20) + [25]),
            [ItemChange(entity: "Item", key: .int(10), kind: .updated)] + inserted([30, 31]),
            inserted([.min, -1, 0, .max]),
            [],
            inserted([50, 51, 52]),
        ])
        c.expectEqual(sets.map(\.overflowed), [[], [], [], ["Item"], []])
        c.expectEqual(try store.read { try $0.count(FetchRequest("Item")) }, 26)
    }

    static func deleteAllMergeAndLargeTransactionsAppearOnce(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(20), into: store)
        var token = try store.currentChangeToken()
        func next() throws -> [ChangeSet] {
            let sets = try store.changes(since: token, limit: 100)
            if let last = sets.last { token = last.token }
            return sets
        }
        // deleteAll of a full entity: cleared, with what the transaction added after it.
        try store.writeSync { w in
            try w.deleteAll("Item")
            try w.save(Fixtures.items(1)[0], into: "Item")
        }
        var sets = try next()
        c.expectEqual(sets.count, 1)
        c.expectEqual(sets.first?.cleared, ["Item"])
        c.expectEqual(sets.first?.items, [ItemChange(entity: "Item", key: Fixtures.items(1)[0]["id"], kind: .inserted)])
        // deleteAll of an empty entity changes nothing: no transaction.
        try store.writeSync { try $0.deleteAll("Ident") }
        c.expectEqual(try next().count, 0)
        // A merge is one transaction with the child's net changes; the child's own writes are
        // not in the feed until then.
        let child = try store.makeChild()
        try child.writeSync { w in
            try w.insert(["key": "c1"], into: "Keyed")
            try w.insert(["key": "c2"], into: "Keyed")
            _ = try w.delete("Keyed", key: "c2")
            try w.save(Fixtures.items(1)[0], into: "Item")
        }
        c.expectEqual(try next().count, 0, "the child's writes before the merge")
        try store.merge(child)
        sets = try next()
        c.expectEqual(sets.count, 1)
        c.expectEqual(sets.first?.items, [
            ItemChange(entity: "Item", key: Fixtures.items(1)[0]["id"], kind: .updated),
            ItemChange(entity: "Keyed", key: "c1", kind: .inserted),
        ])
        // A transaction past the per-transaction limit names the entity as overflowed.
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(maxKeysPerTransaction: 10)) }
        try store.writeSync { w in
            for i in 0..<15 { try w.insert(["key": .string("bulk\(i)")], into: "Keyed") }
            try w.insert(["id": .uuid(UUID()), "payload": .null], into: "Ident")
        }
        sets = try next()
        c.expectEqual(sets.count, 1)
        c.expectEqual(sets.first?.overflowed, ["Keyed"])
        c.expectEqual(sets.first?.items.map(\.entity), ["Ident"])
    }

    static func changeSequenceDeliversRecordedThenLiveTransactions(_ c: ConformanceContext) async throws {
        let store = try c.open()
        let start = try store.currentChangeToken()
        for i in 0..<3 { try store.writeSync { try $0.insert(["key": .string("r\(i)")], into: "Keyed") } }
        // The live writes and the reading run together, so that a failed write ends the wait
        // with its error rather than as a timeout.
        let received = try await within(c, seconds: 30) {
            try await withThrowingTaskGroup(of: [Value]?.self) { group in
                group.addTask {
                    try await Task.sleep(for: .milliseconds(50))
                    for i in 0..<3 {
                        _ = try await store.writeAsync { try $0.insert(["key": .string("l\(i)")], into: "Keyed") }
                    }
                    return nil
                }
                group.addTask {
                    var keys: [Value] = []
                    for try await set in store.changes(since: start) {
                        keys += set.items.map(\.key)
                        if keys.count == 6 { break }
                    }
                    return keys
                }
                var keys: [Value] = []
                for try await result in group { if let result { keys = result } }
                return keys
            }
        }
        c.expectEqual(received, ["r0", "r1", "r2", "l0", "l1", "l2"])
        // A sequence from an expired token throws instead of skipping.
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 1)) }
        try store.writeSync { try $0.insert(["key": "x"], into: "Keyed") }
        do {
            for try await _ in store.changes(since: start) { break }
            c.expect(false, "an expired token must throw")
        } catch let error as StoreError {
            c.expectEqual(error.code, .changesExpired)
        }
        // Closing the store ends a waiting sequence (or one that starts only after the close, on
        // a loaded machine).
        let head = try store.currentChangeToken()
        let waiting = Task {
            var count = 0
            for try await _ in store.changes(since: head) { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(50))
        try store.close()
        c.expectEqual(try await within(c, seconds: 30) { try await waiting.value }, 0)
    }

    static func observersDeliverOnlyChangedResultsAndEndOnTheFinalState(_ c: ConformanceContext) async throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "a", "value": 20], into: "Keyed") }
        let request = FetchRequest("Keyed", filter: .compare("value", .greater, .int(10)), sort: [.ascending("value")])
        var iterator = store.observe(request).makeAsyncIterator()
        let first = try await within(c, seconds: 30) { [iterator] in
            var copy = iterator
            return (try await copy.next(), copy)
        }
        iterator = first.1
        c.expectEqual(first.0?.map(\.["key"]), ["a"])
        // Unrelated commits (another entity; a change outside the filter) deliver nothing: the
        // next delivery is the relevant commit's.
        try store.writeSync { try $0.save(Fixtures.items(1)[0], into: "Item") }
        try store.writeSync { try $0.insert(["key": "small", "value": 1], into: "Keyed") }
        try store.writeSync { try $0.insert(["key": "b", "value": 30], into: "Keyed") }
        let second = try await within(c, seconds: 30) { [iterator] in
            var copy = iterator
            return (try await copy.next(), copy)
        }
        iterator = second.1
        c.expectEqual(second.0?.map(\.["key"]), ["a", "b"])
        // A burst of commits from another task: deliveries may coalesce, each differs from the
        // one before, and the last is the final state.
        let burst = Task {
            for i in 0..<40 {
                try store.writeSync { try $0.save(["key": "b", "value": .int(Int64(31 + i))], into: "Keyed") }
            }
        }
        try await burst.value
        let final = try store.read { try $0.fetch(request) }
        let delivered = try await within(c, seconds: 30) { [iterator] in
            var copy = iterator
            var seen: [[Record]] = []
            while let results = try await copy.next() {
                if let last = seen.last { c.expect(last != results, "a delivery equal to the one before") }
                seen.append(results)
                if results == final { break }
            }
            return seen
        }
        c.expect(delivered.count >= 1 && delivered.count <= 40, "\(delivered.count) deliveries for 40 commits")
        c.expectEqual(delivered.last, final)
    }

    static func observerCallbacksThatReadAndWriteTheStoreNeverHang(_ c: ConformanceContext) async throws {
        let store = try c.open()
        let log = Mutex<[Int]>([])
        let failures = Mutex<[String]>([])
        let handle = store.observe(FetchRequest("Keyed", sort: [.ascending("key")]), onError: { error in
            failures.withLock { $0.append("\(error)") }
        }) { results in
            // Reads and writes from the callback: it runs outside any block of the store.
            do {
                let count = try store.read { try $0.count(FetchRequest("Keyed")) }
                log.withLock { $0.append(count) }
                if count == 1 {
                    try store.writeSync { try $0.insert(["key": "from-observer"], into: "Keyed") }
                }
                if count == 2 {
                    // The background writer's form with a completion: a failed write is reported,
                    // not waited for.
                    store.writeAsync({ try $0.insert(["key": "async-from-observer"], into: "Keyed") }) { result in
                        if case .failure(let error) = result { failures.withLock { $0.append("\(error)") } }
                    }
                }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        try store.writeSync { try $0.insert(["key": "a"], into: "Keyed") }
        try await within(c, seconds: 30) {
            while log.withLock({ $0.last }) != 3 && failures.withLock({ $0.isEmpty }) {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        handle.cancel()
        await handle.wait()
        c.expectEqual(failures.withLock { $0 }, [])
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 3)
        // A write block that starts an observation and reads the feed does not wait for itself.
        try store.writeSync { w in
            _ = store.observe(FetchRequest("Keyed"))
            _ = try w.changeToken()
            _ = try w.changes(since: ChangeToken(store: nil, sequence: 0), limit: 1)
        }
        // Inside a block, the store's blocking calls fail with reentrantCall rather than hang.
        c.expectError(.reentrantCall) { try store.writeSync { _ in try store.writeSync { _ in } } }
        // A callback observation started inside a write block writes once that block ended.
        let wrote = Mutex(false)
        let inner = try store.writeSync { _ in
            store.observe(FetchRequest("Keyed"), onError: { error in failures.withLock { $0.append("\(error)") } }) { _ in
                do {
                    if !wrote.withLock({ $0 }) {
                        try store.writeSync { try $0.insert(["key": "started-in-a-block"], into: "Keyed") }
                        wrote.withLock { $0 = true }
                    }
                } catch {
                    failures.withLock { $0.append("callback of an observation started in a block: \(error)") }
                }
            }
        }
        try await within(c, seconds: 30) {
            while !wrote.withLock({ $0 }) && failures.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        }
        inner.cancel()
        c.expectEqual(failures.withLock { $0 }, [])
        c.expectEqual(try store.read { try $0.get("Keyed", key: "started-in-a-block") } != nil, true)
    }

    static func typedAndDiffObservationsDescribeEachDelivery(_ c: ConformanceContext) async throws {
        let store = try c.open(Pancake.schema)
        var pancakes = (0..<6).map(Pancake.sample)
        try store.writeSync { w in for p in pancakes { try w.insert(p) } }
        var typed = store.observe(Pancake.self).makeAsyncIterator()
        var updates = store.observeUpdates(FetchRequest("Pancake", sort: Pancake.defaultSort)).makeAsyncIterator()
        let firstTyped = try await typed.next()
        let firstUpdate = try await updates.next()
        let sorted = try store.read { try $0.fetch(Pancake.self) }
        c.expectEqual(firstTyped, sorted)
        c.expectEqual(firstUpdate?.diff.inserted, Array(0..<6))
        var previous = firstUpdate?.results ?? []
        var rng = SplitMix64(seed: 5)
        for round in 0..<12 {
            try store.writeSync { w in
                switch round % 4 {
                case 0:
                    let p = Pancake.sample(100 + round)
                    pancakes.append(p)
                    try w.insert(p)
                case 1:
                    let i = Int(rng.next() % UInt64(pancakes.count))
                    pancakes[i].rating = Int(rng.next() % 7)
                    try w.save(pancakes[i])
                case 2:
                    let i = Int(rng.next() % UInt64(pancakes.count))
                    _ = try w.delete(pancakes.remove(at: i))
                default:
                    let i = Int(rng.next() % UInt64(pancakes.count))
                    pancakes[i].flavor += "!"
                    try w.save(pancakes[i])
                }
            }
            guard let update = try await updates.next() else { break }
            c.expectEqual(update.results, try store.read { try $0.fetch(FetchRequest("Pancake", sort: Pancake.defaultSort)) })
            c.expect(!update.diff.isEmpty, "round \(round): a delivery with an empty diff")
            c.expectEqual(apply(update.diff, from: previous, to: update.results), update.results.map(\.["id"]),
                          "round \(round): the diff turns the old keys into the new ones")
            previous = update.results
        }
    }

    /// Applies a diff the way a table view does: removals and moves out by old position, then
    /// insertions and moves in by new position.
    static func apply(_ diff: ResultsDiff, from old: [Record], to new: [Record]) -> [Value] {
        let gone = Set(diff.removed + diff.moved.map(\.from))
        var keys = old.enumerated().filter { !gone.contains($0.offset) }.map { $0.element["id"] }
        let arriving = (diff.inserted + diff.moved.map(\.to)).sorted()
        for position in arriving where position <= keys.count { keys.insert(new[position]["id"], at: position) }
        return keys
    }

    static func aSchemaMigrationExpiresEarlierTokens(_ c: ConformanceContext) throws {
        var store = try c.open()
        try store.writeSync { try $0.insert(["key": "a"], into: "Keyed") }
        let token = try store.currentChangeToken()
        try store.close()
        var entities = Fixtures.schema.entities
        entities[1].attributes.append(Attribute("extra", .int, optional: true))
        let v2 = Schema(version: 2, entities: entities)
        var upgrades = SchemaUpgrades()
        upgrades.version(2, [.step(.addAttribute(entity: "Keyed", attribute: Attribute("extra", .int, optional: true)))])
        store = try c.open(v2, upgrades: upgrades)
        c.expectError(.changesExpired) { _ = try store.changes(since: token, limit: 1) }
        let fresh = try store.currentChangeToken()
        try store.writeSync { try $0.save(["key": "a", "extra": 1], into: "Keyed") }
        c.expectEqual(try store.changes(since: fresh, limit: 5).map(\.items),
                      [[ItemChange(entity: "Keyed", key: "a", kind: .updated)]])
    }

    /// Runs `body`, failing the case (instead of hanging the suite) after `seconds`.
    static func within<T: Sendable>(_ c: ConformanceContext, seconds: Double,
                                    _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let gate = Gate<T>()
        return try await withCheckedThrowingContinuation { continuation in
            gate.set(continuation)
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                gate.resume(result)
            }
            Task {
                // Seconds in which this task ran on time count; a second that took more than two
                // did not (Swift's cooperative pool, two threads on a 2-core machine, was held by
                // other tests' blocking calls, and `body` could not run either). A hang is still
                // reported, after `seconds` of a responsive pool or thirty times that in all (a
                // run of the whole suite once held the pool for five minutes).
                let clock = ContinuousClock()
                let began = clock.now
                let deadline = began + .seconds(seconds * 30)
                var live = 0.0
                while live < seconds && clock.now < deadline {
                    let start = clock.now
                    try? await Task.sleep(for: .seconds(1))
                    if clock.now - start < .seconds(2) { live += 1 }
                }
                // Both numbers: a hang shows `seconds` responsive ones, a starved pool few of them.
                let wall = Int((clock.now - began).components.seconds)
                gate.resume(.failure(StoreError(.busy, "timed out after \(Int(live)) s of a responsive cooperative pool "
                    + "(\(wall) s in all): the store or an observer hung")))
            }
        }
    }

    /// A continuation resumed once, by whichever comes first.
    final class Gate<T: Sendable>: Sendable {
        private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)
        func set(_ k: CheckedContinuation<T, any Error>) { continuation.withLock { $0 = k } }
        func resume(_ result: Result<T, any Error>) { continuation.withLock { $0.take() }?.resume(with: result) }
    }

    /// The iterator's next element, within 30 seconds of running time (``within(_:seconds:_:)``).
    static func next<I: AsyncIteratorProtocol & Sendable>(_ iterator: inout I, _ c: ConformanceContext) async throws
        -> I.Element? where I.Element: Sendable
    {
        let (element, advanced) = try await within(c, seconds: 30) { [iterator] in
            var copy = iterator
            return (try await copy.next(), copy)
        }
        iterator = advanced
        return element
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Change feed", "feedListsEveryTransactionOnceInCommitOrderAsAModelPredicts",
                        feedListsEveryTransactionOnceInCommitOrderAsAModelPredicts),
        ConformanceCase("Change feed", "aTransactionOverManyEntitiesListsEachOnceInNameOrder",
                        aTransactionOverManyEntitiesListsEachOnceInNameOrder),
        ConformanceCase("Change feed", "concurrentWritersCommitOrderIsFeedOrder", concurrentWritersCommitOrderIsFeedOrder),
        ConformanceCase("Change feed", "tokensSurviveReopenAndEncoding", tokensSurviveReopenAndEncoding),
        ConformanceCase("Change feed", "aWriteBlockReadsTheFeedAsItStoodBeforeIt", aWriteBlockReadsTheFeedAsItStoodBeforeIt),
        ConformanceCase("Change feed", "tokensOlderThanTheRetentionExpireWithAClearError",
                        tokensOlderThanTheRetentionExpireWithAClearError),
        ConformanceCase("Change feed", "theRetentionBoundIsExactAfterEveryCommit", theRetentionBoundIsExactAfterEveryCommit),
        ConformanceCase("Change feed", "theFeedStateVersionIsCheckedAndUpgraded", theFeedStateVersionIsCheckedAndUpgraded),
        ConformanceCase("Change feed", "settingsChangedAfterAWriteInTheSameTransactionHold",
                        settingsChangedAfterAWriteInTheSameTransactionHold),
        ConformanceCase("Change feed", "deleteAllMergeAndLargeTransactionsAppearOnce",
                        deleteAllMergeAndLargeTransactionsAppearOnce),
        ConformanceCase("Change feed", "intKeysInsertedInAndOutOfOrderAppearOnceWithTheirNetEffect",
                        intKeysInsertedInAndOutOfOrderAppearOnceWithTheirNetEffect),
        ConformanceCase("Change feed", "changeSequenceDeliversRecordedThenLiveTransactions",
                        changeSequenceDeliversRecordedThenLiveTransactions),
        ConformanceCase("Change feed", "aSchemaMigrationExpiresEarlierTokens", aSchemaMigrationExpiresEarlierTokens),
        ConformanceCase("Live queries", "observersDeliverOnlyChangedResultsAndEndOnTheFinalState",
                        observersDeliverOnlyChangedResultsAndEndOnTheFinalState),
        ConformanceCase("Live queries", "observerCallbacksThatReadAndWriteTheStoreNeverHang",
                        observerCallbacksThatReadAndWriteTheStoreNeverHang),
        ConformanceCase("Live queries", "typedAndDiffObservationsDescribeEachDelivery",
                        typedAndDiffObservationsDescribeEachDelivery),
    ]
}

/// The canonical key order (by encoded bytes), written out for the suite's own models.
enum KeyOrder {
    static func before(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case let (.int(x), .int(y)): return x < y
        case let (.string(x), .string(y)): return Array(x.utf8).lexicographicallyPrecedes(Array(y.utf8))
        case let (.uuid(x), .uuid(y)):
            return withUnsafeBytes(of: x.uuid) { Array($0) }.lexicographicallyPrecedes(withUnsafeBytes(of: y.uuid) { Array($0) })
        default: return false
        }
    }
}

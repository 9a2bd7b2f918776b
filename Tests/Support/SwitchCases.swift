import DataStoreAPI
import Foundation
import StoreMigration
import Testing

/// The cases every pair of backends of a switching store runs (``SwitchingStore``): the app's
/// view across the cutover (live queries, the feed, typed models, child stores), relaunches,
/// cancel and rollback.
public enum SwitchCases {
    public typealias Pair = (old: StoreLocation, new: StoreLocation)

    public static let all: [(name: String, run: @Sendable (Pair) async throws -> Void)] = [
        ("aLiveQueryDeliversTheFinalStateAcrossTheCutoverWithoutDuplicates", aLiveQueryDeliversTheFinalStateAcrossTheCutover),
        ("theFeedGoesOnFromTheCutoverWithTheSameTokens", theFeedGoesOnFromTheCutoverWithTheSameTokens),
        ("typedModelsAndChildStoresWorkAcrossTheCutover", typedModelsAndChildStoresWorkAcrossTheCutover),
        ("aRelaunchGoesOnWhereTheLastOneStopped", aRelaunchGoesOnWhereTheLastOneStopped),
        ("cancelThenRestartThenRollBack", cancelThenRestartThenRollBack),
        ("mistakesGetAnErrorNamingWhatIsWrongAndChangeNothing", mistakesGetAnErrorNamingWhatIsWrong),
    ]

    /// A note: the typed model of these cases.
    public struct Note: DataObject, Equatable {
        public static let entityName = "Note"
        public static let primaryKey = "id"
        public var id: Int64
        public var title: String
        public var words: Int64
    }

    public static let schema = Schema(version: 1, entities: [
        EntitySchema("Note", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("title", .string), Attribute("words", .int),
        ], indexes: [Index("byWords", on: ["words"])]),
    ])

    /// An app's store before the switch, holding `count` notes.
    static func seed(_ old: StoreLocation, count: Int) throws {
        let store = try old.open(schema: schema)
        defer { try? store.close() }
        var id: Int64 = 0
        while id < Int64(count) {
            try store.writeSync { writer in
                for _ in 0..<500 where id < Int64(count) {
                    try writer.insert(Note(id: id, title: "note \(id)", words: id % 100))
                    id += 1
                }
            }
        }
    }

    static func allNotes(_ store: any DataStore) throws -> [Note] {
        try store.read { try $0.fetch(Note.self, sortedBy: [.ascending("id")]) }
    }

    static func aLiveQueryDeliversTheFinalStateAcrossTheCutover(_ pair: Pair) async throws {
        try seed(pair.old, count: 3_000)
        let store = try SwitchingStore(from: pair.old, to: pair.new, schema: schema,
                                       policy: SwitchingStore.Policy(cutover: .manual))
        defer { try? store.close() }
        let watched = FetchRequest("Note", filter: Field("words") == .int(7), sort: [.ascending("id")])
        let deliveries = Deliveries()
        // The observation runs on a thread of its own: in the whole suite, tests that block
        // hold the cooperative pool's threads for minutes at a time.
        let executor = ThreadExecutor()
        defer { executor.stop() }
        let observation = Task(executorPreference: executor) {
            do {
                for try await results in store.observe(watched) { deliveries.add(results) }
            } catch {
                deliveries.fail(error)
            }
        }
        defer { observation.cancel() }
        try await waitFor("the first delivery") { deliveries.count > 0 }
        for i in 0..<30 {
            try store.writeSync { try $0.insert(Note(id: 10_000 + Int64(i), title: "before", words: 7)) }
        }
        try store.switchNow(timeout: .seconds(120))
        #expect(store.phase == .switched)
        for i in 0..<30 {
            try store.writeSync { try $0.insert(Note(id: 20_000 + Int64(i), title: "after", words: 7)) }
        }
        try store.writeSync { _ = try $0.delete("Note", key: .int(7)) }
        let final = try store.read { try $0.fetch(watched) }
        try await waitFor("the final state") { deliveries.last == final }
        #expect(deliveries.error == nil, "\(String(describing: deliveries.error))")
        let all = deliveries.all
        // No duplicate: each delivery differs from the one before; and each holds one of the states
        // the store went through (the 'after' notes only ever grow, then note 7 goes).
        #expect(zip(all, all.dropFirst()).allSatisfy { $0 != $1 }, "a delivery repeated the one before")
        let afterCounts = all.map { $0.filter { $0["title"] == .string("after") }.count }
        #expect(zip(afterCounts, afterCounts.dropFirst()).allSatisfy { $0 <= $1 }, "a delivery went back: \(afterCounts)")
        let expected = 30 + 30 + 30 - 1
        #expect(all.last?.count == expected)
        // Closing the store ends the observation; then its thread may stop.
        try store.close()
        await observation.value
    }

    static func theFeedGoesOnFromTheCutoverWithTheSameTokens(_ pair: Pair) async throws {
        try seed(pair.old, count: 1_000)
        let store = try SwitchingStore(from: pair.old, to: pair.new, schema: schema,
                                       policy: SwitchingStore.Policy(cutover: .manual))
        defer { try? store.close() }
        for i in 0..<5 { try store.writeSync { try $0.insert(Note(id: 5_000 + Int64(i), title: "b", words: 1)) } }
        let beforeCutover = try store.currentChangeToken()
        try store.switchNow(timeout: .seconds(120))
        // The new store's feed goes on from the old one's: the same token, no entry in between.
        #expect(try store.currentChangeToken() == beforeCutover)
        #expect(try store.changes(since: beforeCutover, limit: 100).isEmpty)
        for i in 0..<7 { try store.writeSync { try $0.insert(Note(id: 6_000 + Int64(i), title: "a", words: 1)) } }
        let sets = try store.changes(since: beforeCutover, limit: 100)
        #expect(sets.map(\.sequence) == (1...7).map { beforeCutover.sequence + UInt64($0) })
        #expect(sets.flatMap(\.items).map(\.key) == (0..<7).map { .int(6_000 + Int64($0)) })
        #expect(sets.allSatisfy { $0.token.store == beforeCutover.store })
    }

    static func typedModelsAndChildStoresWorkAcrossTheCutover(_ pair: Pair) async throws {
        try seed(pair.old, count: 500)
        let store = try SwitchingStore(from: pair.old, to: pair.new, schema: schema,
                                       policy: SwitchingStore.Policy(cutover: .manual))
        defer { try? store.close() }
        // A child store made before the cutover, written on both sides of it, merged after.
        let child = try store.makeChild()
        try child.writeSync { try $0.insert(Note(id: 900, title: "draft", words: 3)) }
        try store.switchNow(timeout: .seconds(120))
        try child.writeSync { try $0.insert(Note(id: 901, title: "draft 2", words: 3)) }
        #expect(try store.read { try $0.get(Note.self, key: .int(900)) } == nil)
        _ = try store.merge(child)
        let notes = try allNotes(store)
        #expect(notes.count == 502)
        #expect(notes.last == Note(id: 901, title: "draft 2", words: 3))
        #expect(try store.read { try $0.fetch(Note.self, where: Field("words") == .int(3)) }.count == 7)
    }

    static func aRelaunchGoesOnWhereTheLastOneStopped(_ pair: Pair) async throws {
        try seed(pair.old, count: 4_000)
        // A manual cutover: however slowly this test gets to close it, the store is still copying
        // or following then.
        var store = try SwitchingStore(from: pair.old, to: pair.new, schema: schema,
                                       policy: SwitchingStore.Policy(pace: .itemsPerSecond(1_000), cutover: .manual,
                                                                     batchSize: 100))
        try await waitFor("part of the copy") { store.progress.itemsCopied >= 400 }
        try store.writeSync { try $0.insert(Note(id: 50_000, title: "while copying", words: 1)) }
        try store.close()
        // Stopped in the middle of its copy: the next launch serves from the old store and goes on.
        store = try SwitchingStore(from: pair.old, to: pair.new, schema: schema,
                                   policy: SwitchingStore.Policy(pace: .itemsPerSecond(1_000), batchSize: 100))
        #expect(store.phase == .copying || store.phase == .following, "\(store.phase)")
        #expect(try store.read { try $0.get(Note.self, key: .int(50_000)) }?.title == "while copying")
        #expect(try store.waitUntilSwitched(timeout: .seconds(120)))
        try store.writeSync { try $0.insert(Note(id: 50_001, title: "after", words: 1)) }
        try store.close()
        // After the cutover a launch serves from the new store at once.
        store = try SwitchingStore(from: pair.old, to: pair.new, schema: schema)
        #expect(store.phase == .switched)
        #expect(try allNotes(store).count == 4_002)
        try store.close()
        // The old store, kept for a rollback, does not open by itself: an app would write to the
        // wrong store.
        if pair.old.kind != .memory || pair.old.exists {
            #expect {
                _ = try pair.old.open(schema: nil)
            } throws: { error in
                (error as? StoreError)?.code == .incompleteMigration && "\(error)".contains("switched to")
            }
        }
        let status = try SwitchingStore.status(of: pair.new)
        #expect(status?.phase == .switched && status?.serving == true)
    }

    static func cancelThenRestartThenRollBack(_ pair: Pair) async throws {
        try seed(pair.old, count: 3_000)
        let store = try SwitchingStore(from: pair.old, to: pair.new, schema: schema,
                                       policy: SwitchingStore.Policy(pace: .itemsPerSecond(2_000), batchSize: 100))
        defer { try? store.close() }
        try store.writeSync { try $0.insert(Note(id: 60_000, title: "before cancel", words: 1)) }
        try store.cancel()
        #expect(store.phase == .cancelled)
        #expect(!pair.new.exists)
        try store.writeSync { try $0.insert(Note(id: 60_001, title: "after cancel", words: 1)) }
        #expect(try allNotes(store).count == 3_002)
        try store.restart()
        #expect(try store.waitUntilSwitched(timeout: .seconds(120)))
        #expect(store.phase == .switched)
        try store.writeSync { try $0.insert(Note(id: 60_002, title: "on the new store", words: 1)) }
        try store.writeSync { _ = try $0.delete("Note", key: .int(0)) }
        let onNew = try allNotes(store)
        try store.rollBack(timeout: .seconds(120))
        #expect(store.phase == .rolledBack)
        #expect(!pair.new.exists)
        // The old store serves again, with what was written to the new one.
        #expect(try allNotes(store) == onNew)
        try store.writeSync { try $0.insert(Note(id: 60_003, title: "back on the old store", words: 1)) }
        try store.close()
        let old = try pair.old.open(schema: nil)
        defer { try? old.close() }
        #expect(try allNotes(old).count == onNew.count + 1)
    }

    static func mistakesGetAnErrorNamingWhatIsWrong(_ pair: Pair) async throws {
        func refused(_ code: StoreError.Code, _ words: String, _ body: () throws -> Void) {
            #expect {
                try body()
            } throws: { error in
                (error as? StoreError)?.code == code && "\(error)".contains(words)
            }
        }
        try seed(pair.old, count: 100)
        refused(.invalidArgument, "the same store") {
            _ = try SwitchingStore(from: pair.old, to: pair.old, schema: schema)
        }
        // A store of the app's own where the new one would go is never replaced.
        let foreign = try pair.new.open(schema: schema)
        try foreign.writeSync { try $0.insert(Note(id: 1, title: "someone else's", words: 1)) }
        try foreign.close()
        refused(.invalidArgument, "already holds a store") {
            _ = try SwitchingStore(from: pair.old, to: pair.new, schema: schema)
        }
        let untouched = try pair.new.open(schema: nil)
        #expect(try allNotes(untouched) == [Note(id: 1, title: "someone else's", words: 1)])
        try untouched.close()
        try pair.new.destroy()
        // A switch follows the old store's feed.
        let old = try pair.old.open(schema: nil)
        try old.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
        try old.close()
        refused(.invalidArgument, "change feed off") {
            _ = try SwitchingStore(from: pair.old, to: pair.new, schema: schema)
        }
        #expect(!pair.new.exists)
        let reopened = try pair.old.open(schema: nil)
        try reopened.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings()) }
        try reopened.close()
        let store = try SwitchingStore(from: pair.old, to: pair.new, schema: schema,
                                       policy: SwitchingStore.Policy(cutover: .manual))
        defer { try? store.close() }
        refused(.invalidArgument, "cancel it instead") { try store.rollBack() }
        refused(.invalidArgument, "after the cutover") { _ = try store.verifyOldStore() }
        try store.switchNow(timeout: .seconds(60))
        refused(.invalidArgument, "roll it back instead") { try store.cancel() }
        #expect(try allNotes(store).count == 100)
    }

    /// Waits up to 60 s for `condition`, suspended between looks.
    static func waitFor(_ what: String, _ condition: () throws -> Bool) async throws {
        let deadline = Date(timeIntervalSinceNow: 60)
        while try !condition() {
            guard Date() < deadline else {
                Issue.record("timed out waiting for \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// Runs the jobs of the tasks that prefer it on one thread of its own, whatever the cooperative
/// pool is doing.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` is read and written with `condition` locked.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        let thread = Thread { [self] in
            while true {
                condition.lock()
                while jobs.isEmpty && !stopped { condition.wait() }
                if jobs.isEmpty {
                    condition.unlock()
                    return
                }
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.start()
    }

    /// Ends the thread once it has run the jobs enqueued so far (a job enqueued later never runs).
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }
}

/// The deliveries of an observation, collected as they come.
final class Deliveries: @unchecked Sendable {
    private let lock = NSLock()
    private var deliveries: [[Record]] = []
    private var failure: (any Error)?

    func add(_ records: [Record]) { lock.withLock { deliveries.append(records) } }
    func fail(_ error: any Error) { lock.withLock { failure = error } }
    var count: Int { lock.withLock { deliveries.count } }
    var last: [Record]? { lock.withLock { deliveries.last } }
    var all: [[Record]] { lock.withLock { deliveries } }
    var error: (any Error)? { lock.withLock { failure } }
}

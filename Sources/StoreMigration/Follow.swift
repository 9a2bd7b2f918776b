@_spi(Backend) import DataStoreAPI
import Foundation

/// Options of ``Migrator/follow(from:to:options:shouldStop:progress:)``.
public struct FollowOptions: Sendable {
    /// Stop once the source has committed nothing for this many seconds (`nil`: follow until
    /// `shouldStop` says so, as on Ctrl-C).
    public var untilIdle: Double?
    /// Most source transactions applied in one destination transaction.
    public var batchTransactions: Int
    /// How often to look for new source transactions while idle.
    public var pollInterval: Double
    /// Items per write transaction of a merge-join catch-up.
    public var batchSize: Int
    /// Whether a follow that starts from a position stored in the destination first compares
    /// the two stores by a merge join (on by default). A write made to the source outside the
    /// package (the `sqlite3` shell, `psql`, another program) commits no feed entry, so only a
    /// comparison finds it. A caller that has just copied or verified the destination against
    /// the source's current snapshot may turn it off.
    public var compareFirst: Bool

    /// Options; by default a follow runs until stopped, compares the stores first and applies up to 500 transactions at a time.
    public init(untilIdle: Double? = nil, batchTransactions: Int = 500, pollInterval: Double = 0.005,
                batchSize: Int = 1_000, compareFirst: Bool = true) {
        self.untilIdle = untilIdle
        self.batchTransactions = batchTransactions
        self.pollInterval = pollInterval
        self.batchSize = batchSize
        self.compareFirst = compareFirst
    }
}

/// Where a follow stands, reported after each applied batch and about once a second while idle.
public struct FollowProgress: Sendable {
    /// The last source transaction applied to the destination.
    public var applied: ChangeToken
    /// The source's last committed transaction, as last seen.
    public var sourceHead: ChangeToken
    /// Source transactions committed but not applied yet.
    public var lagTransactions: UInt64 { sourceHead.sequence > applied.sequence ? sourceHead.sequence - applied.sequence : 0 }
    /// How long the last transaction applied waited between its commit in the source and its
    /// commit in the destination (0 when idle).
    public var lagSeconds: Double
    /// Source transactions applied so far.
    public var transactionsApplied: Int
    /// Items written so far.
    public var itemsWritten: Int
    /// Items deleted so far.
    public var itemsDeleted: Int
}

/// What a follow did.
public struct FollowReport: Sendable, Codable, Hashable {
    /// The source, as its location reads.
    public var source: String
    /// The destination, as its location reads.
    public var destination: String
    /// The token the follow started from, and the last one it applied.
    public var startToken: ChangeToken?
    /// The last source transaction applied: the destination equals the source as of it.
    public var endToken: ChangeToken?
    /// Source transactions applied.
    public var transactionsApplied = 0
    /// Items written.
    public var itemsWritten = 0
    /// Items deleted.
    public var itemsDeleted = 0
    /// Merge-join catch-ups, with why each ran (no token yet, an expired token, an overflowed
    /// transaction).
    public var catchUps: [String] = []
    /// The delay between a source commit and its destination commit, over every applied
    /// transaction: median and worst, in seconds.
    public var lagMedianSeconds = 0.0
    /// The longest of those delays.
    public var lagWorstSeconds = 0.0
    /// `idle` or `stopped`.
    public var endedBy = ""
    /// How long the follow ran.
    public var seconds = 0.0
}

extension Migrator {
    /// The reserved metadata key of a follow's position in the destination.
    static let followKey = "datastore.follow"

    /// A follow's position, stored in the destination in the same transaction as what it applied.
    struct FollowState: Codable {
        var source: String
        var token: ChangeToken
    }

    static func followState(of store: any DataStore) throws -> FollowState? {
        guard let bytes = try store.read({ try $0.metadata(forKey: followKey) }) else { return nil }
        return try? JSONDecoder().decode(FollowState.self, from: Data(bytes))
    }

    static func writeFollowState(_ writer: WriteAccessor, source: StoreLocation, token: ChangeToken) throws {
        let state = FollowState(source: source.description, token: token)
        try writer.setReservedMetadata(Array(try JSONEncoder().encode(state)), forKey: followKey)
    }

    /// Throws `invalidArgument` when `destination` cannot follow `source`: the same store, or a
    /// destination written whole rather than by transactions (a JSON Lines file). A command that
    /// copies and then follows calls it before it reads or writes anything.
    public static func checkFollow(from source: StoreLocation, to destination: StoreLocation) throws {
        guard source != destination else {
            throw StoreError(.invalidArgument, "source and destination are the same store \(source)")
        }
        try requireTransactions(destination, toDo: "follow a source")
    }

    /// Throws `invalidArgument` when `location` is written whole rather than by transactions (a
    /// JSON Lines file), so that it cannot `toDo` ("follow a source", "be upgraded").
    public static func requireTransactions(_ location: StoreLocation, toDo: String) throws {
        if try location.backend is any StreamedStoreBackend {
            throw StoreError(.invalidArgument, "\(location) cannot \(toDo): a \(location.kind) store is written "
                + "whole, not by transactions")
        }
    }

    /// Keeps `destination` in step with a live `source` by applying the source's change feed,
    /// batch by batch, each destination transaction storing the source token it reached, until
    /// `shouldStop` returns true or the source stays idle for `options.untilIdle` seconds.
    ///
    /// It starts by a merge-join sync of the two stores (listed in ``FollowReport/catchUps``),
    /// which finds what the source's feed cannot list: writes made outside the package, a
    /// destination without a follow position, or one whose position the feed no longer reaches
    /// (retention, a schema migration). With ``FollowOptions/compareFirst`` off, it starts from
    /// the position that the last copy, sync or follow stored in the destination when the feed
    /// still reaches it. After it returns, the destination equals the source as of
    /// ``FollowReport/endToken``, except for writes made outside the package while it ran:
    /// the next follow or sync finds those.
    public static func follow(from source: StoreLocation, to destination: StoreLocation,
                              options: FollowOptions = FollowOptions(),
                              shouldStop: @escaping () -> Bool = { false },
                              progress: @escaping (FollowProgress) -> Void = { _ in }) throws -> FollowReport {
        try checkFollow(from: source, to: destination)
        let started = Date()
        let sourceStore = try source.openSource()
        defer { try? sourceStore.close() }
        let destinationStore = try withResumeCommand(destination) {
            try MigrationGate.$defersReferenceChecks.withValue(true) { try destination.open(schema: nil) }
        }
        defer { try? destinationStore.close() }
        try requireEntities(of: sourceStore.schema, in: destinationStore.schema, destination)
        var report = FollowReport(source: source.description, destination: destination.description)
        var lags: [Double] = []
        var follower = Follower(source: sourceStore, destination: destinationStore, sourceLocation: source,
                                options: options, shouldStop: shouldStop)
        var token = try followState(of: destinationStore).map(\.token)
        report.startToken = token
        if token == nil {
            report.catchUps.append("the destination holds no follow position")
        } else if options.compareFirst {
            report.catchUps.append("a follow starts by comparing the stores: writes made to the source outside "
                + "the package are not in its feed")
            token = nil
        }
        var lastActivity = Date()
        var lastReport = Date.distantPast
        var head = try sourceStore.currentChangeToken()
        while true {
            if let current = token {
                do {
                    if let batch = try follower.nextBatch(after: current) {
                        if batch.overflowed.isEmpty {
                            let (written, deleted) = try follower.apply(batch)
                            let now = (try? Timestamp(Date()))?.microsecondsSinceEpoch ?? 0
                            for commit in batch.commits { lags.append(Double(now - commit.microsecondsSinceEpoch) / 1e6) }
                            report.transactionsApplied += batch.commits.count
                            report.itemsWritten += written
                            report.itemsDeleted += deleted
                            token = batch.token
                            head = batch.head
                            lastActivity = Date()
                            lastReport = Date()
                            progress(FollowProgress(applied: batch.token, sourceHead: batch.head,
                                                    lagSeconds: lags.last ?? 0,
                                                    transactionsApplied: report.transactionsApplied,
                                                    itemsWritten: report.itemsWritten, itemsDeleted: report.itemsDeleted))
                            if shouldStop() { report.endedBy = "stopped"; break }
                            continue
                        }
                        report.catchUps.append("source transaction \(batch.overflowedAt) changed more items of "
                            + batch.overflowed.sorted().joined(separator: ", ") + " than its feed lists")
                        token = nil
                    }
                } catch let error as StoreError where error.code == .changesExpired || error.code == .invalidArgument {
                    report.catchUps.append("the source's feed no longer reaches the destination's position "
                        + "\(current): \(error.message)")
                    token = nil
                }
            }
            if token == nil {
                do {
                    let caughtUp = try follower.catchUp(&report)
                    token = caughtUp
                    head = caughtUp
                } catch is StopRequested {
                    report.endedBy = "stopped"
                    break
                }
                lastActivity = Date()
                continue
            }
            // Idle: nothing after the token.
            if shouldStop() { report.endedBy = "stopped"; break }
            if let idle = options.untilIdle, Date().timeIntervalSince(lastActivity) >= idle {
                report.endedBy = "idle"
                break
            }
            if let token, Date().timeIntervalSince(lastReport) >= 1 {
                lastReport = Date()
                progress(FollowProgress(applied: token, sourceHead: head, lagSeconds: 0,
                                        transactionsApplied: report.transactionsApplied,
                                        itemsWritten: report.itemsWritten, itemsDeleted: report.itemsDeleted))
            }
            follower.waitForSourceCommit()
        }
        report.endToken = token
        let sorted = lags.sorted()
        report.lagMedianSeconds = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        report.lagWorstSeconds = sorted.last ?? 0
        report.seconds = Date().timeIntervalSince(started)
        return report
    }
}

/// The source transactions of one batch, reduced to what the destination must do.
struct FollowBatch {
    /// Per entity: whether it was emptied, and then each key touched since with its value in the
    /// source at the batch's end (`nil`: deleted).
    var entities: [(entity: String, cleared: Bool, items: [(key: Value, record: Record?)])] = []
    var overflowed: Set<String> = []
    var overflowedAt: UInt64 = 0
    var token: ChangeToken
    var head: ChangeToken
    var commits: [Timestamp] = []
}

/// The mechanics of following: reading a batch from the source, applying it, catching up.
struct Follower {
    let source: any DataStore
    let destination: any DataStore
    let sourceLocation: StoreLocation
    let options: FollowOptions
    let shouldStop: () -> Bool
    var lastCounter: UInt64?

    init(source: any DataStore, destination: any DataStore, sourceLocation: StoreLocation, options: FollowOptions,
         shouldStop: @escaping () -> Bool) {
        self.source = source
        self.destination = destination
        self.sourceLocation = sourceLocation
        self.options = options
        self.shouldStop = shouldStop
    }

    /// The transactions after `token` and the values they left, read in one source snapshot, so
    /// that applying them makes the destination equal the source at the batch's last token.
    func nextBatch(after token: ChangeToken) throws -> FollowBatch? {
        try source.read { try nextBatch(after: token, in: $0) }
    }

    /// The transactions after `token` that `snapshot` holds, and the values it holds for them.
    func nextBatch(after token: ChangeToken, in snapshot: ReadAccessor) throws -> FollowBatch? {
        let sets = try snapshot.changes(since: token, limit: max(1, options.batchTransactions))
        guard let last = sets.last else { return nil }
        var batch = FollowBatch(token: last.token, head: try snapshot.changeToken())
        var order: [String] = []
        var cleared: Set<String> = []
        var keys: [String: [Value]] = [:]
        var seen: [String: Set<Value>] = [:]
        for set in sets {
            if !set.overflowed.isEmpty {
                batch.overflowed.formUnion(set.overflowed)
                batch.overflowedAt = set.sequence
                return batch
            }
            batch.commits.append(set.committedAt)
            for entity in set.cleared {
                cleared.insert(entity)
                keys[entity] = []
                seen[entity] = []
                if !order.contains(entity) { order.append(entity) }
            }
            for item in set.items where seen[item.entity, default: []].insert(item.key).inserted {
                keys[item.entity, default: []].append(item.key)
                if !order.contains(item.entity) { order.append(item.entity) }
            }
        }
        for entity in order {
            let items = try (keys[entity] ?? []).map { key in (key, try snapshot.get(entity, key: key)) }
            batch.entities.append((entity, cleared.contains(entity), items))
        }
        return batch
    }

    /// Applies a batch in one destination transaction, with the token it reached; returns the
    /// items written and deleted.
    func apply(_ batch: FollowBatch) throws -> (written: Int, deleted: Int) {
        try destination.writeSync { writer in
            var written = 0
            var deleted = 0
            for (entity, cleared, items) in batch.entities {
                if cleared { deleted += try writer.deleteAll(entity) }
                for (key, record) in items {
                    if let record {
                        try writer.save(record, into: entity)
                        written += 1
                    } else if try writer.delete(entity, key: key) {
                        deleted += 1
                    }
                }
            }
            try Migrator.writeFollowState(writer, source: sourceLocation, token: batch.token)
            return (written, deleted)
        }
    }

    /// Brings the destination to a source snapshot by a merge-join sync and returns the
    /// snapshot's token (stored with the sync's last batch).
    func catchUp(_ report: inout FollowReport) throws -> ChangeToken {
        var entry = EntityReport(entity: "")
        var samples: [String] = []
        return try source.read { snapshot in
            let token = try snapshot.changeToken()
            for entity in source.schema.entities {
                entry = EntityReport(entity: entity.name)
                try StoreDiff(entity: entity, source: snapshot, destination: destination, batchSize: options.batchSize,
                              mode: .apply, checkpoint: { _, _ in }, progress: { _ in }, shouldStop: shouldStop)
                    .run(&entry, samples: &samples)
                report.itemsWritten += entry.itemsWritten
                report.itemsDeleted += entry.itemsDeleted
            }
            try destination.writeSync { try Migrator.writeFollowState($0, source: sourceLocation, token: token) }
            return token
        }
    }

    /// Sleeps until the source's commit counter moves, or one poll interval.
    mutating func waitForSourceCommit() {
        let deadline = Date(timeIntervalSinceNow: 1)
        while Date() < deadline && !shouldStop() {
            usleep(UInt32(max(100, options.pollInterval * 1_000_000)))
            let counter = (source as? Store)?.commitCounterNow()
            if counter == nil || counter != lastCounter {
                lastCounter = counter
                return
            }
        }
    }
}

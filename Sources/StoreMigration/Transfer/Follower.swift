@_spi(Backend) import DataStoreAPI
import Foundation

extension Migrator {
    /// The reserved metadata key of a follow's position in the destination.
    static let followKey = "datastore.follow"
    /// A follow's position, in its destination.
    static let followRecord = ReservedRecord<FollowState>(key: followKey, what: "follow position")

    /// A follow's position, stored in the destination in the same transaction as what it applied.
    struct FollowState: Codable {
        var source: String
        var token: ChangeToken
    }

    static func followState(of store: any DataStore, named name: String) throws -> FollowState? {
        try followRecord.read(from: store, named: name)
    }

    static func writeFollowState(_ writer: WriteAccessor, source: StoreLocation, token: ChangeToken) throws {
        let state = FollowState(source: source.description, token: token)
        try followRecord.write(state, into: writer)
    }

    /// Throws `invalidArgument` when `destination` cannot follow `source`: the same store, a
    /// foreign source (Core Data, plain SQLite: read from a snapshot, without a feed), or a
    /// destination written whole rather than by transactions (a JSON Lines file). A command that
    /// copies and then follows calls it before it reads or writes anything.
    public static func checkFollow(from source: StoreLocation, to destination: StoreLocation) throws {
        try source.requireDistinct(from: destination)
        if source.isForeignSource {
            throw StoreError(.invalidArgument, "\(source) cannot be followed: a \(source.kind) source is read from a "
                + "snapshot and keeps no change feed; run `migrate-store sync --from \(source) --to \(destination)` "
                + "again to bring the copy up to date")
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
    /// (retention, a schema upgrade). With ``FollowOptions/compareFirst`` off, it starts from
    /// the position that the last copy, sync or follow stored in the destination when the feed
    /// still reaches it. After it returns, the destination equals the source as of
    /// ``FollowReport/endToken``, except for writes made outside the package while it ran:
    /// the next follow or sync finds those.
    public static func follow(from source: StoreLocation, to destination: StoreLocation,
                              options: FollowOptions = FollowOptions(),
                              shouldStop: @escaping () -> Bool = { false },
                              progress: @escaping (FollowProgress) -> Void = { _ in }) throws -> FollowReport {
        try checkFollow(from: source, to: destination)
        let started = ContinuousClock.now
        let sourceStore = try source.openSource()
        defer { try? sourceStore.close() }
        // Refused before anything is read: the follow waits on the source's hub.
        _ = try Store.required(sourceStore, at: source, for: "a follow")
        let destinationStore = try withResumeCommand(destination) {
            try MigrationGate.$defersReferenceChecks.withValue(true) { try destination.open(schema: nil) }
        }
        defer { try? destinationStore.close() }
        try requireEntities(of: sourceStore.schema, in: destinationStore.schema, destination)
        var report = FollowReport(source: source.description, destination: destination.description)
        var lags: [Double] = []
        var follower = Follower(source: sourceStore, destination: destinationStore, sourceLocation: source,
                                options: options, shouldStop: shouldStop)
        follower.token = try followState(of: destinationStore, named: destination.description).map(\.token)
        report.startToken = follower.token
        if follower.token != nil && options.compareFirst {
            follower.compareNext(because: "a follow starts by comparing the stores: writes made to the source "
                + "outside the package are not in its feed")
        }
        var lastActivity = ContinuousClock.now
        var lastReport = ContinuousClock.now - .seconds(3_600)
        var head = try sourceStore.currentChangeToken()
        func progressed(_ token: ChangeToken, lag: Double) {
            lastReport = .now
            progress(FollowProgress(applied: token, sourceHead: head, lagSeconds: lag,
                                    transactionsApplied: report.transactionsApplied,
                                    itemsWritten: report.itemsWritten, itemsDeleted: report.itemsDeleted))
        }
        loop: while true {
            let step: FollowStep
            do {
                step = try follower.step()
            } catch is StopRequested {
                report.endedBy = "stopped"
                break
            }
            switch step {
            case .applied(let batch, let written, let deleted):
                let now = (try? Timestamp(Date()))?.microsecondsSinceEpoch ?? 0
                // In doubles: a commit time another program wrote may lie anywhere in 64 bits.
                for commit in batch.commits { lags.append((Double(now) - Double(commit.microsecondsSinceEpoch)) / 1e6) }
                report.transactionsApplied += batch.commits.count
                report.itemsWritten += written
                report.itemsDeleted += deleted
                head = batch.head
                lastActivity = .now
                progressed(batch.token, lag: lags.last ?? 0)
                if shouldStop() { report.endedBy = "stopped"; break loop }
            case .caughtUp(let reason, let token, let written, let deleted):
                report.catchUps.append(reason)
                report.itemsWritten += written
                report.itemsDeleted += deleted
                head = token
                lastActivity = .now
            case .idle(let token):
                if shouldStop() { report.endedBy = "stopped"; break loop }
                if let idle = options.untilIdle, ContinuousClock.now - lastActivity >= idle {
                    report.endedBy = "idle"
                    break loop
                }
                if ContinuousClock.now - lastReport >= .seconds(1) { progressed(token, lag: 0) }
                try follower.waitForSourceCommit()
            }
        }
        let token = follower.token
        report.endToken = token
        let sorted = lags.sorted()
        report.lagMedianSeconds = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        report.lagWorstSeconds = sorted.last ?? 0
        report.seconds = (ContinuousClock.now - started).seconds
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

/// What one step of a ``Follower`` did.
enum FollowStep {
    /// It applied a batch of the source's transactions: the items written and deleted.
    case applied(FollowBatch, written: Int, deleted: Int)
    /// It brought the destination to a source snapshot by a merge join, for `reason` (no
    /// position yet, an expired position, a transaction that overflowed its feed entry).
    case caughtUp(reason: String, token: ChangeToken, written: Int, deleted: Int)
    /// Nothing after the position: the destination equals the source as of `token`.
    case idle(ChangeToken)
}

/// The follow loop, written once: keeps a destination in step with a source's change feed, one
/// ``step()`` at a time. `migrate-store copy --follow` and `sync --follow`
/// (``Migrator/follow(from:to:options:shouldStop:progress:)``) and ``SwitchingStore``'s follow
/// and cutover all drive it; each decides when to wait, stop or cut over.
///
/// A step applies the source's next batch of transactions in one destination transaction that
/// also stores the position it reached. When the follower has no position, when the feed no
/// longer reaches it (retention, a schema step), or when a transaction changed more items than
/// its feed entry lists, the step instead compares the two stores by a merge join against one
/// source snapshot (``catchUp()``) and goes on from that snapshot's position.
struct Follower {
    let source: any DataStore
    let destination: any DataStore
    let sourceLocation: StoreLocation
    let options: FollowOptions
    let shouldStop: () -> Bool
    var lastCounter: UInt64?
    /// The last source transaction the destination holds (`nil`: unknown, the next step
    /// compares the stores).
    var token: ChangeToken?
    /// Why the next step compares the stores, when a caller asked for it.
    private var compareReason: String?

    init(source: any DataStore, destination: any DataStore, sourceLocation: StoreLocation, options: FollowOptions,
         shouldStop: @escaping () -> Bool, token: ChangeToken? = nil) {
        self.source = source
        self.destination = destination
        self.sourceLocation = sourceLocation
        self.options = options
        self.shouldStop = shouldStop
        self.token = token
    }

    /// Makes the next step compare the stores, for `reason`.
    mutating func compareNext(because reason: String) {
        token = nil
        compareReason = reason
    }

    /// Applies the next batch, or catches up by a merge join when the feed cannot say what
    /// changed, or reports that nothing is left.
    mutating func step() throws -> FollowStep {
        var reason = compareReason ?? "the destination holds no follow position"
        if let current = token {
            do {
                guard let batch = try nextBatch(after: current) else { return .idle(current) }
                if batch.overflowed.isEmpty {
                    let (written, deleted) = try apply(batch)
                    token = batch.token
                    return .applied(batch, written: written, deleted: deleted)
                }
                reason = "source transaction \(batch.overflowedAt) changed more items of "
                    + batch.overflowed.sorted().joined(separator: ", ") + " than its feed lists"
            } catch let error as StoreError where error.code == .changesExpired || error.code == .invalidArgument {
                reason = "the source's feed no longer reaches the destination's position \(current): \(error.message)"
            }
        }
        compareReason = nil
        token = nil
        let (reached, written, deleted) = try catchUp()
        token = reached
        return .caughtUp(reason: reason, token: reached, written: written, deleted: deleted)
    }

    /// Steps until nothing is left to apply; returns the position reached.
    mutating func drain() throws -> ChangeToken {
        while true {
            if case .idle(let reached) = try step() { return reached }
        }
    }

    /// The transactions after `token` and the values they left, read in one source snapshot, so
    /// that applying them makes the destination equal the source at the batch's last token.
    func nextBatch(after token: ChangeToken) throws -> FollowBatch? {
        try source.read { try nextBatch(after: token, in: $0) }
    }

    /// The transactions after `token` that `snapshot` holds, and the values it holds for them.
    func nextBatch(after token: ChangeToken, in snapshot: ReadAccessor) throws -> FollowBatch? {
        let sets = try snapshot.changes(since: token, limit: options.batchTransactions.value)
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
    /// items written and deleted. A batch that breaks a unique index saved item by item (two
    /// items that swapped an email in one commit) is applied again with every item of it taken
    /// out first: the destination held the source's state at the batch's start, so only items of
    /// the batch can hold the values they take.
    func apply(_ batch: FollowBatch) throws -> (written: Int, deleted: Int) {
        do {
            return try apply(batch, replacing: false)
        } catch let error as StoreError where error.code == .uniqueViolation {
            return try apply(batch, replacing: true)
        }
    }

    private func apply(_ batch: FollowBatch, replacing: Bool) throws -> (written: Int, deleted: Int) {
        try destination.writeSync { writer in
            var written = 0
            var deleted = 0
            for (entity, cleared, items) in batch.entities {
                if cleared { deleted += try writer.deleteAll(entity) }
                if replacing {
                    for (key, record) in items {
                        if try writer.delete(entity, key: key), record == nil { deleted += 1 }
                    }
                    let records = items.compactMap(\.record)
                    try writer.insert(contentsOf: records, into: entity)
                    written += records.count
                    continue
                }
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
    /// snapshot's token (stored with the sync's last batch), and the items written and deleted.
    func catchUp() throws -> (token: ChangeToken, written: Int, deleted: Int) {
        var samples: [String] = []
        var written = 0
        var deleted = 0
        return try source.read { snapshot in
            let token = try snapshot.changeToken()
            for entity in source.schema.entities {
                var entry = EntityReport(entity: entity.name)
                try StoreDiff(entity: entity, source: snapshot, destination: destination, batchSize: options.batchSize,
                              mode: .apply, checkpoint: { _, _ in }, progress: { _ in }, shouldStop: shouldStop)
                    .run(&entry, samples: &samples)
                written += entry.itemsWritten
                deleted += entry.itemsDeleted
            }
            try destination.writeSync { try Migrator.writeFollowState($0, source: sourceLocation, token: token) }
            return (token, written, deleted)
        }
    }

    /// Waits until the source's commit counter moves (woken by the source store's hub: its
    /// notifications, or its polling every ``FollowOptions/pollInterval``), at most a second,
    /// looking at `shouldStop` every tenth of one.
    /// - Throws: `invalidArgument` when the source is not a ``Store`` (it has no hub to wait on).
    mutating func waitForSourceCommit() throws {
        let store = try Store.required(source, at: sourceLocation, for: "a follow")
        store.changePollInterval = options.pollInterval
        let deadline = ContinuousClock.now + .seconds(1)
        while ContinuousClock.now < deadline && !shouldStop() {
            // The generation first: a commit after the look below still ends the wait.
            let generation = store.commitGeneration
            let counter = store.commitCounterNow()
            if counter == nil || counter != lastCounter {
                lastCounter = counter
                return
            }
            store.waitForCommit(after: generation, timeout: .milliseconds(100))
        }
    }
}

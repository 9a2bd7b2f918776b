@_spi(Backend) import DataStoreAPI
import Foundation

/// The switch's background work, on the paged copy and the follow loop of `Transfer/`: the copy,
/// the follow, and the state machine's transitions (the cutover, the cut-back, the records they
/// write).
extension SwitchingStore {
    /// Checks the switch while the old store is kept: brings the old store up to date by the
    /// new store's change feed since the cutover (as a rollback would), then compares the two
    /// item by item against one snapshot of the new store. The report's differences are 0 when
    /// the cutover carried everything over and the feed since then is whole. The old store
    /// keeps not serving; call it before ``dropOldStore()``.
    /// - Throws: `invalidArgument` before the cutover or once the old store was dropped;
    ///   `changesExpired` when the new store's feed no longer reaches back to the cutover.
    public func verifyOldStore() throws -> MigrationReport {
        let (phase, old, new) = condition.withLock { (state.phase, self.old, self.new) }
        guard phase == .switched, let old, let new else {
            throw StoreError(.invalidArgument, phase == .switched ? "the old store \(oldLocation) was dropped"
                : "the switch is \(phase.rawValue): the old store is compared with the new one after the cutover")
        }
        guard var token = try Migrator.followState(of: old, named: oldLocation.description).flatMap({
            $0.source == newLocation.description ? $0.token : nil
        }) else {
            throw StoreError(.corrupt, "\(oldLocation) does not record the cutover's position")
        }
        let store = try Store.required(old, at: oldLocation, for: "verifying the old store")
        store.keepReferences(false)
        defer { store.keepReferences(true) }
        let follower = Follower(source: new, destination: old, sourceLocation: newLocation,
                                options: FollowOptions(batchSize: policy.batchSize), shouldStop: { false })
        let run = MigrationRun(operation: .verify, newLocation, oldLocation, MigrationOptions(batchSize: policy.batchSize),
                               { false }, { _ in })
        try new.read { snapshot in
            while let batch = try follower.nextBatch(after: token, in: snapshot) {
                guard batch.overflowed.isEmpty else {
                    throw StoreError(.changesExpired, "transaction \(batch.overflowedAt) of \(newLocation) changed more "
                        + "items than its feed lists; compare the stores with migrate-store verify")
                }
                _ = try follower.apply(batch)
                token = batch.token
            }
            try run.verify(schema, snapshot, old)
        }
        return run.finish()
    }

    // MARK: Background work

    func update(_ change: (inout Progress) -> Void) {
        let snapshot = condition.withLock { () -> Progress in
            change(&state)
            condition.broadcast()
            return state
        }
        onProgress?(snapshot)
    }

    var shouldStop: Bool { condition.withLock { stopping } }

    func startBackground() {
        condition.lock()
        stopping = false
        workerDone = false
        state.failure = nil
        condition.unlock()
        StoreThreads(label: "DataStore.switch").submit { [self] in
            self.runBackground()
            self.condition.withLock {
                self.workerDone = true
                self.switchLock?.release()
                self.switchLock = nil
                self.condition.broadcast()
            }
        }
    }

    func stopBackground() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while !workerDone { condition.wait() }
        condition.unlock()
    }

    func runBackground() {
        do {
            switch phase {
            case .copying:
                try copy()
                try followThenCutOver()
            case .following:
                try followThenCutOver()
            case .rollingBack:
                try followBackThenCutOver()
            default:
                break
            }
        } catch is StopRequested {
        } catch is MigrationInterrupted {
        } catch {
            logger?.error("switch stopped", metadata: ["error": "\(error)"])
            update { $0.failure = "\(error)" }
        }
    }

    /// The old store's feed position when the copy began, kept in the new store: the follow
    /// starts there.
    static let copyStartKey = "datastore.switch.copy-start"
    /// The copy's start, in the new store.
    static let copyStartRecord = ReservedRecord<CopyStart>(key: copyStartKey, what: "switch copy's start")

    /// Copies the old store into the new one, entity by entity in key order, one page per short
    /// read of the old store and one write transaction of the new one with its checkpoint,
    /// resuming from the checkpoint.
    ///
    /// From an LMDB store each page is read in a read transaction of its own: a read held for
    /// the whole copy would keep the app's writes from reusing pages and from growing the map
    /// (which waits for every transaction of the process to end, so an app's write would wait
    /// for the copy's end). Pages read at different moments are made consistent by the
    /// follow, which starts from the old store's position before the first page and sets every
    /// item it lists to its value in the old store: whatever changed after that position is set
    /// again.
    func copy() throws {
        guard let old, let new else { return }
        // Where the old store's feed stood before the first page, and each entity's last key
        // then: items added after it are the follow's to copy (an app that keeps adding items
        // faster than the paced copy goes would otherwise keep the copy from ending).
        let start: CopyStart
        if let known = try Self.copyStartRecord.read(from: new, named: newLocation.description) {
            start = known
        } else {
            start = try old.read { reader in
                CopyStart(token: try reader.changeToken(), lastKeys: try schema.entities.map { entity in
                    try reader.fetch(FetchRequest(entity.name, sort: [.descending(entity.primaryKey)], limit: 1))
                        .first?[entity.primaryKey]
                })
            }
            try new.writeSync { try Self.copyStartRecord.write(start, into: $0) }
        }
        let mark = try Migrator.checkpoint(of: new, named: newLocation.description)
        let counts = try old.read { reader in
            try schema.entities.map { try reader.count(FetchRequest($0.name)) }
        }
        update { $0.itemsToCopy = counts.reduce(0, +) }
        let pacer = Pacer(pace: policy.pace)
        var finished = mark?.finishedEntities ?? []
        // A relaunch goes on from the checkpoint, and so does its progress: what the new store
        // holds is what the copy wrote (the follow has not started).
        var copied = try new.read { reader in
            try schema.entities.reduce(0) { $0 + (try reader.count(FetchRequest($1.name))) }
        }
        update { $0.itemsCopied = copied }
        let batchSize = policy.copyBatchSize(into: try newLocation.backend)
        var pages = PagedCopy(destination: new, batchSize: batchSize, shouldStop: { [self] in shouldStop })
        pages.measurePages(batchChosen: policy.chosenBatchSize != nil)
        pages.beforePage = { [self] in
            pacer.pause(items: copied, lastAppWrite: { gate.lastAppWrite }, stop: { shouldStop })
        }
        /// Copies the pages, each read by `reading`.
        func copyPages(reading: ((ReadAccessor) throws -> Void) throws -> Void) throws {
            for (position, entity) in schema.entities.enumerated() where !finished.contains(entity.name) {
                // An entity empty when the copy began has nothing to copy: the follow brings what
                // was added since.
                if let bound = start.lastKeys.indices.contains(position) ? start.lastKeys[position] : nil {
                    let before = copied
                    let done = finished
                    _ = try pages.copy(entity, after: mark?.entity == entity.name ? mark?.lastKey : nil, through: bound,
                                       reading: reading,
                                       checkpoint: { writer, last in
                                           let checkpoint = Migrator.Checkpoint(entity: entity.name, lastKey: last,
                                                                                finishedEntities: done, copied: true)
                                           try Migrator.checkpointRecord.write(checkpoint, into: writer)
                                       },
                                       committed: { total in
                                           copied = before + total
                                           update { $0.itemsCopied = copied }
                                       })
                }
                finished.append(entity.name)
            }
        }
        if oldLocation.kind == .lmdb {
            try copyPages(reading: { try old.read($0) })
        } else {
            // Elsewhere one snapshot serves the whole copy: a long read costs the app's writes
            // nothing on SQLite and PostgreSQL, and an in-memory store sorts its keys once per
            // snapshot that follows a write.
            try old.read { snapshot in try copyPages(reading: { try $0(snapshot) }) }
        }
        var next = condition.withLock { record }
        next.phase = .following
        next.serving = false
        // The follow goes on from the position before the first page.
        try new.writeSync { writer in
            try Migrator.checkpointRecord.write(nil, into: writer)
            try Self.copyStartRecord.write(nil, into: writer)
            try Migrator.writeFollowState(writer, source: oldLocation, token: start.token)
            try next.write(into: writer)
        }
        update {
            $0.phase = .following
            $0.itemsCopied = $0.itemsToCopy
        }
    }

    /// Applies the old store's feed to the new one until it has caught up, then cuts over.
    func followThenCutOver() throws {
        guard let old, let new else { return }
        try follow(from: old, oldLocation, to: new) { follower, token in
            try self.cutOver(follower: &follower, token: token, old: old, new: new)
        }
    }

    /// Applies the new store's feed to the old one until it has caught up, then switches back.
    func followBackThenCutOver() throws {
        guard let old, let new else { return }
        try Store.required(old, at: oldLocation, for: "a switch back").keepReferences(false)
        try follow(from: new, newLocation, to: old) { follower, token in
            try self.cutBack(follower: &follower, token: token, old: old, new: new)
        }
    }

    /// Follows `source` into `destination` until `cutOver` (called whenever the destination has
    /// caught up, and the policy allows) returns true.
    func follow(from source: any DataStore, _ sourceLocation: StoreLocation, to destination: any DataStore,
                cutOver: (inout Follower, ChangeToken) throws -> Bool) throws {
        var follower = Follower(source: source, destination: destination, sourceLocation: sourceLocation,
                                options: FollowOptions(batchSize: policy.batchSize),
                                shouldStop: { [self] in self.shouldStop },
                                token: try Migrator.followState(
                                    of: destination,
                                    named: (sourceLocation == oldLocation ? newLocation : oldLocation).description
                                ).flatMap {
                                    $0.source == sourceLocation.description ? $0.token : nil
                                })
        // A launch that finds the switch under way compares the stores once: writes made to the
        // source outside the package are not in its feed.
        if condition.withLock({ comparesFirst }) {
            follower.compareNext(because: "the switch was found under way")
            _ = try follower.step()
            condition.withLock { comparesFirst = false }
        }
        // Seconds one source transaction takes to apply, as last measured.
        var secondsPerTransaction = 0.0
        while true {
            if shouldStop { throw StopRequested() }
            let started = ContinuousClock.now
            let step = try follower.step()
            let reached: ChangeToken
            switch step {
            case .applied(let batch, _, _):
                secondsPerTransaction = (ContinuousClock.now - started).seconds / Double(batch.commits.count)
                reached = batch.token
            case .caughtUp:
                continue
            case .idle(let token):
                reached = token
            }
            // The cutover applies the rest with writes held: it starts once the rest is expected
            // to take no longer than the policy's pause (with an app that writes without pause,
            // the feed is never found empty).
            let head = try source.currentChangeToken()
            let lag = head.store == reached.store && head.sequence > reached.sequence ? head.sequence - reached.sequence : 0
            update { $0.lagTransactions = lag }
            if Double(lag) * secondsPerTransaction <= policy.maximumPause.seconds, mayCutOver(),
                try cutOver(&follower, reached)
            {
                return
            }
            if case .idle = step { try follower.waitForSourceCommit() }
        }
    }

    /// Whether the policy lets the cutover happen now.
    func mayCutOver() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if policy.cutover == .manual && !cutoverRequested && state.phase != .rollingBack { return false }
        if case .whenIdle(let quiet) = policy.pace, ContinuousClock.now - gate.lastAppWrite < quiet { return false }
        return true
    }

    static func step(_ name: String) {
        if let hook = stepHook.withLock({ $0 }) { hook(name) }
    }

    /// The cutover: hold writes, apply the last changes, record the switch in the new store
    /// (the decisive transaction), send writes to the new store, then mark the old one.
    func cutOver(follower: inout Follower, token: ChangeToken, old: any DataStore, new: any DataStore) throws
        -> Bool
    {
        let (switched, head, pause) = try hand(from: old, oldLocation, to: new, newLocation, follower: &follower,
                                               token: token,
                                               clearing: [MetadataKeys.incompleteMigration, Migrator.followKey],
                                               steps: ("applied", "recorded")) { record in
            record.phase = .switched
            record.switchedAt = Date()
        }
        update {
            $0.lastPause = pause
            $0.lagTransactions = 0
        }
        logger?.info("switch cut over", metadata: ["to": "\(newLocation)", "pause": "\(pause)"])
        Self.step("released")
        // Switched once the old store is retired: what the app may do then (verify it, drop it,
        // roll back) needs the position the retirement records. The new store serves either way;
        // a retirement that failed is done again at the next launch.
        defer { update { $0.phase = .switched } }
        try SwitchOpening.retire(old, record: switched, newLocation: newLocation, token: head)
        Self.step("retired")
        if !policy.keepsOldStore { try dropOldStore() }
        return true
    }

    /// The rollback's cutover: as ``cutOver(follower:token:old:new:)`` the other way, then the
    /// new store is deleted.
    func cutBack(follower: inout Follower, token: ChangeToken, old: any DataStore, new: any DataStore) throws
        -> Bool
    {
        let (_, _, pause) = try hand(from: new, newLocation, to: old, oldLocation, follower: &follower, token: token,
                                     clearing: [MetadataKeys.switchedAway, Migrator.followKey],
                                     steps: (nil, "rollback-recorded")) { record in
            record.phase = .rolledBack
            record.rollingBack = nil
        }
        try discardNew()
        update {
            $0.phase = .rolledBack
            $0.lastPause = pause
            $0.lagTransactions = 0
        }
        logger?.info("switch rolled back", metadata: ["to": "\(oldLocation)", "pause": "\(pause)"])
        return true
    }

    /// What both cutovers do: hold writes, apply what `follower` has not applied yet, then in
    /// one transaction of `target` (the decisive one) clear the `clearing` keys, take over
    /// `source`'s change feed and record that `target` serves (with the next epoch, and what
    /// `change` sets); then send every read and write to `target`. Returns the record, the feed
    /// position at the cutover and how long writes were held.
    func hand(from source: any DataStore, _ sourceLocation: StoreLocation, to target: any DataStore,
              _ targetLocation: StoreLocation, follower: inout Follower,
              token: ChangeToken, clearing: [String], steps: (applied: String?, recorded: String),
              change: (inout SwitchRecord) -> Void) throws -> (SwitchRecord, ChangeToken, Duration) {
        // Before writes are held: a store without the engine's reference checks and hub is refused.
        let sourceStore = try Store.required(source, at: sourceLocation, for: "a cutover")
        let targetStore = try Store.required(target, at: targetLocation, for: "a cutover")
        let started = ContinuousClock.now
        gate.hold()
        var released = false
        defer { if !released { gate.release(to: nil) } }
        if steps.applied != nil { Self.step("held") }
        _ = try follower.drain()
        let (head, settings) = try source.read { (try $0.changeToken(), try $0.changeFeedSettings()) }
        if let applied = steps.applied { Self.step(applied) }
        var serving = condition.withLock { record }
        serving.epoch += 1
        serving.serving = true
        serving.cutover = head
        change(&serving)
        try target.writeSync { writer in
            for key in clearing { try writer.setReservedMetadata(nil, forKey: key) }
            try writer.continueChangeFeed(after: head, settings: settings)
            try serving.write(into: writer)
        }
        Self.step(steps.recorded)
        targetStore.keepReferences(true)
        condition.withLock {
            record = serving
            // Cut over: other processes may open the switched store (the lock is the work's).
            switchLock?.release()
            switchLock = nil
        }
        gate.release(to: target)
        released = true
        // The constraints the copy went without (PostgreSQL's foreign keys), once the app's
        // writes flow again: adding one checks every row, which the pause need not wait for.
        do {
            try targetStore.enforceReferences()
        } catch {
            logger?.warning("the reference constraints of the new store could not be added; the next launch tries again",
                            metadata: ["store": "\(newLocation)", "error": "\(error)"])
        }
        let pause = ContinuousClock.now - started
        sourceStore.wakeObservers()
        return (serving, head, pause)
    }

    /// Closes and deletes the new store (after a cancel or a rollback).
    func discardNew() throws {
        guard let store = condition.withLock({ self.new }) else {
            if newLocation.exists { try Migrator.acceptingUnfinished { try newLocation.destroy() } }
            return
        }
        try store.close()
        condition.withLock { self.new = nil }
        try Migrator.acceptingUnfinished { try newLocation.destroy() }
    }
}

/// Where a switch's copy started: the old store's feed position, and each entity's last key
/// (`nil`: the entity was empty).
struct CopyStart: Codable {
    var token: ChangeToken
    var lastKeys: [Value?]
}

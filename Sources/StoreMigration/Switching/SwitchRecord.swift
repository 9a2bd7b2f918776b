@_spi(Backend) import DataStoreAPI
import Foundation

/// A switch as one of its two stores records it, in the store's reserved metadata.
///
/// Each store's record says whether that store serves, with the epoch of its last turn at
/// serving: the old store starts at epoch 0, a cutover gives the new store the next epoch in the
/// same transaction as its last changes, and a rollback gives the old store the one after.
/// Whatever a crash leaves, the store whose record serves with the higher epoch is the one
/// that serves.
struct SwitchRecord: Codable, Equatable, Sendable {
    static let key = "datastore.switch"

    /// The switch's identity, the same in both stores: a store whose record names another one
    /// (or none) is not part of this switch.
    var id: UUID
    var old: String
    var new: String
    var epoch: Int
    var serving: Bool
    var phase: SwitchingStore.Phase
    /// Set in the serving new store when a rollback was asked for.
    var rollingBack: Bool?
    var switchedAt: Date?
    /// The feed position at the cutover: the old store equals the new one as of it.
    var cutover: ChangeToken?

    /// Where the record is kept in each store of a switch.
    static let reserved = ReservedRecord<SwitchRecord>(key: key, what: "switch record")

    /// The epochs a record may hold: a retired store's is one under the serving one's (-1 under
    /// the first), and each cutover adds one; a record past them (edited by hand) is damage,
    /// not a number to count on from.
    static let epochs = -1...(1 << 40)

    static func read(from store: any DataStore, named name: String) throws -> SwitchRecord? {
        let record = try reserved.read(from: store, named: name)
        if let record, !epochs.contains(record.epoch) {
            throw StoreError(.corrupt, "the switch record of \(name) holds epoch \(record.epoch), outside "
                + "\(epochs.lowerBound) to \(epochs.upperBound)")
        }
        return record
    }

    func write(into writer: WriteAccessor) throws {
        try Self.reserved.write(self, into: writer)
    }
}

/// What a switching store finds when it opens: which store serves and where the switch
/// stands, the stores opened once each (an LMDB environment must not be opened twice in one
/// process).
struct SwitchOpening {
    var old: (any DataStore)?
    var new: (any DataStore)?
    var serving: any DataStore
    var record: SwitchRecord
    var phase: SwitchingStore.Phase
    /// Whether a launch found the switch under way (the stores are compared before following).
    var resumed = false

    init(old oldLocation: StoreLocation, new newLocation: StoreLocation, schema: Schema,
         policy: SwitchingStore.Policy) throws {
        var oldStore = oldLocation.exists
            ? try Migrator.acceptingUnfinished { try oldLocation.open(schema: nil, durability: .full) } : nil
        var newStore: (any DataStore)?
        do {
            newStore = newLocation.exists
                ? try Migrator.fillingDestination { try newLocation.open(schema: nil, durability: policy.durability) }
                : nil
            let oldRecord = try oldStore.flatMap { try SwitchRecord.read(from: $0, named: oldLocation.description) }
            let newRecord = try newStore.flatMap { try SwitchRecord.read(from: $0, named: newLocation.description) }
            if let newStore, let newRecord, newRecord.serving,
                oldRecord.map({ !$0.serving || $0.epoch < newRecord.epoch }) ?? true
            {
                // The cutover happened: the new store serves.
                try Store.required(newStore, at: newLocation, for: "a switched store").enforceReferences()
                if let store = oldStore, oldRecord?.id != newRecord.id {
                    // Not the store this switch came from (an in-memory store of a later process,
                    // a replaced file): left alone.
                    try store.close()
                    oldStore = nil
                }
                if let oldStore, let oldRecord, oldRecord.serving, let token = newRecord.cutover {
                    // A crash came between the decisive record and the old store's.
                    try Self.retire(oldStore, record: newRecord, newLocation: newLocation, token: token)
                }
                if !policy.keepsOldStore, let store = oldStore {
                    try store.close()
                    oldStore = nil
                    // A directory that also holds a user's file keeps the retired store (never
                    // serving again); the next launch tries again.
                    try Self.dropLeftover(oldLocation)
                    SwitchLock.removeFile(of: oldLocation)
                }
                serving = newStore
                record = newRecord
                phase = newRecord.rollingBack == true && oldStore != nil ? .rollingBack : .switched
            } else if let store = oldStore, let oldRecord, oldRecord.serving,
                oldRecord.phase == .cancelled || oldRecord.phase == .rolledBack
            {
                // The switch ended without a cutover, or was rolled back: only the old store is left.
                if let leftover = newStore, newRecord?.id == oldRecord.id {
                    try leftover.close()
                    newStore = nil
                    try Self.dropLeftover(newLocation)
                }
                serving = store
                record = oldRecord
                phase = oldRecord.phase
            } else if let store = oldStore, let oldRecord, oldRecord.serving, newStore != nil,
                let newRecord, newRecord.id == oldRecord.id, newRecord.phase == .copying || newRecord.phase == .following
            {
                // Under way: the old store serves while the copy or the follow goes on.
                try Self.requireFeed(store, oldLocation)
                serving = store
                record = newRecord
                phase = newRecord.phase
                resumed = true
            } else {
                if let oldRecord, !oldRecord.serving {
                    throw StoreError(.notFound, "\(oldLocation) was switched to \(newLocation), which is missing "
                        + "or is not that switch's store; the data written since the switch is there")
                }
                if let leftover = newStore {
                    guard newRecord != nil else {
                        throw StoreError(.invalidArgument, "\(newLocation) already holds a store that is not this "
                            + "switch's; move it away or switch to another location")
                    }
                    // What an earlier switch from a store that is gone (an in-memory store of an
                    // ended process, a replaced file) left: start over.
                    try leftover.close()
                    newStore = nil
                    try Migrator.acceptingUnfinished { try newLocation.destroy() }
                }
                let store = try oldStore ?? oldLocation.open(schema: schema, durability: .full)
                oldStore = store
                try Self.requireFeed(store, oldLocation)
                let started = try Self.start(old: store, oldLocation: oldLocation, newLocation: newLocation,
                                             policy: policy, epoch: oldRecord?.epoch ?? 0)
                newStore = started.new
                serving = store
                record = started.record
                phase = .copying
            }
        } catch {
            try? newStore?.close()
            try? oldStore?.close()
            throw error
        }
        old = oldStore
        new = newStore
    }

    /// Throws `invalidArgument` when the old store's change feed is off: the switch follows it.
    static func requireFeed(_ store: any DataStore, _ location: StoreLocation) throws {
        guard try store.read({ try $0.changeFeedSettings() }).isEnabled else {
            throw StoreError(.invalidArgument, "\(location) has its change feed off, and a switch follows it to its "
                + "cutover; turn it on (setChangeFeedSettings) first")
        }
    }

    /// Records a new switch in the old store, then makes the new store (staged, marked
    /// unfinished, with its own record).
    static func start(old: any DataStore, oldLocation: StoreLocation, newLocation: StoreLocation,
                      policy: SwitchingStore.Policy, epoch: Int) throws -> (record: SwitchRecord, new: any DataStore) {
        var record = SwitchRecord(id: UUID(), old: oldLocation.description, new: newLocation.description, epoch: epoch,
                                  serving: true, phase: .copying)
        try old.writeSync { try record.write(into: $0) }
        record.serving = false
        let store = try Migrator.create(newLocation, schema: old.schema, marker: oldLocation.description,
                                        permissions: FilePermissions(of: oldLocation), durability: policy.durability,
                                        preparing: { try record.write(into: $0) })
        return (record, store)
    }

    /// Marks the old store after the cutover: it no longer serves, opens only through the
    /// switching store (or the migration tools), and knows where a rollback starts following the
    /// new store from.
    /// Deletes a store the switch no longer needs, when opening: one whose directory also holds
    /// a user's file is refused by its backend (`invalidArgument`) and kept, since the opening
    /// must not fail for it; its record says it no longer serves.
    static func dropLeftover(_ location: StoreLocation) throws {
        do {
            try Migrator.acceptingUnfinished { try location.destroy() }
        } catch let error as StoreError where error.code == .invalidArgument {
            return
        }
    }

    static func retire(_ old: any DataStore, record: SwitchRecord, newLocation: StoreLocation,
                       token: ChangeToken) throws {
        var retired = record
        retired.serving = false
        retired.epoch = record.epoch - 1
        retired.rollingBack = nil
        try old.writeSync { writer in
            try writer.setReservedMetadata(Array(newLocation.description.utf8), forKey: MetadataKeys.switchedAway)
            try Migrator.writeFollowState(writer, source: newLocation, token: token)
            try retired.write(into: writer)
        }
    }
}

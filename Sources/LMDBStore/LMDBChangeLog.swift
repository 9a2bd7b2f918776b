@_spi(Backend) import DataStoreAPI

/// The change feed's entries where they have always been, in `_ds_meta` under
/// `datastore.feed.` and 16 hex digits, read as a log of their own: the feed's bounds are the
/// first and last keys of that range (two cursor positionings), so a recorded transaction writes
/// its entry and not the feed's state beside it. Stores written before keep their entries; the
/// state they hold is a floor under the bounds (``ChangeLogStoring``).
extension LMDBTransaction: ChangeLogWriting {
    var changeLogStorage: (any ChangeLogStoring)? { self }
    var changeLogWriter: (any ChangeLogWriting)? { self }

    func changeLogBounds() throws -> (first: UInt64, last: UInt64)? {
        var firstKey: [UInt8]?
        try txn.forEach(databases.meta, from: ChangeLog.entryKeyPrefix) { key, _ in
            if key.starts(with: ChangeLog.entryKeyPrefix) { firstKey = Array(key) }
            return false
        }
        guard let firstKey else { return nil }
        guard let lastKey = try txn.lastKey(databases.meta, before: ChangeLog.entryKeysEnd) else { return nil }
        let first = try sequence(firstKey), last = try sequence(lastKey)
        guard first <= last else { throw damaged(firstKey) }
        return (first, last)
    }

    func changeLogEntry(_ sequence: UInt64) throws -> [UInt8]? {
        try txn.withValue(databases.meta, ChangeLog.entryKeyBytes(sequence)) { Array($0) }
    }

    func appendChangeLog(_ sequence: UInt64, _ entry: [UInt8]) throws {
        try txn.put(databases.meta, ChangeLog.entryKeyBytes(sequence), entry)
    }

    func removeChangeLog(before sequence: UInt64) throws {
        guard let bounds = try changeLogBounds(), bounds.first < sequence else { return }
        for old in bounds.first..<(bounds.last < sequence ? bounds.last + 1 : sequence) {
            try txn.delete(databases.meta, ChangeLog.entryKeyBytes(old))
        }
    }

    private func sequence(_ key: [UInt8]) throws -> UInt64 {
        guard let sequence = key.withUnsafeBytes({ ChangeLog.entrySequence(fromKey: $0) }) else { throw damaged(key) }
        return sequence
    }

    private func damaged(_ key: [UInt8]) -> StoreError {
        StoreError(.corrupt, "\(txn.environment.path): the change feed's entry key '\(String(decoding: key, as: UTF8.self))' "
            + "in _ds_meta is damaged")
    }
}

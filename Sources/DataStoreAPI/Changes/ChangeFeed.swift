import Foundation

extension ReadAccessor {
    /// The token of the last transaction this snapshot holds: what a reader that has seen this
    /// snapshot passes to ``changes(since:limit:)`` later.
    public func changeToken() throws -> ChangeToken {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        guard let state = try ChangeLog.readState(reader) else { return ChangeToken(store: nil, sequence: 0) }
        return ChangeToken(store: state.id, sequence: state.next - 1)
    }

    /// Up to `limit` transactions after `token`, in commit order, as this snapshot holds them.
    /// - Throws: `changesExpired` when the feed no longer holds the transaction after `token`
    ///   (retention, a feed turned off, a schema upgrade or a migration copy since);
    ///   `invalidArgument` for a token of another store, or one past this snapshot's last.
    public func changes(since token: ChangeToken, limit: Int = 1_000) throws -> [ChangeSet] {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        guard limit > 0 else {
            throw StoreError(.invalidArgument, "changes(since:) needs a positive limit, not \(limit)")
        }
        return try ChangeLog.read(reader, since: token, limit: limit)
    }

    /// The store's change-feed settings.
    public func changeFeedSettings() throws -> ChangeFeedSettings {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        return try ChangeLog.readState(reader)?.settings ?? ChangeFeedSettings()
    }
}

extension WriteAccessor {
    /// Changes the store's change-feed settings in this transaction. Lowering the retention
    /// drops the oldest transactions now; turning the feed off drops it all.
    public func setChangeFeedSettings(_ settings: ChangeFeedSettings) throws {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        guard !(writer is OverlayTransaction) else {
            throw StoreError(.invalidArgument, "a child store has no change feed of its own; set the feed's settings "
                + "on the store it was made from")
        }
        guard settings.retainedTransactions >= 1, settings.maxKeysPerTransaction >= 1 else {
            throw StoreError(.invalidArgument, "change-feed retention and keys per transaction must be at least 1 "
                + "(got \(settings.retainedTransactions) and \(settings.maxKeysPerTransaction))")
        }
        try ChangeLog.configure(writer, settings)
    }

    /// Makes the feed go on from `head` (another store's token), dropping this store's entries:
    /// tokens of the store it takes over from stay valid here. What a switching store's cutover
    /// writes.
    package func continueChangeFeed(after head: ChangeToken, settings: ChangeFeedSettings) throws {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        try ChangeLog.continueFeed(writer, after: head, settings: settings)
    }
}

#if Postgres
/// The SQLSTATEs the store decides on, named once. A SQLSTATE is five digits or capital letters,
/// the same whatever language the server (`lc_messages`) and libpq (`LANG`) speak; the store
/// never decides on a message's words.
enum PostgresSQLState {
    /// `08…`: the connection is gone or could not be made.
    static let connectionExceptionClass = "08"
    /// The client could not connect (libpq sends no SQLSTATE then: the store gives this one to
    /// every failed connection, whatever the server said).
    static let unableToConnect = "08001"
    static let uniqueViolation = "23505"
    /// A null in a `NOT NULL` column: the store's own statements meet it only in the check of the
    /// feed's state at commit (``FeedStateCache``), on `_ds_feed.seq`.
    static let notNullViolation = "23502"
    static let foreignKeyViolation = "23503"
    static let readOnlyTransaction = "25006"
    static let inFailedTransaction = "25P02"
    static let serializationFailure = "40001"
    static let deadlockDetected = "40P01"
    static let lockNotAvailable = "55P03"
    static let diskFull = "53100"
    static let tooManyConnections = "53300"
    static let invalidSchemaName = "3F000"
    /// A DROP … RESTRICT refused: other objects depend on the one dropped.
    static let dependentObjectsStillExist = "2BP01"
    static let undefinedTable = "42P01"
    /// "cached plan must not change result type" (a table changed under a prepared statement).
    static let featureNotSupported = "0A000"
    static let adminShutdown = "57P01"
    static let crashShutdown = "57P02"
    /// The server is starting up, shutting down or in recovery (not accepting connections now).
    static let cannotConnectNow = "57P03"
    /// `XX…`: internal errors (`XX001` data corrupted, `XX002` index corrupted).
    static let internalErrorClass = "XX"

    /// The server ended the session (it is shutting down, crashed, or was told to).
    static let sessionEnded: Set<String> = [adminShutdown, crashShutdown, cannotConnectNow]

    /// Whether the server rolled a transaction back for a conflict with concurrent ones (a
    /// serialization failure, a deadlock, or the gate's lock not taken in time): running its
    /// block again may succeed.
    static func isConflict(_ state: String?) -> Bool {
        state == serializationFailure || state == deadlockDetected || state == lockNotAvailable
    }

    /// Whether a connection failing with `state` may succeed later: the server is going down,
    /// starting, in recovery, out of connection slots, or the network lost the connection.
    static func isTransient(_ state: String) -> Bool {
        state.hasPrefix(connectionExceptionClass) || sessionEnded.contains(state) || state == tooManyConnections
    }

    /// The SQLSTATE in a message libpq wrote in its verbose form (`FATAL:  57P03: the database
    /// system is starting up`), whatever language its words are in: the first five digits or
    /// capital letters, holding a digit, followed by a colon.
    static func inVerboseMessage(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 6 else { return nil }
        func isCode(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) }
        for start in 0...(bytes.count - 6) {
            let code = bytes[start..<start + 5]
            guard bytes[start + 5] == UInt8(ascii: ":"), code.allSatisfy(isCode),
                  code.contains(where: { (0x30...0x39).contains($0) }),
                  start == 0 || !isCode(bytes[start - 1]) else { continue }
            return String(decoding: code, as: UTF8.self)
        }
        return nil
    }
}
#endif

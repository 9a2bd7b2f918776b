internal import CChecksum
import Foundation

/// The change feed's storage, written once for every backend: a state value in the metadata
/// (`datastore.feed`) and one entry per recorded transaction, written by the transaction itself,
/// so the feed is exactly as durable as the data. Entries live in the backend's own storage when
/// its transactions offer one (``ChangeLogStoring``, SQLite's `_ds_feed` table), else in the
/// metadata (`datastore.feed.` + 16 hex digits of the sequence number).
///
/// Sequence numbers are dense where the backend lets the feed number the entries: a reader walks
/// from its token by point lookups, and a missing entry below the state's `next` can only mean
/// the feed dropped it (retention, feed off, restart), which is `changesExpired`, never a
/// silent gap. A backend that numbers the entries itself (``ChangeLogNumbering``: writers of many
/// connections at once) may leave gaps; readers then read ranges up to the backend's watermark,
/// and expiry is decided by the floor the backend keeps.
package enum ChangeLog {
    package static let stateKey = "datastore.feed"
    /// The largest number the feed gives a transaction: SQLite's largest row number, less one,
    /// so that the next number after any entry (`next`, at most SQLite's largest) is still one.
    /// A stored number past it is damage, not an overflow; a write past it fails.
    static let maxSequence = UInt64(Int64.max) - 1

    /// The `next` of a stored state (for a backend's format upgrade), `nil` when it cannot be read.
    package static func storedNext(_ bytes: [UInt8]) -> UInt64? { try? decodeState(bytes).next }
    static let entryPrefix = "datastore.feed."

    /// The feed's state.
    struct State: Equatable {
        /// The feed's identity, which tokens carry.
        var id: UUID
        /// The sequence number the next recorded transaction gets.
        var next: UInt64
        /// The oldest entry still stored (`next` when none is). Entries past the retention are
        /// removed in batches (``trimSlack``), so this may lag behind ``first``.
        var held: UInt64
        var settings: ChangeFeedSettings
        /// The version of the stored state this was read from (``stateVersion`` for a new one).
        var storedVersion = ChangeLog.stateVersion
        /// Whether the backend numbers the entries (``ChangeLogNumbering``): numbers then have
        /// gaps, the backend applies the retention, and ``held`` (its floor) alone says what
        /// expired.
        var numbered = false

        var head: ChangeToken { ChangeToken(store: id, sequence: next - 1) }

        /// The oldest transaction a reader may still follow: the retention's bound, exact after
        /// every commit whatever entries older than it are still stored.
        var first: UInt64 {
            if numbered { return held }
            let keep = UInt64(settings.retainedTransactions)
            return max(held, next > keep ? next - keep : 0)
        }

        /// How many entries past the retention may wait for their removal: an eighth of the
        /// retention, at most 256. A commit then writes its own entry and, once in that many
        /// commits, removes the batch, instead of touching the oldest entry's page every time.
        var trimSlack: UInt64 { UInt64(min(settings.retainedTransactions / 8, 256)) }
    }

    static func entryKey(_ sequence: UInt64) -> String {
        String(decoding: entryKeyBytes(sequence), as: UTF8.self)
    }

    /// The metadata key of entry `sequence`: the prefix, then 16 lowercase hex digits, so that
    /// entries sort by number (a backend may keep its entries under these keys and find the
    /// feed's bounds at the two ends of the prefix's range, as LMDB does).
    package static func entryKeyBytes(_ sequence: UInt64) -> [UInt8] {
        var key = Array(entryPrefix.utf8)
        key.reserveCapacity(key.count + 16)
        for shift in stride(from: 60, through: 0, by: -4) {
            key.append(hexDigits[Int(truncatingIfNeeded: (sequence >> UInt64(shift)) & 0xF)])
        }
        return key
    }

    /// The bytes of the entries' key prefix.
    package static let entryKeyPrefix = Array(entryPrefix.utf8)
    /// The first key after every entry key: the prefix with its last byte raised by one.
    package static let entryKeysEnd = Array(entryKeyPrefix.dropLast()) + [entryKeyPrefix[entryKeyPrefix.count - 1] + 1]

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// The number of the entry stored under `key`, or `nil` when `key` is not one that
    /// ``entryKeyBytes(_:)`` makes.
    package static func entrySequence(fromKey key: UnsafeRawBufferPointer) -> UInt64? {
        let prefix = entryKeyPrefix
        guard key.count == prefix.count + 16, key.prefix(prefix.count).elementsEqual(prefix) else { return nil }
        var sequence: UInt64 = 0
        for byte in key.dropFirst(prefix.count) {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            sequence = sequence << 4 | UInt64(digit)
        }
        return sequence
    }

    // MARK: Where entries live

    private static func entry(_ reader: any StorageReader, _ sequence: UInt64) throws -> [UInt8]? {
        if let log = reader.changeLogStorage { return try log.changeLogEntry(sequence) }
        return try reader.metadata(forKey: entryKey(sequence))
    }

    /// The entry of `sequence`, which `state` says the feed holds.
    /// - Throws: `corrupt` when it is missing.
    private static func heldEntry(_ reader: any StorageReader, _ sequence: UInt64, _ state: State) throws -> [UInt8] {
        guard let bytes = try entry(reader, sequence) else {
            throw StoreError(.corrupt, "the change feed's transaction \(sequence) is missing although the feed "
                + "holds \(state.first) to \(state.next - 1)")
        }
        return bytes
    }

    /// Removes the entries below `sequence`, from `state.held` on.
    private static func remove(_ writer: any StorageWriter, _ state: State, before sequence: UInt64) throws {
        guard state.held < sequence else { return }
        if let log = writer.changeLogWriter { return try log.removeChangeLog(before: sequence) }
        for old in state.held..<sequence { try writer.setMetadata(nil, forKey: entryKey(old)) }
    }

    // MARK: Reading

    /// The feed's state. With a backend's own entry storage, the stored value keeps the identity,
    /// the settings and a floor for `next` (written when those change); the bounds come from the
    /// entries themselves. Without `window`, a backend that numbers its entries itself is not
    /// asked for its window (its snapshot's watermark, which costs a write a parse of the
    /// server's snapshot): `next` and `held` are then the stored floor, not the feed's, which is
    /// all a write needs (the settings; the backend numbers its entry itself).
    static func readState(_ reader: any StorageReader, window: Bool = true) throws -> State? {
        let reader = reader.feedTransaction
        guard let bytes = try reader.metadata(forKey: stateKey) else { return nil }
        var state = try decodeState(bytes)
        let log = reader.changeLogStorage
        if let numbering = log?.changeLogNumbering {
            state.numbered = true
            guard window else { return state }
            let window = try numbering.changeLogWindow()
            state.held = window.floor
            state.next = max(window.released, window.floor > 0 ? window.floor - 1 : 0) + 1
        } else if let log {
            if let bounds = try log.changeLogBounds() {
                guard bounds.last <= maxSequence else {
                    throw StoreError(.corrupt, "the change feed holds an entry numbered \(bounds.last), past the "
                        + "largest number it gives (\(maxSequence))")
                }
                state.next = max(state.next, bounds.last + 1)
                state.held = bounds.first
            } else {
                state.held = state.next
            }
        }
        return state
    }

    /// Reads the feed's state and every entry it still holds, each decoded with its checksum
    /// checked, for a check of the store; returns how many entries were read.
    /// - Throws: `corrupt` naming the state or the first damaged entry.
    static func checkEntries(_ reader: any StorageReader) throws -> Int {
        guard let state = try readState(reader), state.settings.isEnabled, state.first < state.next else { return 0 }
        let reader = reader.feedTransaction
        if let numbering = reader.changeLogStorage?.changeLogNumbering {
            var count = 0
            var after = state.first > 0 ? state.first - 1 : 0
            while after < state.next - 1 {
                let page = try numbering.changeLogEntries(after: after, through: state.next - 1, limit: 1_000)
                guard let last = page.last else { break }
                for entry in page {
                    _ = try decodeEntry(entry.entry, token: ChangeToken(store: state.id, sequence: entry.sequence))
                }
                count += page.count
                after = last.sequence
            }
            return count
        }
        for sequence in state.first..<state.next {
            _ = try decodeEntry(try heldEntry(reader, sequence, state), token: ChangeToken(store: state.id, sequence: sequence))
        }
        return Int(state.next - state.first)
    }

    /// The head token of a store, read in its own read transaction.
    package static func head(of engine: any StorageEngine) throws -> ChangeToken {
        try engine.withReader { reader in
            guard let state = try readState(reader) else { return ChangeToken(store: nil, sequence: 0) }
            return state.head
        }
    }

    static func read(_ reader: any StorageReader, since token: ChangeToken, limit: Int) throws -> [ChangeSet] {
        guard let state = try readState(reader) else {
            if token.sequence == 0 && token.store == nil { return [] }
            throw StoreError(.invalidArgument, "change token \(token) is not from this store, whose change feed "
                + "has recorded nothing yet")
        }
        if let id = token.store, id != state.id {
            throw StoreError(.invalidArgument, "change token \(token) is from another store (this one's feed is "
                + "\(state.head))")
        }
        let reader = reader.feedTransaction
        let numbering = reader.changeLogStorage?.changeLogNumbering
        // A token past the watermark but not past the numbers taken: its transactions are not
        // all final yet.
        if let numbering, token.sequence >= state.next, token.sequence <= (try numbering.changeLogIssued()) {
            return []
        }
        guard token.sequence < state.next else {
            throw StoreError(.invalidArgument, "change token \(token) is ahead of this store's feed, which ends at "
                + "\(state.head) (was the store restored from an older copy?)")
        }
        guard state.settings.isEnabled else {
            throw StoreError(.changesExpired, "change token \(token) cannot be followed: the store's change feed is "
                + "off; resynchronize from a fresh read")
        }
        if token.sequence + 1 == state.next { return [] }
        guard token.sequence + 1 >= state.first else {
            throw StoreError(.changesExpired, "change token \(token) has expired: the store's change feed keeps "
                + "transactions \(state.first) to \(state.next - 1) (retention \(state.settings.retainedTransactions), "
                + "or the feed restarted after a migration); resynchronize from a fresh read")
        }
        if let numbering {
            // The retention counts entries, not numbers (a rolled-back transaction's number
            // holds none): a token with more than that many entries after it expired.
            // At most Int.max - 1, so that one more can be counted.
            let keep = min(state.settings.retainedTransactions, Int.max - 1)
            if try numbering.changeLogCount(after: token.sequence, through: state.next - 1, atMost: keep + 1) > keep {
                throw StoreError(.changesExpired, "change token \(token) has expired: the store's change feed keeps "
                    + "its newest \(state.settings.retainedTransactions) transactions, up to \(state.next - 1), and more were committed since the token; "
                    + "resynchronize from a fresh read")
            }
            return try numbering.changeLogEntries(after: token.sequence, through: state.next - 1, limit: limit).map {
                try decodeEntry($0.entry, token: ChangeToken(store: state.id, sequence: $0.sequence))
            }
        }
        var result: [ChangeSet] = []
        var sequence = token.sequence + 1
        while sequence < state.next && result.count < limit {
            result.append(try decodeEntry(try heldEntry(reader, sequence, state),
                                          token: ChangeToken(store: state.id, sequence: sequence)))
            sequence += 1
        }
        return result
    }

    // MARK: Writing

    /// Appends one transaction's changes, on a backend's own transaction (no recorder or overlay
    /// around it), to the feed in `known` (read when `nil`); returns the feed's state after the
    /// append, `nil` when the feed is off (nothing written).
    static func append(_ writer: any StorageWriter, _ changes: RecordedChanges, state known: State?) throws
        -> State?
    {
        let known = try known ?? readState(writer)
        var state = known ?? State(id: UUID(), next: 1, held: 1, settings: ChangeFeedSettings())
        guard state.settings.isEnabled else { return nil }
        let now = Timestamp.now()
        // The backend's entry storage bound once, not copied as an optional (each copy of an
        // optional existential went through the standard library's generic witnesses).
        let entry = encodeEntry(changes, committedAt: now)
        guard state.next <= maxSequence else {
            throw StoreError(.limitExceeded, "the change feed has numbered \(maxSequence) transactions, the most it "
                + "can number")
        }
        let logged: Bool
        if let log = writer.changeLogWriter {
            try log.appendChangeLog(state.next, entry)
            state.next += 1
            if let numbering = log.changeLogNumbering {
                try numbering.trimChangeLog(keeping: UInt64(state.settings.retainedTransactions),
                                            slack: max(1, state.trimSlack))
            } else {
                try trim(writer, &state)
            }
            logged = true
        } else {
            try writer.setMetadata(entry, forKey: entryKey(state.next))
            state.next += 1
            try trim(writer, &state)
            logged = false
        }
        // With the backend's own entry storage the bounds need no writing: the state is written
        // only when it is new, or when a version that wrote it at every commit left it (version
        // 1: that version would take its stale `next` for the truth and number entries again).
        if known == nil || !logged || state.storedVersion < stateVersion {
            try writer.setMetadata(encodeState(state), forKey: stateKey)
            state.storedVersion = stateVersion
        }
        return state
    }

    /// Removes the entries past the retention once more than ``State/trimSlack`` of them wait
    /// (readers never see them: ``State/first`` already excludes them).
    private static func trim(_ writer: any StorageWriter, _ state: inout State) throws {
        guard !state.numbered else { return }
        let keep = UInt64(state.settings.retainedTransactions)
        guard state.next - state.held > keep + state.trimSlack else { return }
        try remove(writer, state, before: state.next - keep)
        state.held = state.next - keep
    }

    /// Drops every entry, so that every token before now expires: what a transaction the feed
    /// does not record (a schema upgrade, a migration copy) must do.
    package static func restart(_ writer: any StorageWriter) throws {
        // (A recorder's state, read before, would be stale: see ``configure(_:_:)``.)
        (writer as? ChangeRecorder)?.forgetFeedState()
        let writer = writer.feedWriter
        guard var state = try readState(writer) else { return }
        if let numbering = writer.changeLogWriter?.changeLogNumbering { return try numbering.restartChangeLog() }
        try remove(writer, state, before: state.next)
        // The unrecorded transaction takes a number of its own, so even the head token before it
        // expires (while there is a number left to take).
        if state.next <= maxSequence { state.next += 1 }
        state.held = state.next
        try writer.setMetadata(encodeState(state), forKey: stateKey)
    }

    /// Drops every entry and makes the feed go on from `head`, with its identity: the next
    /// recorded transaction is `head.sequence + 1`. A store that takes over from another (a
    /// switching store's cutover) continues that store's feed, so that its tokens stay valid.
    package static func continueFeed(_ writer: any StorageWriter, after head: ChangeToken,
                                     settings: ChangeFeedSettings) throws {
        (writer as? ChangeRecorder)?.forgetFeedState()
        let writer = writer.feedWriter
        guard head.sequence < maxSequence else {
            throw StoreError(.invalidArgument, "change token \(head) is numbered past the largest number a feed gives "
                + "(\(maxSequence))")
        }
        let next = head.sequence + 1
        if let numbering = writer.changeLogWriter?.changeLogNumbering {
            try numbering.continueChangeLog(after: head.sequence)
            let state = State(id: head.store ?? UUID(), next: next, held: next, settings: settings)
            return try writer.setMetadata(encodeState(state), forKey: stateKey)
        }
        if let state = try readState(writer) { try remove(writer, state, before: state.next) }
        let state = State(id: head.store ?? UUID(), next: next, held: next, settings: settings)
        try writer.setMetadata(encodeState(state), forKey: stateKey)
    }

    static func configure(_ writer: any StorageWriter, _ settings: ChangeFeedSettings) throws {
        // The transaction's recorder read the state at its first write: the append at its commit
        // must read the state this leaves.
        (writer as? ChangeRecorder)?.forgetFeedState()
        let writer = writer.feedWriter
        var state = try readState(writer) ?? State(id: UUID(), next: 1, held: 1, settings: settings)
        let wasEnabled = state.settings.isEnabled
        // Entries the old retention already expired stay expired under a longer one.
        if let numbering = writer.changeLogWriter?.changeLogNumbering {
            try numbering.expireChangeLog(keeping: UInt64(state.settings.retainedTransactions))
        }
        try remove(writer, state, before: state.first)
        state.held = state.first
        state.settings = settings
        if !settings.isEnabled || !wasEnabled {
            try writer.setMetadata(encodeState(state), forKey: stateKey)
            if wasEnabled != settings.isEnabled { try restart(writer) }
            return
        }
        try trim(writer, &state)
        try writer.setMetadata(encodeState(state), forKey: stateKey)
    }

    // MARK: Encoding

    /// 2 since the state stopped being written at every commit where a backend keeps the entries
    /// (LMDB, SQLite, PostgreSQL): a version that knows only 1 refuses the feed of such a store
    /// (`incompatibleFormat`) rather than trusting a `next` that is no longer kept up to date.
    /// Version 1 is read as before, and rewritten as 2 at the next recorded commit.
    /// 3 adds the CRC-32C of the bytes before it (four bytes, little-endian), as the entries
    /// have: a changed byte in the feed's identity or its numbers is damage, where it could have
    /// been read as another feed. A state of version 1 or 2 is read as before and written as 3
    /// at the next commit that writes it.
    static let stateVersion: UInt8 = 3
    /// The length of a state of version 3, its sum included; 4 bytes less for versions 1 and 2.
    private static let sealedStateLength = 54
    /// Entries of version 2 end with the CRC-32C of the bytes before it (four bytes,
    /// little-endian), checked when the entry is read; version 1, which a store written before
    /// keeps until its retention trims them, had none. Version 3 writes each key's length as
    /// LEB128 instead of four bytes, and an int entity's keys as the differences between one
    /// key and the one before it (a group flag, ``differenceKeys``): a bulk load's entry took 13
    /// bytes per item (a kind, a length, 8 bytes of key), a tenth of the bytes of its rows; now 2.
    /// Entries of versions 1 and 2 are read as before.
    private static let entryVersion: UInt8 = 3
    private static let lengthPrefixedEntryVersion: UInt8 = 2
    private static let unsealedEntryVersion: UInt8 = 1
    /// The group flag of an entry of version 3 whose keys are ints, each written as the LEB128 of
    /// the zigzag of its difference from the key before it (the first from 0, in wrapping
    /// arithmetic), not as a length and bytes.
    private static let differenceKeys: UInt8 = 4

    static func encodeState(_ state: State) -> [UInt8] {
        var out = FeedBytes()
        out.byte(stateVersion)
        out.raw(withUnsafeBytes(of: state.id.uuid) { Array($0) })
        out.u64(state.next)
        out.u64(state.held)
        out.u64(UInt64(state.settings.retainedTransactions))
        out.u64(UInt64(state.settings.maxKeysPerTransaction))
        out.byte(state.settings.isEnabled ? 1 : 0)
        out.seal()
        return out.bytes
    }

    private static func unknownStateVersion(_ version: UInt8) -> StoreError {
        StoreError(.incompatibleFormat, "the change feed's state has an unknown version (\(version)): a newer version "
            + "of the toolkit wrote this store's feed")
    }

    static func decodeState(_ stored: [UInt8]) throws -> State {
        // A state of the sealed length is read by its sum before its version byte, so that a
        // changed version byte is damage too, not a version this one does not know. (Read where
        // it is, its sum checked in place: a PostgreSQL write decodes the state every time.)
        var end = stored.count
        if stored.count == sealedStateLength {
            try SealedBytes.check(stored, what: "the change feed's state")
            end -= 4
            // Intact, of a version after this one's (which may keep the sealed length).
            if stored[0] > stateVersion { throw unknownStateVersion(stored[0]) }
            guard stored[0] == stateVersion else {
                throw StoreError(.corrupt, "the change feed's state is damaged")
            }
        } else if stored.first == stateVersion {
            throw StoreError(.corrupt, "the change feed's state is damaged")
        }
        var input = FeedReader(stored, end: end, what: "the change feed's state")
        let version = try input.byte()
        guard version == 1 || version == 2 || version == stateVersion else { throw unknownStateVersion(version) }
        let id = UUID(uuid: try input.uuid())
        let next = try input.u64(), held = try input.u64()
        let retention = try input.u64(), maxKeys = try input.u64()
        let enabled = try input.byte() == 1
        guard next >= 1, next <= maxSequence + 1, held <= next, retention >= 1, retention <= UInt64(Int.max), maxKeys >= 1,
            maxKeys <= UInt64(Int.max), input.isAtEnd
        else {
            throw StoreError(.corrupt, "the change feed's state is damaged")
        }
        return State(id: id, next: next, held: held, settings: ChangeFeedSettings(
            isEnabled: enabled, retainedTransactions: Int(retention), maxKeysPerTransaction: Int(maxKeys)),
            storedVersion: version)
    }

    /// The entry's bytes: its version, the commit's time, each entity's group (its name, flags,
    /// key type, and each item's kind and key: the key's LEB128 length and bytes, or an int
    /// key's difference from the one before, ``differenceKeys``), then the CRC-32C of all of it
    /// (``SealedBytes``). Written in place into one buffer of the exact size: appended a value at
    /// a time (five appends of a few bytes, a buffer per group, the checksum's four bytes that
    /// made the array grow), a one-insert transaction's entry took about 3,000 instructions.
    static func encodeEntry(_ changes: RecordedChanges, committedAt: Timestamp) -> [UInt8] {
        // Each group read where the array keeps it: `for group in changes.entities` copied each
        // out, retaining and releasing its name and its three arrays, twice (about 560
        // instructions of a one-insert transaction's entry).
        changes.entities.withUnsafeBufferPointer { groups in
            var size = 1 + 8 + 4 + 4
            for group in groups.indices {
                size += groupSize(groups.baseAddress.unsafelyUnwrapped + group)
            }
            // Reserved and then filled in place (`init(unsafeUninitializedCapacity:)` allocates
            // through the standard library's unspecialized code, which looked up the array's
            // type, about 500 instructions an entry; zeroing the bytes first costs less).
            var entry: [UInt8] = []
            entry.reserveCapacity(size)
            entry.append(contentsOf: repeatElement(0, count: size))
            entry.withUnsafeMutableBufferPointer { buffer in
                var out = EntryWriter(UnsafeMutableRawBufferPointer(buffer))
                out.byte(entryVersion)
                out.u64(UInt64(bitPattern: committedAt.microsecondsSinceEpoch))
                out.u32(groups.count)
                for group in groups.indices {
                    write(groups.baseAddress.unsafelyUnwrapped + group, to: &out)
                }
                let sum = ds_crc32c(0, buffer.baseAddress, out.at)
                out.u32(Int(sum))
                precondition(out.at == size, "a feed entry's size was miscounted")
            }
            return entry
        }
    }

    /// The bytes ``encodeEntry(_:committedAt:)`` writes for `group`.
    @inline(__always)
    private static func groupSize(_ group: UnsafePointer<RecordedChanges.Group>) -> Int {
        // ``write(_:to:)`` reads key i for kind i, unchecked in a release build: one key a kind.
        precondition(group.pointee.kinds.count == group.pointee.keys.count, "a feed group's keys and kinds differ in number")
        var size = 4 + group.pointee.entity.utf8.count + 1 + 1 + 4 + group.pointee.kinds.count
        if group.pointee.keys.isWords {
            var previous: Int64 = 0
            group.pointee.keys.words.withUnsafeBufferPointer { words in
                for word in words {
                    let key = intKey(word)
                    size += FieldWriter.leb128Size(zigzag(key &- previous))
                    previous = key
                }
            }
        } else {
            for i in 0..<group.pointee.keys.count {
                let count = group.pointee.keys.withKey(i) { $0.count }
                size += FieldWriter.leb128Size(UInt64(count)) + count
            }
        }
        return size
    }

    /// Writes `group` as ``encodeEntry(_:committedAt:)`` does.
    @inline(__always)
    private static func write(_ group: UnsafePointer<RecordedChanges.Group>, to out: inout EntryWriter) {
        var name = group.pointee.entity
        name.withUTF8 { out.u32($0.count); out.bytes(UnsafeRawBufferPointer($0)) }
        let isWords = group.pointee.keys.isWords
        out.byte((group.pointee.cleared ? 1 : 0) | (group.pointee.overflowed ? 2 : 0) | (isWords ? differenceKeys : 0))
        out.byte(keyTypeCode(group.pointee.keyType))
        out.u32(group.pointee.kinds.count)
        if isWords {
            group.pointee.keys.words.withUnsafeBufferPointer { words in
                var previous: Int64 = 0
                group.pointee.kinds.forEach { i, kind in
                    let key = intKey(words[i])
                    out.byte(kind.rawValue)
                    out.leb128(zigzag(key &- previous))
                    previous = key
                }
            }
        } else {
            group.pointee.kinds.forEach { i, kind in
                out.byte(kind.rawValue)
                group.pointee.keys.withKey(i) { key in
                    out.leb128(UInt64(key.count))
                    out.bytes(key)
                }
            }
        }
    }

    /// The int an int key's word is (``TouchedKeys/words``: its encoding read big-endian).
    @inline(__always)
    private static func intKey(_ word: UInt64) -> Int64 { Int64(bitPattern: word ^ (1 << 63)) }

    /// A signed difference as an unsigned number that is small when the difference is near 0.
    @inline(__always)
    private static func zigzag(_ n: Int64) -> UInt64 { UInt64(bitPattern: (n << 1) ^ (n >> 63)) }

    @inline(__always)
    private static func unzigzag(_ n: UInt64) -> Int64 { Int64(bitPattern: n >> 1) ^ -Int64(bitPattern: n & 1) }

    /// Writes a feed entry's values into a buffer its caller sized exactly.
    private struct EntryWriter {
        let out: UnsafeMutableRawBufferPointer
        var at = 0

        init(_ out: UnsafeMutableRawBufferPointer) { self.out = out }

        mutating func byte(_ value: UInt8) {
            out[at] = value
            at += 1
        }

        mutating func u32(_ value: Int) {
            out.storeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian, toByteOffset: at, as: UInt32.self)
            at += 4
        }

        mutating func u64(_ value: UInt64) {
            out.storeBytes(of: value.littleEndian, toByteOffset: at, as: UInt64.self)
            at += 8
        }

        /// `value` in LEB128, as a compact record writes a length (``FieldWriter``).
        mutating func leb128(_ value: UInt64) {
            at += FieldWriter.writeLEB128(value, at: out.baseAddress.unsafelyUnwrapped + at)
        }

        mutating func bytes(_ value: UnsafeRawBufferPointer) {
            guard let source = value.baseAddress, value.count > 0, let base = out.baseAddress else { return }
            (base + at).copyMemory(from: source, byteCount: value.count)
            at += value.count
        }
    }

    static func decodeEntry(_ stored: [UInt8], token: ChangeToken) throws -> ChangeSet {
        let what = "the change feed's transaction \(token.sequence)"
        var bytes = stored
        let version = stored.first
        if version == entryVersion || version == lengthPrefixedEntryVersion {
            bytes = try SealedBytes.unsealed(stored, what: what)
        } else if version != unsealedEntryVersion {
            throw StoreError(.incompatibleFormat, "\(what) has an unknown version")
        }
        var input = FeedReader(bytes, what: what)
        _ = try input.byte()
        var set = ChangeSet(token: token, committedAt: Timestamp(microsecondsSinceEpoch: Int64(bitPattern: try input.u64())))
        for _ in 0..<(try input.u32()) {
            let entity = try input.text()
            let flags = try input.byte()
            let keyType = try keyType(try input.byte(), input)
            if flags & 1 != 0 { set.cleared.append(entity) }
            if flags & 2 != 0 { set.overflowed.append(entity) }
            let differences = flags & differenceKeys != 0
            guard flags & ~(1 | 2 | differenceKeys) == 0, !differences || version == entryVersion && keyType == .int
            else { throw input.damaged() }
            var previous: Int64 = 0
            for _ in 0..<(try input.u32()) {
                guard let kind = ItemChange.Kind(rawValue: try input.byte()) else { throw input.damaged() }
                let key: Value
                if differences {
                    previous &+= unzigzag(try input.leb128())
                    key = .int(previous)
                } else {
                    let length = version == entryVersion ? try input.leb128() : UInt64(try input.u32())
                    guard length <= UInt64(Int.max) else { throw input.damaged() }
                    key = try KeyEncoding.decodeKey(try input.raw(Int(length)), as: keyType)
                }
                set.items.append(ItemChange(entity: entity, key: key, kind: kind))
            }
        }
        guard input.isAtEnd else { throw input.damaged() }
        return set
    }

    private static func keyTypeCode(_ type: ValueType) -> UInt8 {
        switch type {
        case .int: return 1
        case .string: return 2
        default: return 3
        }
    }

    private static func keyType(_ code: UInt8, _ input: FeedReader) throws -> ValueType {
        switch code {
        case 1: return .int
        case 2: return .string
        case 3: return .uuid
        default: throw input.damaged()
        }
    }
}

/// A little-endian byte writer for the feed's values.
struct FeedBytes {
    var bytes: [UInt8] = []
    mutating func byte(_ b: UInt8) { bytes.append(b) }
    mutating func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func raw(_ b: [UInt8]) { bytes.append(contentsOf: b) }
    mutating func text(_ s: String) {
        u32(s.utf8.count)
        bytes.append(contentsOf: s.utf8)
    }

    /// Appends the CRC-32C of every byte written so far (``SealedBytes``).
    mutating func seal() { SealedBytes.seal(&bytes) }
}

/// Reads what ``FeedBytes`` wrote; any overrun is `corrupt`, naming the value.
struct FeedReader {
    let bytes: [UInt8]
    let what: String
    var offset = 0
    /// Where the bytes read end (before a checksum that follows them).
    let end: Int

    init(_ bytes: [UInt8], end: Int? = nil, what: String) {
        self.bytes = bytes
        self.what = what
        self.end = min(end ?? bytes.count, bytes.count)
    }

    var isAtEnd: Bool { offset == end }

    func damaged() -> StoreError { StoreError(.corrupt, "\(what) is damaged") }

    /// Sixteen bytes, as a UUID's.
    mutating func uuid() throws -> uuid_t {
        try take(16)
        let at = offset - 16
        return bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: uuid_t.self) }
    }

    mutating func raw(_ count: Int) throws -> [UInt8] {
        try take(count)
        return Array(bytes[offset - count..<offset])
    }

    /// Moves past `count` bytes, checking that they are there.
    private mutating func take(_ count: Int) throws {
        guard count >= 0, count <= end - offset else { throw damaged() }
        offset += count
    }

    mutating func byte() throws -> UInt8 {
        try take(1)
        return bytes[offset - 1]
    }

    // Each a load of its bytes (a loop over them with a bounds check per byte cost about 60
    // instructions a u64; a PostgreSQL write reads the feed's state, four of them, every time).

    mutating func u32() throws -> Int {
        try take(4)
        let at = offset - 4
        return Int(bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt32.self)) })
    }

    mutating func u64() throws -> UInt64 {
        try take(8)
        let at = offset - 8
        return bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
    }

    /// A LEB128 number (``ChangeLog``'s entries of version 3): at most ten bytes, the tenth
    /// holding the 64th bit alone; anything else is damage.
    mutating func leb128() throws -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 70, by: 7) {
            let byte = try self.byte()
            guard shift < 63 || byte <= 1 else { throw damaged() }
            value |= UInt64(byte & 0x7F) << UInt64(shift)
            if byte < 0x80 { return value }
        }
        throw damaged()
    }

    mutating func text() throws -> String {
        let count = try u32()
        try take(count)
        return String(decoding: bytes[offset - count..<offset], as: UTF8.self)
    }
}

import Foundation
import RawLMDB

/// The same work through the LMDB C API: the same databases, key encoding and record layout as
/// LMDBStore (a format byte, a tag and payload per attribute, the CRC-32C of those:
/// ``RawRowSum``), MDB_NOTLS | MDB_NOMETASYNC.
package final class RawLMDBBench {
    package var env: OpaquePointer
    package var items: MDB_dbi = 0
    package var index: MDB_dbi = 0
    package let workload: Workload

    package init(path: String, workload: Workload) {
        var handle: OpaquePointer?
        mdb_env_create(&handle)
        env = handle!
        self.workload = workload
        mdb_env_set_maxdbs(env, 8)
        mdb_env_set_mapsize(env, 8 << 30)
        mdb_env_open(env, path, UInt32(MDB_NOTLS | MDB_NOMETASYNC), 0o644)
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        mdb_dbi_open(txn, "e.Item", UInt32(MDB_CREATE), &items)
        mdb_dbi_open(txn, "i.Item.byScore", UInt32(MDB_CREATE), &index)
        mdb_txn_commit(txn)
    }

    deinit { mdb_env_close(env) }

    package static func key(_ id: Int64) -> [UInt8] {
        let flipped = UInt64(bitPattern: id) ^ (1 << 63)
        return [0] + (0..<8).map { UInt8(truncatingIfNeeded: flipped >> (56 - 8 * UInt64($0))) }
    }

    /// An entry of the score index, as the store writes it: the tuple (an int's tag and its eight
    /// bytes), the separator, the item's encoded key.
    package static func indexKey(_ score: Int64, _ id: Int64) -> [UInt8] {
        let flipped = UInt64(bitPattern: score) ^ (1 << 63)
        return [0x10] + (0..<8).map { UInt8(truncatingIfNeeded: flipped >> (56 - 8 * UInt64($0))) } + [0x00]
            + key(id).dropFirst()
    }

    /// The bytes before an index entry's item key: every entry of that score starts with them.
    package static func indexPrefix(_ score: Int64) -> [UInt8] { Array(indexKey(score, 0).prefix(10)) }

    /// `record` (format byte, fields, checksum) with a new checksum after a change to its fields,
    /// as a program that rewrites the store's records must seal them.
    package static func resealed(_ fields: [UInt8]) -> [UInt8] {
        var out = fields
        let sum = out.withUnsafeBytes { RawRowSum.of($0) }
        for s in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: sum >> UInt32(s))) }
        return out
    }

    package static func encode(_ row: RawRow) -> [UInt8] {
        var out: [UInt8] = [2, 3]
        func fixed(_ v: UInt64) { for s in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: v >> UInt64(s))) } }
        fixed(UInt64(bitPattern: row.id))
        out.append(5)
        out.append(UInt8(row.name.utf8.count))
        out += row.name.utf8
        out.append(3)
        fixed(UInt64(bitPattern: row.score))
        out.append(4)
        fixed(row.ratio.bitPattern)
        out.append(6)
        out.append(UInt8(row.payload.count))
        out += row.payload
        return resealed(out)
    }

    /// A row built from its stored fields (``fields(_:)``).
    package static func decode(_ bytes: UnsafeRawBufferPointer) -> RawRow {
        guard let row = fields(bytes) else { fatalError("a damaged row") }
        return RawRow(id: row.id, name: String(decoding: row.name, as: UTF8.self), score: row.score, ratio: row.ratio,
                      payload: Array(row.payload))
    }

    /// The fields of a stored row, checked as a C program checks a record it did not write
    /// before it reads it: the checksum of the bytes before it (the layout's own check against a
    /// record damaged on the disk), then the format byte, each field's tag, each length and
    /// payload within the record, nothing after the last field; `nil` when any check fails. (The
    /// store checks as much, and more: that a text is UTF-8, that a double is not NaN.)
    @inline(__always)
    package static func fields(_ sealed: UnsafeRawBufferPointer) -> RawFields? {
        guard sealed.count > 4 else { return nil }
        let bytes = UnsafeRawBufferPointer(rebasing: sealed[..<(sealed.count - 4)])
        guard RawRowSum.of(bytes) == UInt32(littleEndian: sealed.loadUnaligned(fromByteOffset: bytes.count, as: UInt32.self))
        else { return nil }
        var reader = FieldReader(bytes: bytes)
        guard reader.byte() == 2,
              reader.byte() == 3, let id = reader.fixed(),
              reader.byte() == 5, let name = reader.lengthPrefixed(),
              reader.byte() == 3, let score = reader.fixed(),
              reader.byte() == 4, let ratio = reader.fixed(),
              reader.byte() == 6, let payload = reader.lengthPrefixed(),
              reader.offset == bytes.count else { return nil }
        return RawFields(id: Int64(bitPattern: id), name: name, score: Int64(bitPattern: score),
                      ratio: Double(bitPattern: ratio), payload: payload)
    }

    /// Reads a stored row's fields, each read checked against the row's end.
    private struct FieldReader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        @inline(__always)
        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        @inline(__always)
        mutating func fixed() -> UInt64? {
            guard bytes.count - offset >= 8 else { return nil }
            defer { offset += 8 }
            return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        }

        /// A LEB128 length (at most 4 bytes) and that many bytes.
        @inline(__always)
        mutating func lengthPrefixed() -> UnsafeRawBufferPointer? {
            var length = 0, shift = 0
            while true {
                guard let b = byte(), shift < 28 else { return nil }
                length |= Int(b & 0x7F) << shift
                if b & 0x80 == 0 { break }
                shift += 7
            }
            guard bytes.count - offset >= length else { return nil }
            defer { offset += length }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
        }
    }

    package func put(_ txn: OpaquePointer?, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) {
        key.withUnsafeBytes { k in
            value.withUnsafeBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var vv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                _ = mdb_put(txn, dbi, &kv, &vv, 0)
            }
        }
    }

    package func write(_ rows: [RawRow]) {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        for row in rows {
            let key = Self.key(row.id)
            put(txn, items, key, Self.encode(row))
            put(txn, index, Self.indexKey(row.score, row.id), Array(key.dropFirst()))
        }
        mdb_txn_commit(txn)
    }

    /// The stored bytes of item `id` and of its score index entry (its key, and its value) in
    /// the environment at `path` (a store's, closed), read with the C API: what
    /// ``sameLayout(asStoreAt:id:)`` compares.
    package static func stored(atPath path: String, id: Int64, score: Int64) -> [[UInt8]]? {
        readingClosed(path) { txn in
            var (items, index): (MDB_dbi, MDB_dbi) = (0, 0)
            guard mdb_dbi_open(txn, "e.Item", 0, &items) == 0, mdb_dbi_open(txn, "i.Item.byScore", 0, &index) == 0
            else { return nil }
            return stored(txn, items: items, index: index, id: id, score: score)
        }
    }

    /// `body` in a read transaction of the environment at `path` (a store's, closed), opened
    /// read-only without a lock; `nil` when it cannot be opened.
    private static func readingClosed<T>(_ path: String, _ body: (OpaquePointer?) -> T?) -> T? {
        var env: OpaquePointer?
        guard mdb_env_create(&env) == 0 else { return nil }
        defer { mdb_env_close(env) }
        mdb_env_set_maxdbs(env, 2048)
        guard mdb_env_open(env, path, UInt32(MDB_RDONLY | MDB_NOLOCK), 0o644) == 0 else { return nil }
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return nil }
        defer { mdb_txn_abort(txn) }
        return body(txn)
    }

    /// Item `id`'s bytes, and its index entry's key and value, in `txn`.
    private static func stored(_ txn: OpaquePointer?, items: MDB_dbi, index: MDB_dbi, id: Int64, score: Int64) -> [[UInt8]]? {
        func value(_ dbi: MDB_dbi, _ key: [UInt8]) -> [UInt8]? {
            var data = MDB_val()
            let rc = key.withUnsafeBytes { k -> Int32 in
                var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                return mdb_get(txn, dbi, &kv, &data)
            }
            return rc == 0 ? Array(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size)) : nil
        }
        let entry = indexKey(score, id)
        guard let record = value(items, key(id)), let pointed = value(index, entry) else { return nil }
        return [record, entry, pointed]
    }

    /// Whether item `id` (of the workload's score) and its index entry are stored here byte for
    /// byte as the store at `path` (closed) stores them: that the raw side writes, and so reads,
    /// the store's layout.
    package func sameLayout(asStoreAt path: String, id: Int64) -> Bool {
        let score = workload.score(Int(id))
        let mine = read { Self.stored($0, items: items, index: index, id: id, score: score) }
        return mine != nil && mine == Self.stored(atPath: path, id: id, score: score)
    }

    /// The store's metadata database, where its change feed keeps its entries.
    private lazy var meta: MDB_dbi = {
        var txn: OpaquePointer?
        var dbi: MDB_dbi = 0
        var rc = mdb_txn_begin(env, nil, 0, &txn)
        precondition(rc == 0, "the raw side cannot begin a transaction (\(rc))")
        rc = mdb_dbi_open(txn, "_ds_meta", UInt32(MDB_CREATE), &dbi)
        precondition(rc == 0, "the raw side cannot open _ds_meta (\(rc))")
        rc = mdb_txn_commit(txn)
        precondition(rc == 0, "the raw side cannot create _ds_meta (\(rc))")
        return dbi
    }()

    /// The key the store keeps its change feed's entry `sequence` under in `_ds_meta`: the
    /// prefix, then the number in 16 lowercase hex digits.
    package static func feedKey(_ sequence: UInt64) -> [UInt8] {
        var key = feedKeyPrefix
        for shift in stride(from: 60, through: 0, by: -4) { key.append(hexDigits[Int((sequence >> UInt64(shift)) & 0xF)]) }
        return key
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    package static let feedKeyPrefix = Array("datastore.feed.".utf8)

    /// One-insert transactions that each also put into `_ds_meta` the entry the store's change
    /// feed writes for such a transaction (``RawFeedEntry``), under the key the store gives it,
    /// as a C program keeping the same log would: the work of the store's small writes with the
    /// feed on, done in C.
    package func insertAllWithFeed(from start: Int, count: Int) {
        let meta = self.meta
        var sequence = lastFeedSequence()
        var entry = RawFeedEntry()
        for i in start..<(start + count) {
            var txn: OpaquePointer?
            mdb_txn_begin(env, nil, 0, &txn)
            let row = rawRow(i)
            let key = Self.key(row.id)
            put(txn, items, key, Self.encode(row))
            put(txn, index, Self.indexKey(row.score, row.id), Array(key.dropFirst()))
            sequence += 1
            entry.withInsertOf(Int64(i), entity: WorkloadItem.entityName) { bytes in
                put(txn, meta, Self.feedKey(sequence), Array(bytes))
            }
            let rc = mdb_txn_commit(txn)
            precondition(rc == 0, "the raw side's transaction with feed entry \(sequence) did not commit (\(rc))")
        }
    }

    /// The number of the last feed entry in `_ds_meta`, 0 when there is none.
    private func lastFeedSequence() -> UInt64 {
        let meta = self.meta
        guard let entry = read({ Self.lastFeedEntry($0, meta) }) else { return 0 }
        return UInt64(String(decoding: entry.key.dropFirst(Self.feedKeyPrefix.count), as: UTF8.self), radix: 16) ?? 0
    }

    /// The last feed entry in `meta` (its key and value), if any: the last key before the first
    /// one after the prefix's range.
    private static func lastFeedEntry(_ txn: OpaquePointer?, _ meta: MDB_dbi) -> (key: [UInt8], value: [UInt8])? {
        var cursor: OpaquePointer?
        guard mdb_cursor_open(txn, meta, &cursor) == 0 else { return nil }
        defer { mdb_cursor_close(cursor) }
        var end = Array(feedKeyPrefix.dropLast()) + [feedKeyPrefix[feedKeyPrefix.count - 1] + 1]
        var key = MDB_val(), value = MDB_val()
        let found = end.withUnsafeMutableBytes { bytes -> Bool in
            key = MDB_val(mv_size: bytes.count, mv_data: bytes.baseAddress)
            let rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
            if rc == MDB_NOTFOUND { return mdb_cursor_get(cursor, &key, &value, MDB_LAST) == 0 }
            return rc == 0 && mdb_cursor_get(cursor, &key, &value, MDB_PREV) == 0
        }
        guard found else { return nil }
        let keyBytes = [UInt8](UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
        guard keyBytes.starts(with: feedKeyPrefix) else { return nil }
        return (keyBytes, [UInt8](UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)))
    }

    /// Whether the last feed entry here is laid out as the last one of the store at `path`
    /// (closed): the same key (both sides wrote as many entries), and the same bytes but for the
    /// commit's time (bytes 1 to 8) and the checksum (the last four, which cover the time), and
    /// on each side a checksum that is the CRC-32C of the bytes before it.
    package func sameLastFeedEntry(asStoreAt path: String) -> Bool {
        func laidOut(_ entry: (key: [UInt8], value: [UInt8])?) -> [UInt8]? {
            guard let entry, entry.value.count > 13 else { return nil }
            let value = entry.value
            let end = value.count - 4
            let stored = value.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: end, as: UInt32.self)) }
            guard value.withUnsafeBytes({ RawRowSum.of(UnsafeRawBufferPointer(rebasing: $0[..<end])) }) == stored else { return nil }
            return entry.key + [value[0]] + value[9..<end]
        }
        let meta = self.meta
        let mine = laidOut(read { Self.lastFeedEntry($0, meta) })
        let theirs = Self.readingClosed(path) { txn -> [UInt8]? in
            var dbi: MDB_dbi = 0
            guard mdb_dbi_open(txn, "_ds_meta", 0, &dbi) == 0 else { return nil }
            return laidOut(Self.lastFeedEntry(txn, dbi))
        }
        return mine != nil && mine == theirs
    }

    package func rawRow(_ i: Int) -> RawRow {
        RawRow(id: Int64(i), name: workload.name(i), score: workload.score(i), ratio: workload.ratio(i),
               payload: workload.payload(i))
    }

    package func insertAll(from start: Int, count: Int, batch: Int) {
        var i = start
        while i < start + count {
            write((i..<min(start + count, i + batch)).map(rawRow))
            i += batch
        }
    }

    package func read<T>(_ body: (OpaquePointer?) -> T) -> T {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
        defer { mdb_txn_abort(txn) }
        return body(txn)
    }

    package func get(_ txn: OpaquePointer?, _ key: [UInt8]) -> RawRow? {
        var data = MDB_val()
        let rc = key.withUnsafeBytes { k -> Int32 in
            var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            return mdb_get(txn, items, &kv, &data)
        }
        return rc == 0 ? Self.decode(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size)) : nil
    }

    package func pointGets(_ keys: [Int]) -> Int {
        read { txn in keys.reduce(0) { $0 + (get(txn, Self.key(Int64($1))) == nil ? 0 : 1) } }
    }

    /// ``pointGets(_:)`` with each get in a read transaction of its own, begun and aborted (the
    /// environment's `maxdbs` is 8).
    package func pointGetsEachInARead(_ keys: [Int]) -> Int {
        keys.reduce(0) { found, key in found + (read { txn in get(txn, Self.key(Int64(key))) } == nil ? 0 : 1) }
    }

    package func cursor(_ txn: OpaquePointer?, _ dbi: MDB_dbi, from start: [UInt8]?,
                _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool) {
        var cursor: OpaquePointer?
        mdb_cursor_open(txn, dbi, &cursor)
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        var rc: Int32
        if let start {
            rc = start.withUnsafeBytes { s in
                key = MDB_val(mv_size: s.count, mv_data: UnsafeMutableRawPointer(mutating: s.baseAddress))
                return mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE)
            }
        } else {
            rc = mdb_cursor_get(cursor, &key, &data, MDB_FIRST)
        }
        while rc == 0 {
            if !body(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size),
                     UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size)) { return }
            rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
        }
    }

    package func scan() -> Int {
        read { txn in
            var rows: [RawRow] = []
            cursor(txn, items, from: nil) { _, value in
                rows.append(Self.decode(value))
                return true
            }
            return rows.count
        }
    }

    /// Every row in key order, each decoded and handed on, none kept.
    package func visit() -> Int {
        read { txn in
            var count = 0
            cursor(txn, items, from: nil) { _, value in
                consume(Self.decode(value))
                count += 1
                return true
            }
            return count
        }
    }

    /// Every row in key order, its fields read in the map and nothing built.
    package func visitInPlace() -> Int64 {
        read { txn in
            var total: Int64 = 0
            cursor(txn, items, from: nil) { _, bytes in
                guard let row = Self.fields(bytes) else { fatalError("a damaged row") }
                total &+= RawRow.inPlaceSum(id: row.id, score: row.score, ratio: row.ratio, name: row.name,
                                            payload: row.payload)
                return true
            }
            return total
        }
    }

    package func indexedQueries() -> Int {
        read { txn in
            var found = 0
            for score in 0..<Workload.queriedScores {
                let prefix = Self.indexPrefix(Int64(score))
                var keys: [[UInt8]] = []
                cursor(txn, index, from: prefix) { key, value in
                    guard key.starts(with: prefix) else { return false }
                    keys.append([0] + Array(value))
                    return true
                }
                found += keys.compactMap { get(txn, $0) }.count
            }
            return found
        }
    }

    package func unindexedQuery() -> Int {
        read { txn in
            var rows: [RawRow] = []
            cursor(txn, items, from: nil) { _, value in
                let row = Self.decode(value)
                if row.ratio < Workload.ratioBound { rows.append(row) }
                return true
            }
            return rows.count
        }
    }

    package func forEachRow(batch: Int, _ body: ([RawRow]) -> Void) {
        read { txn in
            var page: [RawRow] = []
            cursor(txn, items, from: nil) { _, value in
                page.append(Self.decode(value))
                if page.count == batch {
                    body(page)
                    page.removeAll(keepingCapacity: true)
                }
                return true
            }
            if !page.isEmpty { body(page) }
        }
    }
}

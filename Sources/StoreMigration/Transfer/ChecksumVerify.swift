@_spi(Backend) import DataStoreAPI
import Foundation

/// Verify by range checksums (`verify --checksum`).
///
/// The source is read once in key order and cut into ranges of ``rangeSize`` items, each with
/// a digest of its keys and values; the destination is read once, in one read transaction, and
/// hashed into the same key ranges. Only a range whose item count or digest differs is read
/// again on both sides and compared item by item, which reports exactly the differences (and
/// the same samples, in key order) that the item-by-item verify reports.
///
/// A digest is 64 bits of ``ItemDigest`` over each item's values in the source entity's
/// attribute order (the primary key among them; a destination whose attributes are in another
/// order is read in the source's), each with a type tag, doubles by bit pattern, strings and bytes
/// by their length and bytes: the equality the item compare uses. Two ranges that differ by
/// accident (a lost write, a damaged copy) have equal digests with a probability of about 2^-64.
struct RangeChecksum {
    /// Items per range.
    static let rangeSize = 1_000

    let entity: EntitySchema
    let destinationEntity: EntitySchema
    let batchSize: Int

    /// One range of the source: the items after the previous range's last key through `last`.
    struct SourceRange {
        var lastValue: Value
        var count: Int
        var digest: Int
    }

    /// A digest being accumulated over the items of one range.
    struct Accumulator {
        private var digest = ItemDigest()
        private(set) var count = 0

        /// Adds an item: its values in the order of `layout` (the source entity's), read in place
        /// from a compact record of that layout, built otherwise; either way the same digest.
        mutating func add(_ record: Record, in layout: RecordLayout) {
            // The count of values first, so that items never run into each other.
            digest.mix(UInt64(layout.names.count))
            let read = record.forEachStoredField(of: layout) { _, field in digest.add(field) }
            if !read { for value in record.values(in: layout) { digest.add(value) } }
            count += 1
        }

        func finalize() -> Int { Int(truncatingIfNeeded: digest.finalize()) }
    }

    /// Hashes every item of `entity` that `reader` holds, in key order, into `body`'s
    /// accumulator: the records come straight from the engine's cursor (``ReadAccessor/forEach(_:_:)``),
    /// none kept, and their values are hashed in the source entity's attribute order.
    private func hashEach(_ reader: ReadAccessor, _ stored: EntitySchema, progress: (Int) -> Void,
                          shouldStop: () -> Bool, _ body: (Value, Record) throws -> Void) throws {
        var read = 0
        try reader.forEach(FetchRequest(stored.name)) { record in
            try body(entity.primaryKeyValue(of: record), record)
            read += 1
            if read % batchSize == 0 {
                progress(read)
                if shouldStop() { throw StopRequested() }
            }
        }
    }

    /// Reads the source once: its ranges, in key order, each published as soon as it is complete
    /// (``PublishedRanges/finish()`` after the last, ``PublishedRanges/abandon()`` if the pass
    /// throws).
    func sourceRanges(_ snapshot: ReadAccessor, into published: PublishedRanges, progress: (Int) -> Void,
                      shouldStop: () -> Bool) throws {
        var current = Accumulator()
        var last: Value?
        do {
            let layout = entity.layout
            try hashEach(snapshot, entity, progress: progress, shouldStop: shouldStop) { key, record in
                current.add(record, in: layout)
                last = key
                if current.count == Self.rangeSize {
                    published.publish(SourceRange(lastValue: key, count: current.count, digest: current.finalize()))
                    current = Accumulator()
                }
            }
        } catch {
            published.abandon()
            throw error
        }
        if current.count > 0, let end = last {
            published.publish(SourceRange(lastValue: end, count: current.count, digest: current.finalize()))
        }
        published.finish()
    }

    /// Reads the destination once, in one read transaction, into the source's ranges as the
    /// source pass publishes them (waiting for a range it has not reached yet): one accumulator
    /// per range, and one more for the keys after the last range.
    func destinationDigests(_ destination: any DataStore, _ published: PublishedRanges) throws -> [Accumulator] {
        try destination.read { reader in
            var digests = [Accumulator()]
            var bound = try published.range(0)
            let layout = entity.layout
            try hashEach(reader, destinationEntity, progress: { _ in }, shouldStop: { false }) { key, record in
                while let range = bound, try KeyEncoding.compareKeys(key, range.lastValue) > 0 {
                    digests.append(Accumulator())
                    bound = try published.range(digests.count - 1)
                }
                digests[digests.count - 1].add(record, in: layout)
            }
            // Ranges past the destination's last key: empty accumulators.
            while try published.range(digests.count - 1) != nil { digests.append(Accumulator()) }
            return digests
        }
    }

    /// Both passes at once: the destination's on a worker thread, which follows the source's
    /// ranges as this thread publishes them, so that the two stores are read on two cores.
    /// - Returns: the source's ranges and the destination's accumulators (one more than ranges).
    func ranges(_ snapshot: ReadAccessor, _ destination: any DataStore, progress: (Int) -> Void,
                shouldStop: () -> Bool) throws -> (ranges: [SourceRange], digests: [Accumulator]) {
        let published = PublishedRanges()
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<[Accumulator], any Error> = .success([])
        StoreThreads(label: "DataStore.checksum").submit { [self] in
            result = Result { try destinationDigests(destination, published) }
            done.signal()
        }
        do {
            try sourceRanges(snapshot, into: published, progress: progress, shouldStop: shouldStop)
        } catch {
            done.wait()
            throw error
        }
        done.wait()
        return (published.all, try result.get())
    }

    /// A range whose count or digest differ: the key it starts after and the key it ends with
    /// (`nil` for the first range's start and the last one's end), and how many source items it
    /// holds.
    struct Differing {
        var after: Value?
        var through: Value?
        var sourceItems: Int
    }

    static func differing(_ ranges: [SourceRange], _ digests: [Accumulator]) -> [Differing] {
        var differing: [Differing] = []
        for (index, digest) in digests.enumerated() {
            // Spelled out: `Value` is `ExpressibleByNilLiteral`, so a bare `nil` here would be `.null`.
            let after: Value? = index == 0 ? Value?.none : ranges[index - 1].lastValue
            if index == ranges.count {
                if digest.count > 0 { differing.append(Differing(after: after, through: nil, sourceItems: 0)) }
            } else if digest.count != ranges[index].count || digest.finalize() != ranges[index].digest {
                differing.append(Differing(after: after, through: ranges[index].lastValue, sourceItems: ranges[index].count))
            }
        }
        return differing
    }
}

extension MigrationRun {
    /// Verifies every entity of the snapshot against the destination by range checksums (see
    /// ``RangeChecksum``).
    func verifyByChecksum(_ schema: Schema, _ snapshot: ReadAccessor, _ destination: any DataStore) throws {
        for entity in schema.entities {
            let start = Date()
            var entry = EntityReport(entity: entity.name)
            let total = try snapshot.count(FetchRequest(entity.name))
            let tick = { [progress] (done: Int) in
                progress(MigrationProgress(phase: .verify, entity: entity.name, done: done, total: total,
                                           itemsPerSecond: Double(done) / max(Date().timeIntervalSince(start), 1e-6)))
            }
            guard let destinationEntity = destination.schema.entity(named: entity.name) else {
                throw StoreError(.schemaMismatch, "the destination has no entity '\(entity.name)'")
            }
            let checksum = RangeChecksum(entity: entity, destinationEntity: destinationEntity,
                                         batchSize: options.batchSize.value)
            let (ranges, digests) = try checksum.ranges(snapshot, destination, progress: tick, shouldStop: shouldStop)
            let differing = RangeChecksum.differing(ranges, digests)
            // Items of equal ranges are verified; in the others, those the item compare pairs.
            entry.itemsVerified = total - differing.reduce(0) { $0 + $1.sourceItems }
            for range in differing {
                var found = EntityReport(entity: entity.name)
                try StoreDiff(entity: entity, source: snapshot, destination: destination,
                              batchSize: options.batchSize, mode: .compare, after: range.after, through: range.through,
                              checkpoint: { _, _ in }, progress: { _ in }, shouldStop: shouldStop)
                    .run(&found, samples: &report.sampleDifferences)
                entry.differences += found.differences
                entry.itemsVerified += found.itemsVerified
            }
            entry.itemsRead = total
            entry.rangesCompared = digests.count
            entry.rangesDiffering = differing.count
            entry.seconds = Date().timeIntervalSince(start)
            tick(total)
            report.entities.append(entry)
        }
        report.verified = true
    }
}

/// The source's ranges, published by the source pass for a destination pass on another thread.
/// The destination pass asks for a range only when it moves past the one before (once per
/// 1,000 items), so the lock is taken that rarely.
final class PublishedRanges: @unchecked Sendable {
    private let condition = NSCondition()
    private var ranges: [RangeChecksum.SourceRange] = []
    private var finished = false
    private var abandoned = false

    func publish(_ range: RangeChecksum.SourceRange) {
        condition.withLock {
            ranges.append(range)
            condition.broadcast()
        }
    }

    /// The source pass has published its last range.
    func finish() {
        condition.withLock {
            finished = true
            condition.broadcast()
        }
    }

    /// The source pass failed or was stopped: a destination pass waiting for a range stops too.
    func abandon() {
        condition.withLock {
            abandoned = true
            condition.broadcast()
        }
    }

    /// The range at `index`, once published; `nil` when the source has no more.
    /// - Throws: ``StopRequested`` once the source pass is abandoned.
    func range(_ index: Int) throws -> RangeChecksum.SourceRange? {
        condition.lock()
        defer { condition.unlock() }
        while index >= ranges.count && !finished && !abandoned { condition.wait() }
        if abandoned { throw StopRequested() }
        return index < ranges.count ? ranges[index] : nil
    }

    var all: [RangeChecksum.SourceRange] { condition.withLock { ranges } }
}

/// A 64-bit digest of a sequence of values, for range checksums: 64-bit words mixed in as
/// MurmurHash3's x64 lane mixes its blocks (multiply, rotate, multiply, then fold into the
/// state), finished by its 64-bit finalizer. Not cryptographic: it tells apart sequences that
/// differ by accident, which is what a verify looks for (a store's owner able to craft a
/// collision could as well edit both stores). Swift's `Hasher` (SipHash-1-3) runs a compression
/// round for every integer combined, which costs about twice as much per item.
struct ItemDigest {
    private var state: UInt64 = 0x6A09_E667_F3BC_C908
    private var words: UInt64 = 0

    private static let c1: UInt64 = 0x87C3_7B91_1142_53D5
    private static let c2: UInt64 = 0x4CF5_AD43_2745_937F

    @inline(__always)
    mutating func mix(_ word: UInt64) {
        var k = word &* Self.c1
        k = (k << 31) | (k >> 33)
        k = k &* Self.c2
        state ^= k
        state = (state << 27) | (state >> 37)
        state = state &* 5 &+ 0x52DC_E729
        words &+= 1
    }

    /// A value: its type's tag, then its contents (doubles by bit pattern; strings and bytes by
    /// their length, then their bytes), so that no two different values, nor two sequences of
    /// values, give the same words.
    mutating func add(_ value: Value) {
        switch value {
        case .null: mix(0)
        case .bool(let b): mix(b ? 0x101 : 0x100)
        case .int(let n): mix(2); mix(UInt64(bitPattern: n))
        case .double(let d): mix(3); mix(d.bitPattern)
        case .string(var s):
            mix(4)
            s.withUTF8 { add(bytes: UnsafeRawBufferPointer($0)) }
        case .bytes(let b):
            mix(5)
            b.withUnsafeBytes { add(bytes: $0) }
        case .date(let t): mix(6); mix(UInt64(bitPattern: t.microsecondsSinceEpoch))
        case .uuid(let u):
            mix(7)
            withUnsafeBytes(of: u.uuid) { raw in
                mix(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
                mix(raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            }
        }
    }

    /// ``add(_:)`` of a field read in place: the same digest as its value's.
    mutating func add(_ field: RowField) {
        switch field.type {
        case nil: mix(0)
        case .bool: mix(field.bits != 0 ? 0x101 : 0x100)
        case .int: mix(2); mix(field.bits)
        case .double: mix(3); mix(field.bits)
        case .string: mix(4); add(bytes: field.bytes)
        case .bytes: mix(5); add(bytes: field.bytes)
        case .date: mix(6); mix(field.bits)
        case .uuid:
            mix(7)
            mix(field.bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            mix(field.bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    /// Bytes: their count, then eight at a time, the last word padded with zeros (the count
    /// tells the padding from bytes that are zero).
    mutating func add(bytes: UnsafeRawBufferPointer) {
        mix(UInt64(bytes.count))
        var offset = 0
        while bytes.count - offset >= 8 {
            mix(UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            offset += 8
        }
        if offset < bytes.count {
            var tail: UInt64 = 0
            for i in offset..<bytes.count { tail |= UInt64(bytes[i]) << UInt64(8 * (i - offset)) }
            mix(tail)
        }
    }

    func finalize() -> UInt64 {
        var h = state ^ words
        h ^= h >> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h = h &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h
    }
}

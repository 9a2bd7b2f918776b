internal import CLMDB
@_spi(Backend) import DataStoreAPI
import Foundation

/// The changes of a write transaction, kept to replay them after the map grows.
///
/// The first ``memoryLimit`` bytes of changes stay in memory; the rest go to an unlinked
/// temporary file in the environment's directory, written through a 1 MiB buffer, so that the
/// process's own memory does not grow with the transaction (a bulk insert of a million items
/// journals about 150 MB). The file is on the store's disk, which must hold the data anyway,
/// and disappears when the journal ends or the process dies.
struct LMDBJournal: ~Copyable {
    enum Change {
        case put(MDB_dbi, [UInt8], [UInt8])
        case delete(MDB_dbi, [UInt8])
        case drop(MDB_dbi)
        case dropDatabase(MDB_dbi)
    }

    /// Bytes of changes kept in memory before the journal spills to its file.
    static let memoryLimit = 16 << 20
    private static let bufferSize = 1 << 20

    private let directory: String
    private var changes: [Change] = []
    private var bytesInMemory = 0
    private var file: Int32 = -1
    private var buffer: [UInt8] = []

    init(directory: String) {
        self.directory = directory
    }

    deinit {
        if file >= 0 { Foundation.close(file) }
    }

    /// Whether changes went to the file.
    var hasSpilled: Bool { file >= 0 }

    mutating func append(_ change: Change) throws(StoreError) {
        if file < 0 {
            changes.append(change)
            bytesInMemory += Self.footprint(change)
            if bytesInMemory > Self.memoryLimit { try spill() }
            return
        }
        Self.encode(change, into: &buffer)
        if buffer.count >= Self.bufferSize { try flush() }
    }

    /// Applies every change in order; stops at the first result other than success or
    /// not-found (a delete of a key that is gone) and returns it.
    mutating func replay(_ apply: (Change) -> Int32) throws(StoreError) -> Int32 {
        for change in changes {
            let rc = apply(change)
            if rc != MDB_SUCCESS && rc != MDB_NOTFOUND { return rc }
        }
        guard file >= 0 else { return MDB_SUCCESS }
        try flush()
        var offset: off_t = 0
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: Self.bufferSize)
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(file, $0.baseAddress, $0.count, offset) }
            guard count >= 0 else { throw failure("cannot read the transaction's journal back") }
            if count == 0 { break }
            offset += off_t(count)
            pending.append(contentsOf: chunk[0..<count])
            var start = 0
            while let (change, next) = Self.decode(pending, from: start) {
                let rc = apply(change)
                if rc != MDB_SUCCESS && rc != MDB_NOTFOUND { return rc }
                start = next
            }
            pending.removeFirst(start)
        }
        guard pending.isEmpty else {
            throw StoreError(.io, "\(directory): the transaction's journal ends inside a change")
        }
        return MDB_SUCCESS
    }

    /// Moves the changes in memory to a new temporary file.
    private mutating func spill() throws(StoreError) {
        var template = Array((directory + "/.journal-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { $0.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else { throw failure("cannot create a temporary file for the transaction's journal") }
        unlink(String(cString: template))
        file = fd
        buffer.reserveCapacity(Self.bufferSize + 1024)
        for change in changes {
            Self.encode(change, into: &buffer)
            if buffer.count >= Self.bufferSize { try flush() }
        }
        changes = []
        bytesInMemory = 0
    }

    private mutating func flush() throws(StoreError) {
        var written = 0
        while written < buffer.count {
            let n = buffer.withUnsafeBytes { raw in
                raw.baseAddress.map { write(file, $0 + written, raw.count - written) } ?? 0
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let code: StoreError.Code = errno == ENOSPC || errno == EDQUOT ? .storeFull : .io
                throw StoreError(code, "\(directory): cannot write the transaction's journal: "
                    + String(cString: strerror(errno)))
            }
            written += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    private func failure(_ what: String) -> StoreError {
        StoreError(.io, "\(directory): \(what): " + String(cString: strerror(errno)))
    }

    /// What a change costs in memory: its bytes and the two arrays' headers.
    private static func footprint(_ change: Change) -> Int {
        switch change {
        case let .put(_, key, value): return key.count + value.count + 96
        case let .delete(_, key): return key.count + 64
        case .drop, .dropDatabase: return 32
        }
    }

    // A change in the file: a tag byte, the database handle (4 bytes), then for a put the key's
    // and the value's lengths (4 bytes each) and bytes, for a delete the key's.
    private static func encode(_ change: Change, into buffer: inout [UInt8]) {
        func word(_ n: UInt32) { withUnsafeBytes(of: n.littleEndian) { buffer.append(contentsOf: $0) } }
        switch change {
        case let .put(dbi, key, value):
            buffer.append(0); word(dbi); word(UInt32(key.count)); word(UInt32(value.count))
            buffer.append(contentsOf: key)
            buffer.append(contentsOf: value)
        case let .delete(dbi, key):
            buffer.append(1); word(dbi); word(UInt32(key.count))
            buffer.append(contentsOf: key)
        case .drop(let dbi):
            buffer.append(2); word(dbi)
        case .dropDatabase(let dbi):
            buffer.append(3); word(dbi)
        }
    }

    /// The change that starts at `start`, and where the next one starts; `nil` when `bytes`
    /// ends before the change does.
    private static func decode(_ bytes: [UInt8], from start: Int) -> (Change, Int)? {
        func word(_ at: Int) -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            return Int(UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16
                | UInt32(bytes[at + 3]) << 24)
        }
        guard start < bytes.count, let dbi = word(start + 1).map(MDB_dbi.init) else { return nil }
        switch bytes[start] {
        case 0:
            guard let keyCount = word(start + 5), let valueCount = word(start + 9),
                  start + 13 + keyCount + valueCount <= bytes.count else { return nil }
            let key = Array(bytes[(start + 13)..<(start + 13 + keyCount)])
            let value = Array(bytes[(start + 13 + keyCount)..<(start + 13 + keyCount + valueCount)])
            return (.put(dbi, key, value), start + 13 + keyCount + valueCount)
        case 1:
            guard let keyCount = word(start + 5), start + 9 + keyCount <= bytes.count else { return nil }
            return (.delete(dbi, Array(bytes[(start + 9)..<(start + 9 + keyCount)])), start + 9 + keyCount)
        case 2: return (.drop(dbi), start + 5)
        default: return (.dropDatabase(dbi), start + 5)
        }
    }
}

internal import CLMDB
@_spi(Backend) import DataStoreAPI
import Foundation

/// The changes of a write transaction, kept to replay them after the map grows.
///
/// The changes are bytes in one buffer, in the order they were made: a tag byte, the database
/// handle (4 bytes), then for a put the key's and the value's lengths (4 bytes each) and bytes,
/// for a delete the key's, for a database opened its name's. A change is copied in (no allocation per change, nothing to free per
/// change at the end). The first ``memoryLimit`` bytes stay in memory; past that the buffer goes
/// to an unlinked temporary file in the environment's directory, and later changes follow it
/// through a 1 MiB buffer, so that the process's own memory does not grow with the transaction
/// (a bulk insert of a million items journals about 100 MB). The file is on the store's disk,
/// which must hold the data anyway, and disappears when the journal ends or the process dies.
struct LMDBJournal: ~Copyable {
    /// A change, its bytes valid only while it is being applied.
    enum Change {
        case put(MDB_dbi, UnsafeRawBufferPointer, UnsafeRawBufferPointer)
        case delete(MDB_dbi, UnsafeRawBufferPointer)
        case drop(MDB_dbi)
        case dropDatabase(MDB_dbi)
        /// A named database opened (`create`: created if missing) by the transaction, with the
        /// handle it got: liblmdb closes the handles an aborted transaction opened, so a replay
        /// opens them again, in the same order, which gives the same handles.
        case open(MDB_dbi, name: UnsafeRawBufferPointer, create: Bool)
    }

    /// Bytes of changes kept in memory before the journal spills to its file.
    static let memoryLimit = 16 << 20
    static let bufferSize = 1 << 20
    private static let headerSize = 13

    private let directory: String
    /// The changes not yet in the file (all of them until it spills).
    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0
    private var used = 0
    private var file: Int32 = -1
    private var fileSize = 0

    init(directory: String) {
        self.directory = directory
    }

    deinit {
        if file >= 0 { Foundation.close(file) }
        buffer.map { free($0) }
    }

    /// Whether changes went to the file.
    var hasSpilled: Bool { file >= 0 }

    /// The bytes of changes kept, in memory and in the file.
    var byteCount: Int { used + fileSize }

    /// Forgets every change and gives back the memory and the file: the transaction will not
    /// need to replay them.
    mutating func discard() {
        if file >= 0 { Foundation.close(file) }
        file = -1
        fileSize = 0
        buffer.map { free($0) }
        buffer = nil
        capacity = 0
        used = 0
    }

    mutating func append(_ change: Change) throws(StoreError) {
        switch change {
        case let .put(dbi, key, value):
            try append(tag: 0, dbi, key, value)
        case let .delete(dbi, key):
            try append(tag: 1, dbi, key, nil)
        case .drop(let dbi):
            try append(tag: 2, dbi, nil, nil)
        case .dropDatabase(let dbi):
            try append(tag: 3, dbi, nil, nil)
        case let .open(dbi, name, create):
            try append(tag: create ? 4 : 5, dbi, name, nil)
        }
    }

    private mutating func append(tag: UInt8, _ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer?,
                                 _ value: UnsafeRawBufferPointer?) throws(StoreError) {
        let header = tag == 0 ? Self.headerSize : tag == 1 || tag >= 4 ? 9 : 5
        let size = header + (key?.count ?? 0) + (value?.count ?? 0)
        if used + size > capacity || (file < 0 && used + size > Self.memoryLimit) { try makeRoom(for: size) }
        if file >= 0 && size > capacity {
            // Bigger than the file's whole buffer: written through, after what is buffered.
            try flush()
            try withUnsafeTemporaryAllocation(byteCount: size, alignment: 1) { (entry) throws(StoreError) in
                if let base = entry.baseAddress { Self.write(tag, dbi, key, value, at: base) }
                try writeToFile(UnsafeRawBufferPointer(entry))
            }
            return
        }
        if let buffer { Self.write(tag, dbi, key, value, at: buffer + used) }
        used += size
    }

    /// Makes room for `size` more bytes: in memory below the limit, else by spilling or flushing
    /// to the file (where a change bigger than the buffer is written through by the caller).
    private mutating func makeRoom(for size: Int) throws(StoreError) {
        if file < 0 && used + size <= Self.memoryLimit {
            try reallocate(min(max(capacity * 2, used + size, 64 << 10), Self.memoryLimit))
            return
        }
        if file < 0 { try spill() } else { try flush() }
    }

    private mutating func reallocate(_ newCapacity: Int) throws(StoreError) {
        guard let grown = realloc(buffer, newCapacity) else {
            throw StoreError(.io, "\(directory): no memory for the transaction's journal (\(newCapacity) bytes)")
        }
        buffer = grown
        capacity = newCapacity
    }

    private static func write(_ tag: UInt8, _ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer?,
                              _ value: UnsafeRawBufferPointer?, at base: UnsafeMutableRawPointer) {
        base.storeBytes(of: tag, as: UInt8.self)
        base.storeBytes(of: dbi.littleEndian, toByteOffset: 1, as: UInt32.self)
        guard let key else { return }
        base.storeBytes(of: UInt32(key.count).littleEndian, toByteOffset: 5, as: UInt32.self)
        var offset = 9
        if let value {
            base.storeBytes(of: UInt32(value.count).littleEndian, toByteOffset: 9, as: UInt32.self)
            offset = headerSize
        }
        if let source = key.baseAddress, key.count > 0 {
            (base + offset).copyMemory(from: source, byteCount: key.count)
        }
        if let value, let source = value.baseAddress, value.count > 0 {
            (base + offset + key.count).copyMemory(from: source, byteCount: value.count)
        }
    }

    /// Applies every change in order; stops at the first result other than success or
    /// not-found (a delete of a key that is gone) and returns it.
    mutating func replay(_ apply: (Change) -> Int32) throws(StoreError) -> Int32 {
        guard file >= 0 else {
            guard let buffer else { return MDB_SUCCESS }
            return try Self.replay(UnsafeRawBufferPointer(start: buffer, count: used), directory, apply)
        }
        try flush()
        guard fileSize > 0 else { return MDB_SUCCESS }
        guard let mapping = mmap(nil, fileSize, PROT_READ, MAP_PRIVATE, file, 0), mapping != MAP_FAILED else {
            throw failure("cannot map the transaction's journal back")
        }
        defer { munmap(mapping, fileSize) }
        return try Self.replay(UnsafeRawBufferPointer(start: mapping, count: fileSize), directory, apply)
    }

    private static func replay(_ bytes: UnsafeRawBufferPointer, _ directory: String,
                               _ apply: (Change) -> Int32) throws(StoreError) -> Int32 {
        var offset = 0
        func word(_ at: Int) -> Int { Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self))) }
        func slice(_ start: Int, _ count: Int) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: bytes[start..<start + count])
        }
        let damaged = StoreError(.io, "\(directory): the transaction's journal ends inside a change")
        while offset < bytes.count {
            guard offset + 5 <= bytes.count else { throw damaged }
            let tag = bytes[offset]
            let dbi = MDB_dbi(word(offset + 1))
            let change: Change
            switch tag {
            case 0:
                guard offset + headerSize <= bytes.count else { throw damaged }
                let (keyCount, valueCount) = (word(offset + 5), word(offset + 9))
                guard offset + headerSize + keyCount + valueCount <= bytes.count else { throw damaged }
                change = .put(dbi, slice(offset + headerSize, keyCount), slice(offset + headerSize + keyCount, valueCount))
                offset += headerSize + keyCount + valueCount
            case 1, 4, 5:
                guard offset + 9 <= bytes.count else { throw damaged }
                let keyCount = word(offset + 5)
                guard offset + 9 + keyCount <= bytes.count else { throw damaged }
                let key = slice(offset + 9, keyCount)
                change = tag == 1 ? .delete(dbi, key) : .open(dbi, name: key, create: tag == 4)
                offset += 9 + keyCount
            case 2:
                change = .drop(dbi)
                offset += 5
            default:
                change = .dropDatabase(dbi)
                offset += 5
            }
            let rc = apply(change)
            if rc != MDB_SUCCESS && rc != MDB_NOTFOUND { return rc }
        }
        return MDB_SUCCESS
    }

    /// Moves the changes in memory to a new temporary file, keeping a 1 MiB buffer for the next.
    private mutating func spill() throws(StoreError) {
        var template = Array((directory + "/.journal-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { $0.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else { throw failure("cannot create a temporary file for the transaction's journal") }
        unlink(String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
        file = fd
        try flush()
        if capacity != Self.bufferSize { try reallocate(Self.bufferSize) }
    }

    private mutating func flush() throws(StoreError) {
        guard let buffer, used > 0 else { return }
        try writeToFile(UnsafeRawBufferPointer(start: buffer, count: used))
        used = 0
    }

    private mutating func writeToFile(_ bytes: UnsafeRawBufferPointer) throws(StoreError) {
        guard let base = bytes.baseAddress else { return }
        var written = 0
        while written < bytes.count {
            let n = Foundation.write(file, base + written, bytes.count - written)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let code: StoreError.Code = errno == ENOSPC || errno == EDQUOT ? .storeFull : .io
                throw StoreError(code, "\(directory): cannot write the transaction's journal: "
                    + String(cString: strerror(errno)))
            }
            written += n
        }
        fileSize += bytes.count
    }

    private func failure(_ what: String) -> StoreError {
        StoreError(.io, "\(directory): \(what): " + String(cString: strerror(errno)))
    }
}

#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation

extension PostgresSession {
    /// `COPY schema.table FROM STDIN` of `records` in binary format (the values as the server
    /// keeps them: no number printed and parsed again), inside the session's transaction,
    /// 64 KiB at a time.
    func copy(_ records: [(record: Record, key: PrimaryKey)], into entity: EntitySchema, quotedSchema: String,
              sealed: Bool) throws {
        let columns = PostgresSQL.columns(entity, sealed: sealed)
        let sql = "COPY \(PostgresSQL.table(entity, schema: quotedSchema)) (\(columns)) FROM STDIN (FORMAT binary)"
        var next = records.startIndex
        var started = false
        do {
            _ = try connection.copyIn(sql) { buffer in
                if !started {
                    PostgresCopyBinary.header(to: buffer)
                    started = true
                }
                while next < records.endIndex, buffer.count < 1 << 16 {
                    PostgresCopyBinary.append(records[next].record, of: entity, sealed: sealed, to: buffer)
                    next += 1
                }
                if next == records.endIndex { PostgresCopyBinary.trailer(to: buffer) }
                return next < records.endIndex
            }
        } catch let error as LibpqError {
            throw PostgresSession.storeError(error, sql: "COPY \(entity.name) FROM STDIN", location: location)
        }
    }
}

/// The binary format of COPY: a header, then per row the number of fields and each field's
/// length (-1 for null) and bytes, as in the binary parameters; a trailer of -1. Each row is
/// measured first and written in place, in one step of the buffer.
enum PostgresCopyBinary {
    static func header(to buffer: CopyBuffer) {
        // The signature: "PGCOPY\n\377\r\n\0", then flags and the header extension's length.
        let signature: [UInt8] = [0x50, 0x47, 0x43, 0x4F, 0x50, 0x59, 0x0A, 0xFF, 0x0D, 0x0A, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]
        signature.withUnsafeBytes { bytes in
            buffer.write(bytes.count) { $0.copyMemory(from: bytes.baseAddress.unsafelyUnwrapped, byteCount: bytes.count) }
        }
    }

    static func trailer(to buffer: CopyBuffer) {
        buffer.write(2) { $0.storeBytes(of: UInt16(0xFFFF), as: UInt16.self) }
    }

    /// A row: `record`'s values in `entity`'s order (a record a write normalized to its entity,
    /// read by position), then their sum (``PostgresRowSum``) when `sealed`.
    static func append(_ record: Record, of entity: EntitySchema, sealed: Bool, to buffer: CopyBuffer) {
        let values = record.values(in: entity.layout)
        values.withUnsafeBufferPointer { values in
            var size = 2 + (sealed ? 12 : 0)
            for value in values {
                switch value {
                case .null: size += 4
                case .bool: size += 5
                case .int, .double, .date: size += 12
                case .string(var s): size += 4 + s.withUTF8 { escapedCount($0) }
                case .bytes(let b): size += 4 + b.count
                case .uuid: size += 20
                }
            }
            let sum = sealed ? RecordSum.of(values) : 0
            buffer.write(size) { base in
                var at = 0
                func put<T: FixedWidthInteger>(_ n: T) {
                    base.storeBytes(of: n.bigEndian, toByteOffset: at, as: T.self)
                    at += MemoryLayout<T>.size
                }
                func put(_ bytes: UnsafeRawBufferPointer) {
                    put(Int32(bytes.count))
                    if let source = bytes.baseAddress, bytes.count > 0 {
                        (base + at).copyMemory(from: source, byteCount: bytes.count)
                    }
                    at += bytes.count
                }
                put(Int16(values.count + (sealed ? 1 : 0)))
                for value in values {
                    switch value {
                    case .null: put(Int32(-1))
                    case .bool(let b):
                        put(Int32(1))
                        put(UInt8(b ? 1 : 0))
                    case .int(let n):
                        put(Int32(8))
                        put(n)
                    case .double(let d):
                        put(Int32(8))
                        put(d.bitPattern)
                    case .date(let t):
                        put(Int32(8))
                        put(t.microsecondsSinceEpoch)
                    case .string(var s):
                        s.withUTF8 { utf8 in
                            let count = escapedCount(utf8)
                            guard count != utf8.count else { return put(UnsafeRawBufferPointer(utf8)) }
                            put(Int32(count))
                            for byte in utf8 {
                                if byte < 2 {
                                    put(UInt8(1))
                                    put(byte + 1)
                                } else {
                                    put(byte)
                                }
                            }
                        }
                    case .bytes(let b): b.withUnsafeBytes { put($0) }
                    case .uuid(let u): withUnsafeBytes(of: u.uuid) { put($0) }
                    }
                }
                if sealed {
                    put(Int32(8))
                    put(sum)
                }
            }
        }
    }
}

extension PostgresCopyBinary {
    /// The bytes of text as the server keeps it (``PostgresSQL/escape(_:)``): NUL and the escape
    /// byte take two each.
    @inline(__always)
    static func escapedCount(_ utf8: UnsafeBufferPointer<UInt8>) -> Int {
        guard let base = utf8.baseAddress, memchr(base, 0, utf8.count) != nil || memchr(base, 1, utf8.count) != nil else {
            return utf8.count
        }
        return utf8.reduce(utf8.count) { $0 + ($1 < 2 ? 1 : 0) }
    }
}

/// The bytes of a COPY's data, written in place into storage of its own that grows as needed:
/// a row is measured, then written in one step (``write(_:_:)``), with no check per field.
final class CopyBuffer {
    private var storage: UnsafeMutableRawPointer
    private var capacity: Int
    /// The bytes written.
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        storage = .allocate(byteCount: self.capacity, alignment: 8)
    }

    deinit { storage.deallocate() }

    /// The bytes written so far (valid until the next write).
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage, count: count) }

    func removeAll() { count = 0 }

    /// Writes `size` bytes: `body` fills them all, at the pointer it is given.
    func write(_ size: Int, _ body: (UnsafeMutableRawPointer) -> Void) {
        if capacity - count < size {
            let grown = max(2 * capacity, count + size)
            let fresh = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 8)
            fresh.copyMemory(from: storage, byteCount: count)
            storage.deallocate()
            (storage, capacity) = (fresh, grown)
        }
        body(storage + count)
        count += size
    }
}

#endif

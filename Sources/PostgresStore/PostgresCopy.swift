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
                    PostgresCopyBinary.header(to: &buffer)
                    started = true
                }
                while next < records.endIndex, buffer.count < 1 << 16 {
                    PostgresCopyBinary.append(records[next].record, of: entity, sealed: sealed, to: &buffer)
                    next += 1
                }
                if next == records.endIndex { PostgresCopyBinary.trailer(to: &buffer) }
                return next < records.endIndex
            }
        } catch let error as LibpqError {
            throw PostgresSession.storeError(error, sql: "COPY \(entity.name) FROM STDIN", location: location)
        }
    }
}

/// The binary format of COPY: a header, then per row the number of fields and each field's
/// length (-1 for null) and bytes, as in the binary parameters; a trailer of -1.
enum PostgresCopyBinary {
    static func header(to buffer: inout [UInt8]) {
        // The signature: "PGCOPY\n\377\r\n\0".
        buffer += [0x50, 0x47, 0x43, 0x4F, 0x50, 0x59, 0x0A, 0xFF, 0x0D, 0x0A, 0x00]
        append32(0, to: &buffer)  // flags
        append32(0, to: &buffer)  // header extension
    }

    static func trailer(to buffer: inout [UInt8]) {
        buffer += [0xFF, 0xFF]
    }

    private static func append32(_ value: Int32, to buffer: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { buffer += $0 }
    }

    private static func append64(_ value: UInt64, to buffer: inout [UInt8]) {
        append32(8, to: &buffer)
        withUnsafeBytes(of: value.bigEndian) { buffer += $0 }
    }

    /// A row: `record`'s values in `entity`'s order, then their sum (``PostgresRowSum``) when
    /// `sealed`.
    static func append(_ record: Record, of entity: EntitySchema, sealed: Bool, to buffer: inout [UInt8]) {
        withUnsafeBytes(of: Int16(entity.attributes.count + (sealed ? 1 : 0)).bigEndian) { buffer += $0 }
        for attribute in entity.attributes {
            switch record[attribute.name] {
            case .null: append32(-1, to: &buffer)
            case .bool(let b):
                append32(1, to: &buffer)
                buffer.append(b ? 1 : 0)
            case .int(let n): append64(UInt64(bitPattern: n), to: &buffer)
            case .double(let d): append64(d.bitPattern, to: &buffer)
            case .string(let s):
                let text = PostgresSQL.escape(s)
                append32(Int32(text.utf8.count), to: &buffer)
                buffer += text.utf8
            case .bytes(let b):
                append32(Int32(b.count), to: &buffer)
                buffer += b
            case .date(let t): append64(UInt64(bitPattern: t.microsecondsSinceEpoch), to: &buffer)
            case .uuid(let u):
                append32(16, to: &buffer)
                withUnsafeBytes(of: u.uuid) { buffer += $0 }
            }
        }
        if sealed { append64(UInt64(bitPattern: PostgresRowSum.sum(record, entity)), to: &buffer) }
    }
}

#endif

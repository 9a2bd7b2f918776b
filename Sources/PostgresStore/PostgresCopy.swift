#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation

extension PostgresSession {
    /// `COPY schema.table FROM STDIN` of `records` in text format, inside the session's
    /// transaction, 64 KiB at a time.
    func copy(_ records: [(record: Record, key: PrimaryKey)], into entity: EntitySchema, quotedSchema: String) throws {
        let columns = entity.attributes.map { PostgresSQL.quote($0.name) }.joined(separator: ", ")
        let sql = "COPY \(PostgresSQL.table(entity, schema: quotedSchema)) (\(columns)) FROM STDIN"
        var next = records.startIndex
        do {
            _ = try connection.copyIn(sql) { buffer in
                while next < records.endIndex, buffer.count < 1 << 16 {
                    PostgresCopyText.append(records[next].record, of: entity, to: &buffer)
                    next += 1
                }
                return next < records.endIndex
            }
        } catch let error as PGError {
            throw PostgresSession.storeError(error, sql: "COPY \(entity.name) FROM STDIN", location: location)
        }
    }
}

/// The text format of COPY: columns separated by tabs, `\N` for null, backslash escapes.
enum PostgresCopyText {
    private static let hex = Array("0123456789abcdef".utf8)

    static func append(_ record: Record, of entity: EntitySchema, to buffer: inout [UInt8]) {
        for (i, attribute) in entity.attributes.enumerated() {
            if i > 0 { buffer.append(0x09) }
            switch record[attribute.name] {
            case .null: buffer += "\\N".utf8
            case .bool(let b): buffer.append(b ? UInt8(ascii: "t") : UInt8(ascii: "f"))
            case .int(let n): buffer += String(n).utf8
            case .double(let d): buffer += (d.isInfinite ? (d < 0 ? "-Infinity" : "Infinity") : "\(d)").utf8
            case .string(let s): escaped(PostgresSQL.escape(s).utf8, to: &buffer)
            case .bytes(let b):
                // bytea's hex input, its backslash escaped for COPY.
                buffer += "\\\\x".utf8
                for byte in b {
                    buffer.append(hex[Int(byte >> 4)])
                    buffer.append(hex[Int(byte & 15)])
                }
            case .date(let t): buffer += String(t.microsecondsSinceEpoch).utf8
            case .uuid(let u): buffer += u.uuidString.utf8
            }
        }
        buffer.append(0x0A)
    }

    private static func escaped(_ bytes: String.UTF8View, to buffer: inout [UInt8]) {
        for byte in bytes {
            switch byte {
            case 0x5C: buffer += "\\\\".utf8
            case 0x0A: buffer += "\\n".utf8
            case 0x0D: buffer += "\\r".utf8
            case 0x09: buffer += "\\t".utf8
            default: buffer.append(byte)
            }
        }
    }
}
#endif

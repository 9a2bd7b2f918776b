internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// A model's insert on SQLite, and a record's in its entity's order: the values the model's code
/// (or ``Record/appendValues(inOrderOf:to:)``) wrote into the insert plan's buffer
/// (``StoredFieldBuffer``, a compact record's fields) are checked against their attributes, bound
/// (a text's or blob's bytes where they are in the buffer) and summed in one call over the fields
/// as they were written, which are the sum's input (``SQLiteRowSum``).
///
/// Binding after the model's code has run, not as each value comes, leaves the statement as it
/// was while that code runs, and takes each text's or blob's bytes once (into the buffer)
/// where binding as they came copied them for SQLite and again for the sum.
extension StoredFieldBuffer {
    /// The first buffer's bytes: a row of a few short fields fits.
    static let initialCapacity = 256
    /// A buffer grown past this (a row with long texts or blobs) is let go after its insert.
    static let keptCapacity = 64 * 1024

    /// The row's sum (``SQLiteRowSum``) of the fields written.
    var sum: Int64 { SQLiteRowSum.sum(base, end) }

    /// Checks each field against its attribute's kind as ``Value/isStoredAsIs(by:optional:isKey:)``
    /// checks a record's value (its type, null only where optional, a double that is a number,
    /// a text or blob within its limit, a text key within the key's), binds it to its parameter
    /// (a text's or blob's bytes, and a uuid's, where they are in the buffer, which must not
    /// change until the statement has stepped) and, when `summed`, binds the row's sum after
    /// them: the key's value, or `nil` when a field is not one the attribute holds as it is
    /// (nothing is left bound; the insert goes the record's way, which converts it or names it).
    /// - Throws: the statement's error for a parameter SQLite refused (nothing is left bound).
    func bind(_ statement: SQLiteStatement, kinds: UnsafeBufferPointer<SQLiteColumnKind>, keySlot: Int,
              summed: Bool) throws -> Value? {
        let handle = statement.handle
        if sqlite3_stmt_busy(handle) != 0 { sqlite3_reset(handle) }
        guard count == kinds.count, !oversized else { return unbound(handle) }
        var at = 0
        var key = Value.null
        for i in 0..<kinds.count {
            let kind = kinds[i]
            let field = UnsafeRawPointer(base + at)
            let index = Int32(i + 1)
            let rc: Int32
            switch field.load(as: UInt8.self) {
            case FieldTag.null.rawValue:
                guard kind.optional else { return unbound(handle) }
                rc = sqlite3_bind_null(handle, index)
                at += 1
            case FieldTag.falseValue.rawValue, FieldTag.trueValue.rawValue:
                guard kind.type == .bool else { return unbound(handle) }
                rc = sqlite3_bind_int64(handle, index, field.load(as: UInt8.self) == FieldTag.trueValue.rawValue ? 1 : 0)
                at += 1
            case FieldTag.int.rawValue:
                guard kind.type == .int else { return unbound(handle) }
                let value = Int64(littleEndian: field.loadUnaligned(fromByteOffset: 1, as: Int64.self))
                rc = sqlite3_bind_int64(handle, index, value)
                if i == keySlot { key = .int(value) }
                at += FieldWriter.numberSize
            case FieldTag.double.rawValue:
                let value = Double(bitPattern: UInt64(littleEndian: field.loadUnaligned(fromByteOffset: 1, as: UInt64.self)))
                guard kind.type == .double, !value.isNaN else { return unbound(handle) }
                rc = sqlite3_bind_double(handle, index, value)
                at += FieldWriter.numberSize
            case FieldTag.date.rawValue:
                guard kind.type == .date else { return unbound(handle) }
                rc = sqlite3_bind_int64(handle, index, Int64(littleEndian: field.loadUnaligned(fromByteOffset: 1, as: Int64.self)))
                at += FieldWriter.numberSize
            case FieldTag.uuid.rawValue:
                guard kind.type == .uuid else { return unbound(handle) }
                rc = sqlite3_bind_blob(handle, index, field + 1, 16, sqliteStatic)
                if i == keySlot { key = .uuid(UUID(uuid: field.loadUnaligned(fromByteOffset: 1, as: uuid_t.self))) }
                at += 17
            case let tag:
                // A text or blob: its LEB128 length, then its bytes.
                var (length, shift, header) = (0, 0, 1)
                while true {
                    let byte = field.load(fromByteOffset: header, as: UInt8.self)
                    length |= Int(byte & 0x7F) << shift
                    header += 1
                    if byte & 0x80 == 0 { break }
                    shift += 7
                }
                let bytes = field + header
                if tag == FieldTag.string.rawValue {
                    guard kind.type == .string,
                          length <= Limits.maxStringKeyBytes || length <= Limits.maxValueBytes && i != keySlot
                    else { return unbound(handle) }
                    rc = length == 0 ? sqlite3_bind_text(handle, index, "", 0, sqliteStatic)
                        : sqlite3_bind_text(handle, index, bytes.assumingMemoryBound(to: CChar.self), Int32(length), sqliteStatic)
                    if i == keySlot {
                        key = .string(String(decoding: UnsafeRawBufferPointer(start: bytes, count: length), as: UTF8.self))
                    }
                } else {
                    guard kind.type == .bytes, length <= Limits.maxValueBytes else { return unbound(handle) }
                    // An empty blob bound from a pointer would be NULL; zeroblob(0) is an empty blob.
                    rc = length == 0 ? sqlite3_bind_zeroblob(handle, index, 0)
                        : sqlite3_bind_blob(handle, index, bytes, Int32(length), sqliteStatic)
                    if i == keySlot { key = .bytes(Array(UnsafeRawBufferPointer(start: bytes, count: length))) }
                }
                at += header + length
            }
            guard rc == SQLITE_OK else { throw refused(statement, rc, index) }
        }
        if summed {
            let index = Int32(kinds.count + 1)
            let rc = sqlite3_bind_int64(handle, index, sum)
            guard rc == SQLITE_OK else { throw refused(statement, rc, index) }
        }
        return key
    }

    /// Nothing left bound: parameters bound so far point into the buffer.
    private func unbound(_ handle: OpaquePointer) -> Value? {
        sqlite3_clear_bindings(handle)
        return nil
    }

    @inline(never)
    private func refused(_ statement: SQLiteStatement, _ rc: Int32, _ index: Int32) -> StoreError {
        let error = statement.bindError(rc, index)
        sqlite3_clear_bindings(statement.handle)
        return error
    }
}

@_spi(Backend) @testable import DataStoreAPI
import Foundation
import Testing

/// A text or blob past the store's limit is not copied into the buffer: the buffer says so, and
/// the store refuses the row (or gives it to the record's way, which names the value). The limit
/// the inlined appends compare with is ``Limits/maxValueBytes``.
@Test func aStoredFieldBufferMarksAValuePastTheLimitWithoutCopyingIt() throws {
    #expect(StoredFieldBuffer.maxValueBytes == Limits.maxValueBytes)
    let long = [UInt8](repeating: 0x61, count: Limits.maxValueBytes + 1)
    for typed in [false, true] {
        var buffer = StoredFieldBuffer(base: StoredFieldBuffer.allocate(capacity: 16), capacity: 16)
        defer { buffer.base.deallocate() }
        try buffer.appendInt(7)
        if typed {
            try long.withUnsafeBytes { try buffer.appendBytes($0) }
            try buffer.appendString(String(decoding: long, as: UTF8.self))
        } else {
            try buffer.append(.bytes(long))
            try buffer.append(.string(String(decoding: long, as: UTF8.self)))
        }
        #expect(buffer.oversized && buffer.used == FieldWriter.numberSize && buffer.capacity == 16)
    }
}

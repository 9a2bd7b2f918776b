@_spi(Backend) @testable import DataStoreAPI
import Foundation
import Testing

/// The fields a model's values are written as (``StoredFieldBuffer``, whose appends are inlined
/// into the code `@StoredModel` generates) are byte for byte a compact record's fields
/// (``FieldWriter``), handed over as values and in the typed forms, into buffers that start
/// small and grow; `end` is where the last field that is not null ends.
@Test func aStoredFieldBufferWritesTheFieldsACompactRecordHolds() throws {
    var rng = SystemRandomNumberGenerator()
    let lengths = [0, 1, 15, 16, 127, 128, 129, 16_383, 16_384, 20_000]
    func value() -> Value {
        switch Int.random(in: 0..<9, using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: .min ... .max, using: &rng))
        case 3: return .double(Double.random(in: -1e9...1e9, using: &rng))
        case 4: return .date(Timestamp(microsecondsSinceEpoch: Int64.random(in: .min ... .max, using: &rng)))
        case 5: return .uuid(UUID())
        case 6: return .string(String(repeating: "é", count: lengths.randomElement(using: &rng)! / 2))
        default: return .bytes((0..<lengths.randomElement(using: &rng)!).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
    }
    for _ in 0..<1_000 {
        let values = (0..<Int.random(in: 0...12, using: &rng)).map { _ in value() }
        var expected: [UInt8] = []
        var expectedEnd = 0
        for value in values {
            var field = [UInt8](repeating: 0, count: FieldWriter.size(of: value))
            let written = field.withUnsafeMutableBytes { FieldWriter.write(value, at: $0.baseAddress!) }
            #expect(written == field.count)
            expected += field
            if value != .null { expectedEnd = expected.count }
        }
        let capacity = Int.random(in: 1...32, using: &rng)
        var plain = StoredFieldBuffer(base: StoredFieldBuffer.allocate(capacity: capacity), capacity: capacity)
        var typed = StoredFieldBuffer(base: StoredFieldBuffer.allocate(capacity: capacity), capacity: capacity)
        defer {
            plain.base.deallocate()
            typed.base.deallocate()
        }
        for value in values {
            try plain.append(value)
            switch value {
            case .int(let i): try typed.appendInt(i)
            case .double(let d): try typed.appendDouble(d)
            case .string(let s): try typed.appendString(s)
            case .bytes(let b): try b.withUnsafeBytes { try typed.appendBytes($0) }
            default: try typed.append(value)
            }
        }
        for buffer in [plain, typed] {
            #expect(Array(UnsafeRawBufferPointer(start: buffer.base, count: buffer.used)) == expected, "\(values)")
            #expect(buffer.count == values.count && buffer.end == expectedEnd && !buffer.oversized)
        }
    }
}

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

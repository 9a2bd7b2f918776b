@_spi(Backend) import DataStoreAPI
import Testing

/// `UTF8Text.isValid`, which every row check calls on every text: a text of up to 8 bytes is
/// checked as one word, one of 9 to 16 as two overlapping loads, a longer one eight bytes at a
/// time, anything not ASCII by the standard library's validation. Each length from 0 to 20,
/// with a byte of each kind at each position, against the standard library's answer. Each text is read from a buffer of its
/// exact size, so that a run under an address sanitizer catches a load past its end, and again
/// followed by 8 bytes that are not UTF-8 (`isValid(_:readable:)`, which may load them and must
/// mask them off).
@Suite struct UTF8TextTests {
    static func standardAnswer(_ bytes: [UInt8]) -> Bool { String(validating: bytes, as: UTF8.self) != nil }

    static func check(_ bytes: [UInt8]) -> Bool {
        // A buffer of exactly the text's size.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
        defer { buffer.deallocate() }
        buffer.copyBytes(from: bytes)
        let alone = UTF8Text.isValid(UnsafeRawBufferPointer(buffer))
        // The same bytes with 8 more after them, read as a record's text is.
        let padded = bytes + [UInt8](repeating: 0xFF, count: 8)
        let inRecord = padded.withUnsafeBytes {
            UTF8Text.isValid(UnsafeRawBufferPointer(rebasing: $0[..<bytes.count]), readable: $0.count)
        }
        #expect(inRecord == alone, "\(bytes)")
        return alone
    }

    @Test func everyLengthAndPositionAgreesWithTheStandardLibrary() {
        // ASCII, a lone continuation byte, a lead byte without its continuation, a two-byte
        // sequence, a byte that is never UTF-8.
        let inserts: [[UInt8]] = [[0x41], [0x80], [0xC3], [0xC3, 0xA9], [0xFF], [0xE2, 0x82, 0xAC]]
        var checked = 0
        for length in 0...20 {
            let ascii = [UInt8]((0..<length).map { UInt8(0x61 + $0 % 26) })
            #expect(Self.check(ascii) == true)
            for position in 0..<max(length, 1) where length > 0 {
                for insert in inserts {
                    var bytes = ascii
                    bytes.replaceSubrange(position..<min(length, position + insert.count), with: insert)
                    #expect(Self.check(bytes) == Self.standardAnswer(bytes), "\(bytes)")
                    checked += 1
                }
            }
        }
        #expect(Self.check([]) == true)
        #expect(UTF8Text.isValid(UnsafeRawBufferPointer(start: nil, count: 0)))
        #expect(checked > 1_000)
    }
}

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

    /// A typed model's read of a text field (``StoredFieldReader/readText()``, which checks a
    /// short ASCII text inline and anything else by ``UTF8Text``): each text, as the last field
    /// of a record, followed by 8 bytes that are not UTF-8, and before a field of such bytes, read
    /// as the standard library answers; a text it refuses leaves the reader where it was.
    @Test func aTypedModelsTextReadAgreesWithTheStandardLibrary() {
        let inserts: [[UInt8]] = [[0x41], [0x80], [0xC3], [0xC3, 0xA9], [0xFF], [0xE2, 0x82, 0xAC]]
        var texts: [[UInt8]] = [[]]
        for length in 1...20 {
            let ascii = [UInt8]((0..<length).map { UInt8(0x61 + $0 % 26) })
            texts.append(ascii)
            for position in 0..<length {
                for insert in inserts {
                    var bytes = ascii
                    bytes.replaceSubrange(position..<min(length, position + insert.count), with: insert)
                    texts.append(bytes)
                }
            }
        }
        var refused = 0
        for text in texts {
            // A string field (tag 5, a one-byte length): alone, followed by 8 bytes of 0xFF (no
            // field, but bytes a load past the text would read), and before a bytes field (tag 6)
            // of 8 bytes of 0xFF.
            let field: [UInt8] = [5, UInt8(text.count)] + text
            let noise = [UInt8](repeating: 0xFF, count: 8)
            for fields in [field, field + noise, field + [6, 8] + noise] {
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: fields.count, alignment: 1)
                defer { buffer.deallocate() }
                buffer.copyBytes(from: fields)
                var reader = StoredFieldReader(UnsafeRawBufferPointer(buffer))
                let read = reader.readText().map { Array($0) }
                if Self.standardAnswer(text) {
                    #expect(read == text, "\(fields)")
                    #expect(reader.position == field.count)
                } else {
                    #expect(read == nil, "\(fields)")
                    #expect(reader.position == 0)
                    refused += 1
                }
            }
        }
        #expect(refused > 500)
    }
}

/// Text read back from storage: a string only when its bytes are valid UTF-8, never repaired
/// with U+FFFD (a repaired string would be a value nobody stored).
@_spi(Backend) public enum UTF8Text {
    /// The string whose UTF-8 encoding is exactly `bytes`, or `nil` when they are not valid UTF-8.
    ///
    /// ASCII, the common case, is recognized eight bytes at a time and decoded without a second
    /// validation; anything else goes through the standard library's validating initializer
    /// (about three times slower than `String(decoding:as:)`, measured with `swiftc -O`).
    public static func string(_ bytes: UnsafeRawBufferPointer) -> String? {
        if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Whether `bytes` are valid UTF-8 (without building the string when they are ASCII).
    /// Inlined into a backend's row check: a short ASCII text, the common case, costs a few
    /// instructions and no call.
    @inlinable
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if let base = bytes.baseAddress {
            let count = bytes.count
            if count <= 8 {
                var word: UInt64 = 0
                withUnsafeMutableBytes(of: &word) { $0.copyMemory(from: UnsafeRawBufferPointer(start: base, count: count)) }
                if word & 0x8080_8080_8080_8080 == 0 { return true }
            } else if count <= 16 {
                // Two loads of 8 bytes, from the start and to the end (overlapping).
                let words = base.loadUnaligned(as: UInt64.self) | (base + (count &- 8)).loadUnaligned(as: UInt64.self)
                if words & 0x8080_8080_8080_8080 == 0 { return true }
            }
        }
        return isValidUnknown(bytes)
    }

    /// ``isValid(_:)`` for bytes after which more can be read: `readable` bytes from where they
    /// begin (a record's rest). Up to 8 bytes with 8 readable are checked as one load masked to
    /// their length, without copying them into a word first.
    @inlinable @inline(__always)
    public static func isValid(_ bytes: UnsafeRawBufferPointer, readable: Int) -> Bool {
        isShortASCII(bytes, readable: readable) || isValid(bytes)
    }

    @usableFromInline static func isValidUnknown(_ bytes: UnsafeRawBufferPointer) -> Bool {
        isASCII(bytes) || String(validating: bytes, as: UTF8.self) != nil
    }

    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        let count = bytes.count
        while offset + 8 <= count {
            if bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 {
                return false
            }
            offset += 8
        }
        while offset < count {
            if bytes[offset] & 0x80 != 0 { return false }
            offset += 1
        }
        return true
    }
}

/// Whether `bytes` are a text of at most 8 bytes, all ASCII, with 8 bytes readable from where they
/// start (`readable`, a record's rest): one load masked to their length. `false` says only that
/// this check cannot tell (``UTF8Text/isValid(_:readable:)`` then asks the full check). Outside
/// ``UTF8Text`` so that public inlined code (``StoredFieldReader``) may call it.
@inlinable @inline(__always)
func isShortASCII(_ bytes: UnsafeRawBufferPointer, readable: Int) -> Bool {
    let count = bytes.count
    guard count <= 8, readable >= 8, let base = bytes.baseAddress else { return false }
    let mask: UInt64 = count == 8 ? ~0 : (1 &<< UInt64(8 &* count)) &- 1
    return base.loadUnaligned(as: UInt64.self) & mask & 0x8080_8080_8080_8080 == 0
}

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
        if bytes.count <= 16, let base = bytes.baseAddress, isShortASCII(base, count: bytes.count) { return true }
        return isValidUnknown(bytes)
    }

    /// Whether the `count` bytes at `base`, 1 to 16 of them, are ASCII: two loads of the widest
    /// word that fits, from their start and to their end (overlapping when they are shorter than
    /// two words), with no call and no copy.
    @inlinable @inline(__always)
    static func isShortASCII(_ base: UnsafeRawPointer, count: Int) -> Bool {
        if count >= 8 {
            let words = base.loadUnaligned(as: UInt64.self) | (base + (count &- 8)).loadUnaligned(as: UInt64.self)
            return words & 0x8080_8080_8080_8080 == 0
        }
        if count >= 4 {
            let words = base.loadUnaligned(as: UInt32.self) | (base + (count &- 4)).loadUnaligned(as: UInt32.self)
            return words & 0x8080_8080 == 0
        }
        if count >= 2 {
            let words = base.loadUnaligned(as: UInt16.self) | (base + (count &- 2)).loadUnaligned(as: UInt16.self)
            return words & 0x8080 == 0
        }
        return count == 0 || base.load(as: UInt8.self) & 0x80 == 0
    }

    /// ``isValid(_:)`` for bytes after which more can be read: `readable` bytes from where they
    /// begin (a record's rest). Up to 8 bytes with 8 readable are checked as one load masked to
    /// their length, without copying them into a word first.
    @inlinable @inline(__always)
    public static func isValid(_ bytes: UnsafeRawBufferPointer, readable: Int) -> Bool {
        let count = bytes.count
        if count <= 8, readable >= 8, let base = bytes.baseAddress {
            let mask: UInt64 = count == 8 ? ~0 : (1 &<< UInt64(8 &* count)) &- 1
            if base.loadUnaligned(as: UInt64.self) & mask & 0x8080_8080_8080_8080 == 0 { return true }
        }
        return isValidUnknown(bytes)
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

import Foundation

/// A stored record's fields read one after another, in their entity's order: the counterpart of
/// ``StoredFieldBuffer``, what the code `@StoredModel` writes reads a model from on a backend
/// that keeps its items as compact records' fields (LMDB), with no attribute looked up by name
/// and no table of fields filled first.
///
/// Each read checks the field as the store's own read does (its tag against the type asked for,
/// its length within the record, a text's UTF-8, a double that is a number) and returns `nil`
/// when it is not one the property holds as it is: nothing is thrown, the reader is left where
/// it failed, and the caller reads the item the ordinary way, which names what is wrong. Every
/// read is bounded by the record's end, so a record of any bytes cannot read past it.
///
/// The reader points into the store's pages, valid only while the model reads from it: it is
/// noncopyable and handed over `inout`, so that no code (a hand-written
/// `init?(storedFields:)` included) can keep a copy past its record.
public struct StoredFieldReader: ~Copyable {
    @usableFromInline let base: UnsafeRawPointer?
    @usableFromInline let end: Int
    @usableFromInline var at = 0

    /// The fields of one record (after any format byte, before any checksum), valid while the
    /// reader is used.
    @_spi(Backend) public init(_ fields: UnsafeRawBufferPointer) {
        (base, end) = (fields.baseAddress, fields.count)
    }

    // The tags are the compact record's (`FieldTag`, which inlined code may not name): 0 null,
    // 1 and 2 false and true, 3 int, 4 double, 5 string, 6 bytes, 7 date, 8 uuid.

    /// Whether `bytes` are UTF-8 (``UTF8Text``, which inlined code may not name): what
    /// ``readText()`` asks of a text that ``isShortASCII(_:readable:)`` could not pass.
    @usableFromInline static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool { UTF8Text.isValid(bytes) }

    /// Whether every field was read.
    @inlinable public var isAtEnd: Bool { at == end }

    /// Where the next field starts: what ``rewind(to:)`` takes, so that a read that fails after
    /// a field was read (an integer out of the type's range, a raw value no case has) leaves the
    /// reader where it was.
    @inlinable public var position: Int { at }

    /// Moves the reader back to a ``position`` it had.
    @inlinable public mutating func rewind(to position: Int) { at = position }

    /// The next field's tag, not read past.
    @inlinable @inline(__always) func peek() -> UInt8? {
        guard at < end, let base else { return nil }
        return base.load(fromByteOffset: at, as: UInt8.self)
    }

    /// Reads a null when the next field is one (`true`); leaves any other field (`false`).
    @inlinable @inline(__always) public mutating func readNull() -> Bool {
        guard peek() == 0 else { return false }
        at &+= 1
        return true
    }

    /// The next field's 8 bytes when its tag is `tag`.
    @inlinable @inline(__always) mutating func number(_ tag: UInt8) -> UInt64? {
        guard peek() == tag, end &- at >= 9, let base else { return nil }
        let bits = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at &+ 1, as: UInt64.self))
        at &+= 9
        return bits
    }

    @inlinable @inline(__always) public mutating func readInt() -> Int64? { number(3).map { Int64(bitPattern: $0) } }

    @inlinable @inline(__always) public mutating func readDate() -> Timestamp? {
        number(7).map { Timestamp(microsecondsSinceEpoch: Int64(bitPattern: $0)) }
    }

    @inlinable @inline(__always) public mutating func readDouble() -> Double? {
        guard let bits = number(4), !Double(bitPattern: bits).isNaN else { return nil }
        return Double(bitPattern: bits)
    }

    @inlinable @inline(__always) public mutating func readBool() -> Bool? {
        switch peek() {
        case 1?: at &+= 1; return false
        case 2?: at &+= 1; return true
        default: return nil
        }
    }

    /// The next field's bytes when its tag is `tag`: a LEB128 length (at most `Int32.max`, in at
    /// most five bytes) and that many bytes inside the record.
    @inlinable @inline(__always) mutating func payload(_ tag: UInt8) -> UnsafeRawBufferPointer? {
        guard peek() == tag, let base else { return nil }
        var offset = at &+ 1
        var length = 0
        var shift = 0
        while true {
            guard offset < end, shift <= 28 else { return nil }
            let byte = base.load(fromByteOffset: offset, as: UInt8.self)
            offset &+= 1
            length |= Int(byte & 0x7F) &<< shift
            if byte & 0x80 == 0 { break }
            shift &+= 7
        }
        guard length <= Int(Int32.max), length <= end &- offset else { return nil }
        at = offset &+ length
        return UnsafeRawBufferPointer(start: length > 0 ? base + offset : nil, count: length)
    }

    /// A text's UTF-8 bytes, checked to be UTF-8, valid while the record is.
    @inlinable @inline(__always) public mutating func readText() -> UnsafeRawBufferPointer? {
        let start = at
        guard let bytes = payload(5) else { return nil }
        // The text ends at `at`; the record's rest, from where the text starts, is readable. A
        // short ASCII text (the common case) is known here, without a call.
        let readable = end &- (at &- bytes.count)
        guard isShortASCII(bytes, readable: readable) || Self.isUTF8(bytes) else {
            at = start
            return nil
        }
        return bytes
    }

    /// A blob's bytes, valid while the record is.
    @inlinable @inline(__always) public mutating func readBytes() -> UnsafeRawBufferPointer? { payload(6) }

    /// A uuid's 16 bytes.
    @inlinable @inline(__always) public mutating func readUUID() -> UUID? {
        guard peek() == 8, end &- at >= 17, let base else { return nil }
        let uuid = UUID(uuid: base.loadUnaligned(fromByteOffset: at &+ 1, as: uuid_t.self))
        at &+= 17
        return uuid
    }
}

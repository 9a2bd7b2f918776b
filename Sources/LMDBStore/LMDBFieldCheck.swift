@_spi(Backend) import DataStoreAPI

/// The checking walk over a stored record's fields (``LMDBRecordCoding``) for one entity: every
/// field checked as a decode checks it (the format byte, tags against the attributes' types,
/// nulls of required attributes, lengths within the value, UTF-8, NaN, nothing after the last
/// field), each handed to the caller as it is found. One loop over a table of what each slot
/// holds, built once per read; what a visit's row and a result's compact record are made of.
/// When it refuses a record, ``LMDBRecordCoding/fields(_:attributes:into:)`` names the damage.
///
/// `@unchecked Sendable`: nothing of it changes after `init` (its table of kinds is written
/// there and only read after), so the transactions of every thread share one per entity
/// (``LMDBDatabases/fieldChecks``).
final class LMDBFieldCheck: @unchecked Sendable {
    /// The attributes the check was built for.
    let attributes: [Attribute]
    let count: Int
    /// Per slot: the tag its values are stored under (a bool's is its false tag), whether it may
    /// be null, its type, and how its payload is read (``Shape``).
    private let kinds: UnsafeMutablePointer<Kind>

    private struct Kind {
        let tag: UInt8
        let optional: Bool
        let type: ValueType
        let shape: Shape
    }

    /// How a field's payload is read once its tag is the slot's.
    private enum Shape: UInt8 {
        /// No payload: a bool (its false tag; the true tag is the other case).
        case flag
        /// Eight bytes: an int's or a date's.
        case number
        /// Eight bytes that must not be NaN.
        case double
        /// A LEB128 length and that many bytes, which must be UTF-8.
        case text
        /// A LEB128 length and that many bytes.
        case blob
        /// Sixteen bytes.
        case uuid
    }

    init(_ attributes: [Attribute]) {
        self.attributes = attributes
        count = attributes.count
        kinds = .allocate(capacity: max(count, 1))
        for (slot, attribute) in attributes.enumerated() {
            let shape: Shape
            switch attribute.type {
            case .bool: shape = .flag
            case .int, .date: shape = .number
            case .double: shape = .double
            case .string: shape = .text
            case .bytes: shape = .blob
            case .uuid: shape = .uuid
            }
            (kinds + slot).initialize(to: Kind(tag: Self.tag(of: attribute.type).rawValue, optional: attribute.isOptional,
                                               type: attribute.type, shape: shape))
        }
    }

    deinit {
        kinds.deallocate()
    }

    private static func tag(of type: ValueType) -> FieldTag {
        switch type {
        case .bool: return .falseValue
        case .int: return .int
        case .double: return .double
        case .string: return .string
        case .bytes: return .bytes
        case .date: return .date
        case .uuid: return .uuid
        }
    }

    /// A compact record of `arena` holding the stored record `bytes`'s fields as they are, once
    /// the walk passed them; `nil` when it refused them (or they are too large for a compact
    /// record): ``LMDBRecordCoding/decode(_:attributes:layout:arena:)`` then decodes or names the
    /// damage.
    @inline(__always)
    func record(_ bytes: UnsafeRawBufferPointer, layout: RecordLayout, arena: inout CompactArena) -> Record? {
        guard let unsealed = LMDBRecordCoding.unsealed(bytes) else { return nil }
        // The offsets of a compact record are from the first field, past the format byte.
        let fields = UnsafeRawBufferPointer(rebasing: unsealed[1...])
        return arena.record(layout: layout, fields: fields) { offsets in
            guard walkFields(unsealed, { _, start, _ in offsets.append(start - 1) }) else { return false }
            offsets.append(unsealed.count - 1)
            return true
        }
    }

    /// Walks the stored record `bytes` once its checksum matched, calling `found` with each
    /// field's slot, the offset of its tag in `bytes`, and the field (its bytes in `bytes`).
    /// - Returns: whether the record is sound; `found` may have been called for some fields of
    ///   one that is not.
    @inline(__always)
    func walk(_ bytes: UnsafeRawBufferPointer, _ found: (_ slot: Int, _ start: Int, _ field: RowField) -> Void) -> Bool {
        guard let unsealed = LMDBRecordCoding.unsealed(bytes) else { return false }
        return walkFields(unsealed, found)
    }

    /// ``walk(_:_:)`` over a record whose checksum matched, without it.
    ///
    /// A field whose tag is its slot's is read by the slot's shape (one comparison, then the
    /// payload); any other tag is a null of an optional attribute, a bool's true, or damage.
    /// The offsets are compared with `end` before every read, so that the wrapping arithmetic
    /// cannot overflow: `offset` never passes `end`, and a length is at most `Int32.max`.
    @inline(__always)
    private func walkFields(_ bytes: UnsafeRawBufferPointer,
                            _ found: (_ slot: Int, _ start: Int, _ field: RowField) -> Void) -> Bool {
        // unsealed(_:) checked the format byte.
        guard let base = bytes.baseAddress else { return false }
        let end = bytes.count
        let kinds = self.kinds
        var offset = 1
        for slot in 0..<count {
            guard offset < end else { return false }
            let start = offset
            let tag = base.load(fromByteOffset: offset, as: UInt8.self)
            offset &+= 1
            let kind = kinds[slot]
            guard tag == kind.tag else {
                if tag == FieldTag.null.rawValue, kind.optional {
                    found(slot, start, .null)
                } else if tag == FieldTag.trueValue.rawValue, kind.shape == .flag {
                    found(slot, start, RowField(.bool, bits: 1))
                } else {
                    return false
                }
                continue
            }
            switch kind.shape {
            case .flag:
                found(slot, start, RowField(.bool, bits: 0))
            case .number, .double:
                guard end &- offset >= 8 else { return false }
                let bits = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                if kind.shape == .double, Double(bitPattern: bits).isNaN { return false }
                found(slot, start, RowField(kind.type, bits: bits))
                offset &+= 8
            case .text, .blob:
                // A LEB128 length of at most six bytes, at most Int32.max (as the decode reads it).
                guard offset < end else { return false }
                var byte = base.load(fromByteOffset: offset, as: UInt8.self)
                offset &+= 1
                var length = Int(byte & 0x7F)
                var shift = 0
                while byte & 0x80 != 0 {
                    shift &+= 7
                    guard offset < end, shift <= 35 else { return false }
                    byte = base.load(fromByteOffset: offset, as: UInt8.self)
                    offset &+= 1
                    length |= Int(byte & 0x7F) &<< shift
                }
                guard length <= Int(Int32.max), length <= end &- offset else { return false }
                let payload = UnsafeRawBufferPointer(start: length > 0 ? base + offset : nil, count: length)
                if kind.shape == .text, !UTF8Text.isValid(payload, readable: end &- offset) { return false }
                found(slot, start, RowField(kind.type, bytes: payload))
                offset &+= length
            case .uuid:
                guard end &- offset >= 16 else { return false }
                found(slot, start, RowField(.uuid, bytes: UnsafeRawBufferPointer(start: base + offset, count: 16)))
                offset &+= 16
            }
        }
        return offset == end
    }
}

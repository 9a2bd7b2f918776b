@_spi(Backend) import DataStoreAPI

/// A visit's row read in LMDB's map: the stored record's fields (``LMDBRecordCoding``), checked
/// and laid out in the cursor's ``FieldTable`` by ``load(_:)`` before the row is handed over.
/// Nothing is built per row: the table is the cursor's, written in place, and its strings and
/// bytes point into the map.
final class LMDBRowCursor: RowCursor {
    let layout: RecordLayout
    let types: [ValueType]
    let entityName: String
    let fieldTable: FieldTable?
    private let table: FieldTable
    /// Per slot: the tag its values are stored under (a bool's is its false tag), whether it may be
    /// null, and its type.
    private let kinds: UnsafeMutablePointer<(tag: UInt8, optional: Bool, type: ValueType)>

    init(_ entity: EntitySchema) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        table = FieldTable(count: types.count)
        fieldTable = table
        kinds = .allocate(capacity: max(types.count, 1))
        for (slot, attribute) in entity.attributes.enumerated() {
            (kinds + slot).initialize(to: (Self.tag(of: attribute.type).rawValue, attribute.isOptional, attribute.type))
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

    func type(at slot: Int) -> ValueType { types[slot] }

    func field(at slot: Int) -> RowField {
        precondition(slot >= 0 && slot < types.count, "a row's field index out of range")
        return table[slot]
    }

    /// Makes the stored record `bytes` (in the map) the current row: every field checked as a
    /// decode checks it (format, tags against the attributes' types, nulls of required
    /// attributes, lengths within the value, UTF-8, NaN, nothing after the last field) and noted in
    /// the table.
    /// - Returns: whether the record is sound (when it is not, the table is partly written and
    ///   ``LMDBRecordCoding/fields(_:attributes:into:)`` names the damage).
    func load(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0,
              base.load(as: UInt8.self) == LMDBRecordCoding.version else { return false }
        let end = bytes.count
        var offset = 1
        for slot in 0..<table.count {
            guard offset < end else { return false }
            let tag = base.load(fromByteOffset: offset, as: UInt8.self)
            offset += 1
            let kind = kinds[slot]
            switch tag {
            case FieldTag.null.rawValue:
                guard kind.optional else { return false }
                table[slot] = .null
            case FieldTag.falseValue.rawValue, FieldTag.trueValue.rawValue:
                guard kind.tag == FieldTag.falseValue.rawValue else { return false }
                table[slot] = RowField(.bool, bits: UInt64(tag &- FieldTag.falseValue.rawValue))
            case FieldTag.int.rawValue, FieldTag.double.rawValue, FieldTag.date.rawValue:
                guard kind.tag == tag, end - offset >= 8 else { return false }
                let bits = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                if tag == FieldTag.double.rawValue, Double(bitPattern: bits).isNaN { return false }
                table[slot] = RowField(kind.type, bits: bits)
                offset += 8
            case FieldTag.string.rawValue, FieldTag.bytes.rawValue:
                guard kind.tag == tag else { return false }
                // A LEB128 length of at most six bytes, at most Int32.max (as the decode reads it).
                var length = 0
                var shift = 0
                while true {
                    guard offset < end, shift <= 35 else { return false }
                    let byte = base.load(fromByteOffset: offset, as: UInt8.self)
                    offset += 1
                    length |= Int(byte & 0x7F) << shift
                    if byte & 0x80 == 0 { break }
                    shift += 7
                }
                guard length <= Int(Int32.max), length <= end - offset else { return false }
                let payload = UnsafeRawBufferPointer(start: length > 0 ? base + offset : nil, count: length)
                if tag == FieldTag.string.rawValue, !UTF8Text.isValid(payload) { return false }
                table[slot] = RowField(kind.type, bytes: payload)
                offset += length
            case FieldTag.uuid.rawValue:
                guard kind.tag == tag, end - offset >= 16 else { return false }
                table[slot] = RowField(.uuid, bytes: UnsafeRawBufferPointer(start: base + offset, count: 16))
                offset += 16
            default:
                return false
            }
        }
        return offset == end
    }
}

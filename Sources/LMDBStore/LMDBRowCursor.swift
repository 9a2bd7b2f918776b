@_spi(Backend) import DataStoreAPI

/// A visit's row read in LMDB's map: the stored record's bytes (``LMDBRecordCoding``) and where
/// each field starts in them, found and checked by ``LMDBRecordCoding/fields(_:attributes:offsets:)``
/// before the row is handed over. Nothing is built per row: the offsets are a table of the
/// cursor's, written in place.
final class LMDBRowCursor: RowCursor {
    let layout: RecordLayout
    let types: [ValueType]
    let entityName: String
    // `@exclusivity(unchecked)`: the cursor is used by one visit, on one thread, and no access
    // to these overlaps another (the visit sets them between rows, the accessors read them).
    /// The current record's bytes, in the map (valid until the cursor moves).
    @exclusivity(unchecked) var bytes = UnsafeRawBufferPointer(start: nil, count: 0)
    /// Where each field (its tag, then its payload) starts in `bytes`, and where the last ends.
    let offsets: UnsafeMutablePointer<Int>

    init(_ entity: EntitySchema) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        offsets = .allocate(capacity: types.count + 1)
        offsets.initialize(repeating: 0, count: types.count + 1)
    }

    deinit {
        offsets.deallocate()
    }

    // The tags of LMDBRecordCoding: 0 null, 1 false, 2 true, then int, double, string, bytes,
    // date (8-byte payloads for the numbers) and uuid (16 bytes).

    func type(at slot: Int) -> ValueType { types[slot] }

    func field(at slot: Int) -> RowField {
        precondition(slot >= 0 && slot < types.count, "a row's field index out of range")
        let start = offsets[slot], end = offsets[slot + 1]
        switch bytes[start] {
        case 0: return .null
        case 1: return RowField(types[slot], bits: 0)
        case 2: return RowField(types[slot], bits: 1)
        case 5, 6:
            // A string's or bytes' payload starts after its LEB128 length.
            var payload = start + 1
            while bytes[payload] & 0x80 != 0 { payload += 1 }
            return RowField(types[slot], bytes: UnsafeRawBufferPointer(rebasing: bytes[(payload + 1)..<end]))
        case 8: return RowField(.uuid, bytes: UnsafeRawBufferPointer(rebasing: bytes[(start + 1)..<end]))
        default:
            // int, double, date: 8 little-endian bytes.
            return RowField(types[slot], bits: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start + 1, as: UInt64.self)))
        }
    }
}

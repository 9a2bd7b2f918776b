@_spi(Backend) import DataStoreAPI

/// A visit's row read in LMDB's map: the stored record's bytes (``LMDBRecordCoding``) and where
/// each field lies in them, found and checked by ``LMDBRecordCoding/fields(_:attributes:into:)``
/// before the row is handed over. Nothing is built per row: the ranges reuse their array.
final class LMDBRowCursor: RowCursor {
    let layout: RecordLayout
    let types: [ValueType]
    let entityName: String
    // `@exclusivity(unchecked)`: the cursor is used by one visit, on one thread, and no access
    // to these overlaps another (the visit sets them between rows, the accessors read them).
    /// The current record's bytes, in the map (valid until the cursor moves).
    @exclusivity(unchecked) var bytes = UnsafeRawBufferPointer(start: nil, count: 0)
    /// Each field's range in `bytes`: its tag, then its payload.
    @exclusivity(unchecked) var ranges: [Range<Int>] = []

    init(_ entity: EntitySchema) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        ranges.reserveCapacity(types.count)
    }

    // The tags of LMDBRecordCoding: 0 null, 1 false, 2 true, then int, double, string, bytes,
    // date (8-byte payloads for the numbers) and uuid (16 bytes).

    func slot(of name: String) -> Int? { layout.slot(of: name) }

    func type(at slot: Int) -> ValueType { types[slot] }

    func isNull(at slot: Int) -> Bool { bytes[ranges[slot].lowerBound] == 0 }

    func int64(at slot: Int) -> Int64 {
        let start = ranges[slot].lowerBound
        switch bytes[start] {
        case 1: return 0
        case 2: return 1
        default: return Int64(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start + 1, as: UInt64.self)))
        }
    }

    func double(at slot: Int) -> Double {
        Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: ranges[slot].lowerBound + 1,
                                                                   as: UInt64.self)))
    }

    func withBytes<R>(at slot: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let range = ranges[slot]
        var start = range.lowerBound + 1
        // A string's or bytes' payload starts after its LEB128 length; a uuid's has none.
        if bytes[range.lowerBound] != 8 {
            while bytes[start] & 0x80 != 0 { start += 1 }
            start += 1
        }
        return try body(UnsafeRawBufferPointer(rebasing: bytes[start..<range.upperBound]))
    }
}

import RawChecksum

/// The checksum every stored row of the store carries since 30 November 2026, computed by the
/// raw side as a C program writing or reading the store's layout computes it: the CRC-32C of the
/// row's fields, each a tag and its payload (an int's or a double's 8 little-endian bytes; a
/// text's or blob's LEB128 length and bytes), in the entity's order. On LMDB it is the record's
/// last four bytes (after a format byte 2 and the fields), on SQLite the table's `_ds_sum`
/// column. The raw side writes it and checks it on every read, as the store does.
package enum RawRowSum {
    /// The store's field tags of the workload's types.
    package static let intTag: UInt8 = 3, doubleTag: UInt8 = 4, stringTag: UInt8 = 5, bytesTag: UInt8 = 6

    /// The sum of a workload row's fields, described to the store's `ds_crc32c_fields` (which
    /// sums them as they would be written, without writing them).
    @inline(__always)
    package static func of(id: Int64, name: UnsafeRawBufferPointer, score: Int64, ratio: Double,
                           payload: UnsafeRawBufferPointer) -> UInt32 {
        let fields = (
            ds_crc32c_field(tag: UInt64(intTag), bits: UInt64(bitPattern: id), bytes: nil, form: 1),
            ds_crc32c_field(tag: UInt64(stringTag), bits: UInt64(name.count), bytes: name.baseAddress, form: 2),
            ds_crc32c_field(tag: UInt64(intTag), bits: UInt64(bitPattern: score), bytes: nil, form: 1),
            ds_crc32c_field(tag: UInt64(doubleTag), bits: ratio.bitPattern, bytes: nil, form: 1),
            ds_crc32c_field(tag: UInt64(bytesTag), bits: UInt64(payload.count), bytes: payload.baseAddress, form: 2))
        return withUnsafePointer(to: fields) {
            $0.withMemoryRebound(to: ds_crc32c_field.self, capacity: 5) { ds_crc32c_fields(0, $0, 5) }
        }
    }

    /// The CRC-32C of `bytes` (an LMDB record's format byte and fields).
    @inline(__always)
    package static func of(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        ds_crc32c(0, bytes.baseAddress, bytes.count)
    }
}

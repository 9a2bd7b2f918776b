import Foundation
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

/// The change feed's entry for a transaction that inserted one item of an int key, written as
/// the store writes it (`ChangeLog.encodeEntry`, entry version 3): the version, the commit's time
/// in microseconds, one entity's group (its name, flags with the keys-as-differences bit, the key
/// type, one kind, the key as a LEB128 zigzag difference from 0), then the CRC-32C of all of it;
/// integers little-endian. Written into a buffer kept from one entry to the next.
package struct RawFeedEntry {
    private var buffer: [UInt8] = []

    package init() {}

    /// Hands the entry of the insert of `key` into `entity` to `body`.
    package mutating func withInsertOf(_ key: Int64, entity: String,
                                       _ body: (UnsafeRawBufferPointer) -> Void) {
        var name = entity
        // The header (17), the group (4 + name + 7), a LEB128 of at most 10 bytes, the checksum.
        let size = 17 + 4 + name.utf8.count + 7 + 10 + 4
        if buffer.count < size { buffer = [UInt8](repeating: 0, count: size) }
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let now = Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1_000
        name.withUTF8 { name in
            buffer.withUnsafeMutableBytes { out in
                var at = 0
                func byte(_ value: UInt8) {
                    out[at] = value
                    at += 1
                }
                func u32(_ value: UInt32) {
                    out.storeBytes(of: value.littleEndian, toByteOffset: at, as: UInt32.self)
                    at += 4
                }
                byte(3)
                out.storeBytes(of: UInt64(bitPattern: now).littleEndian, toByteOffset: at, as: UInt64.self)
                at += 8
                u32(1)
                u32(UInt32(name.count))
                UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + name.count)])
                    .copyMemory(from: UnsafeRawBufferPointer(name))
                at += name.count
                byte(4)  // keys as differences
                byte(1)  // an int key
                u32(1)
                byte(1)  // inserted
                var zigzag = UInt64(bitPattern: (key << 1) ^ (key >> 63))
                while zigzag >= 0x80 {
                    byte(UInt8(zigzag & 0x7F) | 0x80)
                    zigzag >>= 7
                }
                byte(UInt8(zigzag))
                u32(ds_crc32c(0, out.baseAddress, at))
                body(UnsafeRawBufferPointer(start: out.baseAddress, count: at))
            }
        }
    }
}

internal import CChecksum
@_spi(Backend) import DataStoreAPI
import Foundation

/// The compact, versioned record encoding of the LMDB backend: a format byte, then for each
/// attribute in schema order a tag and its payload (little-endian fixed-size numbers;
/// strings and bytes as a LEB128 length and their bytes), then the CRC-32C of everything before
/// it (four bytes, little-endian), checked whenever the record is read: a byte that changed
/// on the disk after it was written, which no field check can see inside a string or a number,
/// is damage naming the item rather than a value.
///
/// Format 1 had no checksum; a store of format 2 or older is upgraded when opened writable
/// (``LMDBEngine``), every record checked and sealed in one transaction.
enum LMDBRecordCoding {
    static let version: UInt8 = 2
    /// The format of the records of a store of format 2 or older: no checksum.
    static let unsealedVersion: UInt8 = 1
    /// The bytes of the checksum at the end of a record.
    static let checksumSize = 4

    /// The CRC-32C of `bytes`.
    @inline(__always)
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        ds_crc32c(0, bytes.baseAddress, bytes.count)
    }

    /// The record `bytes` without its checksum when the checksum matches (or, for a record of
    /// format 1, as it is), `nil` when it does not or the format byte is neither: what every
    /// read checks before any field.
    ///
    /// Format 1 is read so that a store opened read-only before its upgrade stays readable; a
    /// damaged format byte cannot pass a sealed record off as one: its checksum is then four
    /// bytes after the last field, which the field walk refuses.
    @inline(__always)
    static func unsealed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
        let format = base.load(as: UInt8.self)
        if format == version {
            let end = bytes.count - checksumSize
            guard end > 0 else { return nil }
            let stored = UInt32(littleEndian: base.loadUnaligned(fromByteOffset: end, as: UInt32.self))
            return ds_crc32c(0, base, end) == stored ? UnsafeRawBufferPointer(start: base, count: end) : nil
        }
        return format == unsealedVersion ? bytes : nil
    }

    /// Appends the checksum of `buffer[start...]` (a record's format byte and fields) to `buffer`.
    static func seal(_ buffer: inout [UInt8], from start: Int) {
        let sum = buffer.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        withUnsafeBytes(of: sum.littleEndian) { buffer.append(contentsOf: $0) }
    }

    /// Why a record is refused before its fields are read (its format byte, or a checksum that
    /// does not match); `nil` when neither.
    static func envelopeDamage(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let format = bytes.first else { return "empty" }
        guard format == version || format == unsealedVersion else { return "unknown record format \(format)" }
        return unsealed(bytes) == nil ? "its checksum does not match its bytes (they changed after it was written)" : nil
    }

    /// The fields' tags, those of a compact record, which holds a stored record's fields as
    /// they are (``CompactArena``).
    private typealias Tag = FieldTag

    static func encode(_ record: Record, _ entity: EntitySchema) -> [UInt8] {
        record.values(in: entity.layout).withUnsafeBufferPointer { values in
            // The exact size first: one allocation, never grown.
            [UInt8](unsafeUninitializedCapacity: size(values)) { buffer, count in
                count = buffer.baseAddress.map { write(values, at: UnsafeMutableRawPointer($0)) } ?? 0
            }
        }
    }

    /// Calls `body` with the encoding of a record's values in schema order
    /// (``Record/values(in:)``), on the stack when it is small (a write of the record allocates
    /// nothing for it). Takes the values, not the record and its entity: closures around those
    /// copied them (retaining each of their fields) three times per write.
    @inline(__always)
    static func withEncoded<R>(_ values: RecordValues, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try values.withUnsafeBufferPointer { try withEncoded($0, body) }
    }

    @inline(__always)
    private static func withEncoded<R>(_ values: UnsafeBufferPointer<Value>,
                                       _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let size = size(values)
        return try withUnsafeTemporaryAllocation(byteCount: size, alignment: 1) { buffer in
            let count = buffer.baseAddress.map { write(values, at: $0) } ?? 0
            return try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    /// Appends the bytes of one field (a value's tag and payload, no format byte) to `bytes`, for
    /// a rewrite that copies the other fields as they are stored (``fields(_:attributes:into:)``).
    static func append(field value: Value, to bytes: inout [UInt8]) {
        withUnsafePointer(to: value) { pointer in
            withEncoded(UnsafeBufferPointer(start: pointer, count: 1)) {
                bytes.append(contentsOf: $0.dropFirst().dropLast(checksumSize))
            }
        }
    }

    /// Where each attribute's field lies in a stored record, every field checked as a decode
    /// checks it (tags, lengths, types, UTF-8, NaN, required attributes) but none built: a
    /// change of attributes can then copy the fields' bytes into the new record without building
    /// a value of each.
    /// - Returns: what is damaged, `nil` when nothing is (`ranges` then holds one range per
    ///   attribute, in order).
    static func fields(_ bytes: UnsafeRawBufferPointer, attributes: [Attribute],
                       into ranges: inout [Range<Int>]) -> String? {
        ranges.removeAll(keepingCapacity: true)
        return withUnsafeTemporaryAllocation(of: Int.self, capacity: attributes.count + 1) { offsets in
            if let damage = fields(bytes, attributes: attributes, offsets: offsets.baseAddress.unsafelyUnwrapped) {
                return damage
            }
            for index in attributes.indices { ranges.append(offsets[index]..<offsets[index + 1]) }
            return nil
        }
    }

    /// ``fields(_:attributes:into:)`` into a table of one offset per attribute and one past the
    /// last (where each field starts in `bytes`, and where the last ends), written in place: what
    /// a visit does once per row before it reads any field.
    static func fields(_ bytes: UnsafeRawBufferPointer, attributes: [Attribute],
                       offsets: UnsafeMutablePointer<Int>) -> String? {
        guard let unsealed = unsealed(bytes) else { return envelopeDamage(bytes) ?? "unreadable" }
        var reader = Reader(bytes: unsealed)
        _ = reader.byte()
        do throws(Damage) {
            for index in attributes.indices {
                offsets[index] = reader.offset
                _ = try value(&reader, attributes, index, build: false)
            }
        } catch {
            return error.why
        }
        offsets[attributes.count] = reader.offset
        return reader.isAtEnd ? nil : "trailing bytes"
    }

    /// The value of the field at `range` of a record whose fields ``fields(_:attributes:into:)``
    /// checked: the attribute at `index`'s value.
    static func value(of bytes: UnsafeRawBufferPointer, at range: Range<Int>, attributes: [Attribute],
                      index: Int) -> Value? {
        var reader = Reader(bytes: UnsafeRawBufferPointer(rebasing: bytes[range]))
        return try? value(&reader, attributes, index)
    }

    /// The size of the encoding of `values`.
    private static func size(_ values: UnsafeBufferPointer<Value>) -> Int {
        var size = 1 + checksumSize
        for value in values { size += FieldWriter.size(of: value) }
        return size
    }

    /// Writes the encoding of `values` at `base`, which has room for ``size(_:)`` bytes, in place:
    /// no append's capacity check or growth per value.
    /// - Returns: the bytes written.
    private static func write(_ values: UnsafeBufferPointer<Value>, at base: UnsafeMutableRawPointer) -> Int {
        base.storeBytes(of: version, as: UInt8.self)
        var offset = 1
        for value in values { offset += FieldWriter.write(value, at: base + offset) }
        let sum = ds_crc32c(0, base, offset)
        base.storeBytes(of: sum.littleEndian, toByteOffset: offset, as: UInt32.self)
        offset += checksumSize
        assert(offset == size(values), "the record's size was computed wrong")
        return offset
    }

    /// Decodes a record.
    /// - Throws: `corrupt` naming the entity when the bytes do not match the schema.
    static func decode(_ bytes: UnsafeRawBufferPointer, _ entity: EntitySchema) throws(StoreError) -> Record {
        let (record, damage) = decode(bytes, attributes: entity.attributes, layout: entity.layout)
        if let damage { throw corrupt(entity, damage) }
        return record
    }

    /// Decodes a new record, for results that keep every record (point gets, fetches, scans): a
    /// compact record of the arena, which holds the stored fields as they are, checked here once
    /// (tags, lengths, types, UTF-8, NaN, required attributes) and decoded when a value is asked
    /// for.
    /// - Returns: the record, and what is damaged (`nil` when nothing is; the record is then empty).
    static func decode(_ sealed: UnsafeRawBufferPointer, attributes: [Attribute], layout: RecordLayout,
                       arena: inout CompactArena) -> (Record, damage: String?) {
        guard let bytes = unsealed(sealed) else { return (Record(), envelopeDamage(sealed) ?? "unreadable") }
        var reader = Reader(bytes: bytes)
        _ = reader.byte()
        var damage: String?
        let decoded = arena.record(layout: layout, fields: UnsafeRawBufferPointer(rebasing: bytes[1...])) { offsets in
            do throws(Damage) {
                for index in attributes.indices {
                    offsets.append(reader.offset - 1)
                    _ = try value(&reader, attributes, index, build: false)
                }
            } catch {
                damage = error.why
                return false
            }
            guard reader.isAtEnd else {
                damage = "trailing bytes"
                return false
            }
            offsets.append(reader.offset - 1)
            return true
        }
        if let decoded { return (decoded, nil) }
        if let damage { return (Record(), damage) }
        // Too large for a compact record's offsets: values of its own.
        var values = RecordArena()
        return decode(sealed, attributes: attributes, layout: layout, arena: &values)
    }

    /// Decodes a new record into values of the arena's shared storage, each built once.
    static func decode(_ bytes: UnsafeRawBufferPointer, attributes: [Attribute], layout: RecordLayout,
                       arena: inout RecordArena) -> (Record, damage: String?) {
        guard let unsealed = unsealed(bytes) else { return (Record(), envelopeDamage(bytes) ?? "unreadable") }
        var reader = Reader(bytes: unsealed)
        _ = reader.byte()
        var damage: Damage?
        let decoded = arena.record(layout: layout) { sink in
            do throws(Damage) {
                for index in attributes.indices {
                    sink.append(try value(&reader, attributes, index))
                }
                return true
            } catch {
                damage = error
                return false
            }
        }
        guard let decoded else { return (Record(), damage?.why ?? "unreadable") }
        guard reader.isAtEnd else { return (Record(), "trailing bytes") }
        return (decoded, nil)
    }

    /// ``decode(_:attributes:layout:arena:)`` for a record on its own.
    static func decode(_ bytes: UnsafeRawBufferPointer, attributes: [Attribute],
                       layout: RecordLayout) -> (Record, damage: String?) {
        var arena = CompactArena()
        return decode(bytes, attributes: attributes, layout: layout, arena: &arena)
    }

    static func corrupt(_ entity: EntitySchema, _ why: String) -> StoreError {
        StoreError(.corrupt, "a stored '\(entity.name)' record is damaged: \(why)")
    }

    /// What is wrong with a value, before the entity is named (``corrupt(_:_:)``).
    private struct Damage: Error {
        let why: String
        init(_ why: String) { self.why = why }
    }

    /// Reads one attribute's value and checks it against the attribute: the tag must be the
    /// attribute's type (or null, when it is optional), checked before the value is built.
    /// By index: the fields are read in place, not each attribute copied (its name retained).
    /// `build` false: checked as always, but returned as null (no string or array is built).
    @inline(__always)
    private static func value(_ reader: inout Reader, _ attributes: [Attribute], _ index: Int,
                              build: Bool = true) throws(Damage) -> Value {
        guard let raw = reader.byte(), let tag = Tag(rawValue: raw) else { throw Damage("bad tag") }
        let type = attributes[index].type
        switch tag {
        case .null:
            guard attributes[index].isOptional else {
                throw Damage("attribute \(attributes[index].name) is null, but it is required")
            }
            return .null
        case .falseValue, .trueValue:
            guard type == .bool else { throw mismatch(attributes[index], holds: .bool) }
            return .bool(tag == .trueValue)
        case .int:
            guard type == .int else { throw mismatch(attributes[index], holds: .int) }
            guard let bits = reader.fixed() else { throw Damage("truncated number") }
            return .int(Int64(bitPattern: bits))
        case .double:
            guard type == .double else { throw mismatch(attributes[index], holds: .double) }
            guard let bits = reader.fixed() else { throw Damage("truncated number") }
            let d = Double(bitPattern: bits)
            if d.isNaN { throw Damage("attribute \(attributes[index].name) holds NaN") }
            return .double(d)
        case .date:
            guard type == .date else { throw mismatch(attributes[index], holds: .date) }
            guard let bits = reader.fixed() else { throw Damage("truncated number") }
            return .date(Timestamp(microsecondsSinceEpoch: Int64(bitPattern: bits)))
        case .string, .bytes:
            let stored: ValueType = tag == .string ? .string : .bytes
            guard stored == type else { throw mismatch(attributes[index], holds: stored) }
            guard let length = reader.length(), let body = reader.take(length) else {
                throw Damage("truncated \(attributes[index].name)")
            }
            if tag == .bytes { return build ? .bytes(Array(body)) : .null }
            if !build {
                guard UTF8Text.isValid(body) else {
                    throw Damage("\(attributes[index].name) holds text that is not valid UTF-8")
                }
                return .null
            }
            guard let string = UTF8Text.string(body) else {
                throw Damage("\(attributes[index].name) holds text that is not valid UTF-8")
            }
            return .string(string)
        case .uuid:
            guard type == .uuid else { throw mismatch(attributes[index], holds: .uuid) }
            guard let body = reader.take(16), let uuid = UUID(bytes: body) else { throw Damage("truncated uuid") }
            return .uuid(uuid)
        }
    }

    private static func mismatch(_ attribute: Attribute, holds stored: ValueType) -> Damage {
        Damage("attribute \(attribute.name) holds \(stored), not \(attribute.type)")
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        /// A reader at the start of `bytes`.
        init(bytes: UnsafeRawBufferPointer) {
            self.bytes = bytes
        }

        var isAtEnd: Bool { offset == bytes.count }

        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func fixed() -> UInt64? {
            guard bytes.count - offset >= 8 else { return nil }
            defer { offset += 8 }
            return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        }

        mutating func length() -> Int? {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while let b = byte() {
                result |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return result <= UInt64(Int32.max) ? Int(result) : nil }
                shift += 7
                if shift > 35 { return nil }
            }
            return nil
        }

        mutating func take(_ count: Int) -> UnsafeRawBufferPointer? {
            guard count >= 0, count <= bytes.count - offset else { return nil }
            defer { offset += count }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
        }
    }
}

/// The compact records of one loop over stored records (a fetch's, a scan's, a visit's
/// candidates): the arena they share, and the attributes and layout they are read with. A class,
/// so that the cursor's closure reaches the arena without the dynamic exclusivity check that a
/// captured variable costs at every access (about a tenth of a scan, counted with callgrind); one
/// loop, on one thread, uses it.
final class LMDBRecordReader {
    let attributes: [Attribute]
    let layout: RecordLayout
    @exclusivity(unchecked) private var arena = CompactArena()
    private let check: LMDBFieldCheck

    init(_ entity: EntitySchema, _ check: LMDBFieldCheck) {
        attributes = entity.attributes
        layout = entity.layout
        self.check = check
    }

    /// The record, a compact record of the reader's arena holding the stored fields as they are
    /// once ``LMDBFieldCheck`` passed them, and what is damaged (`nil` when nothing is; the
    /// record is then empty).
    func decode(_ bytes: UnsafeRawBufferPointer) -> (Record, damage: String?) {
        if let decoded = check.record(bytes, layout: layout, arena: &arena) { return (decoded, nil) }
        // Damaged (named by the full decode), or too large for a compact record's offsets.
        return LMDBRecordCoding.decode(bytes, attributes: attributes, layout: layout, arena: &arena)
    }
}

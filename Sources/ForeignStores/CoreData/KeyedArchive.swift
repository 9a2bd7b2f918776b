internal import CZlib
@_spi(Backend) import DataStoreAPI
import Foundation

/// An `NSKeyedArchiver` archive read as its object graph, without the classes that wrote it
/// (Core Data's do not exist on Linux): `$objects` holds every object, and an object's fields
/// refer to others by `CF$UID` references. The binary property list is read by
/// ``BinaryPropertyListReader``.
struct KeyedArchive {
    typealias Fields = [String: PropertyListValue]
    let objects: [PropertyListValue]

    init(propertyList data: Data, what: String) throws {
        guard case .dictionary(let top) = try BinaryPropertyListReader.read(Array(data), what: what),
              case .array(let objects)? = top["$objects"], case .string("NSKeyedArchiver")? = top["$archiver"] else {
            throw StoreError(.corrupt, "\(what) is not an NSKeyedArchiver archive")
        }
        self.objects = objects
    }

    /// Inflates a raw DEFLATE stream (no zlib or gzip header), as Core Data writes `Z_MODELCACHE`.
    static func inflateRaw(_ bytes: [UInt8], what: String, limit: Int = 256 << 20) throws -> Data {
        var stream = z_stream()
        guard inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw StoreError(.io, "cannot start zlib to read \(what)")
        }
        defer { inflateEnd(&stream) }
        var output = Data()
        var input = bytes
        let chunk = 1 << 16
        var buffer = [UInt8](repeating: 0, count: chunk)
        let status: Int32 = input.withUnsafeMutableBufferPointer { inputBuffer in
            stream.next_in = inputBuffer.baseAddress
            stream.avail_in = UInt32(inputBuffer.count)
            var rc: Int32 = Z_OK
            repeat {
                rc = buffer.withUnsafeMutableBufferPointer { out in
                    stream.next_out = out.baseAddress
                    stream.avail_out = UInt32(chunk)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk - Int(stream.avail_out)
                output.append(contentsOf: buffer[0..<produced])
                if output.count > limit { return Z_MEM_ERROR }
                if rc == Z_OK && produced == 0 && stream.avail_in == 0 { return Z_DATA_ERROR }
            } while rc == Z_OK
            return rc
        }
        guard status == Z_STREAM_END else {
            throw StoreError(.corrupt, "\(what) is not a raw DEFLATE stream (zlib says \(status))")
        }
        return output
    }

    /// The object a reference leads to (nil for `$null`, a value that is no reference, or a
    /// reference out of range).
    func object(_ reference: PropertyListValue?) -> PropertyListValue? {
        let number: Int
        switch reference {
        case .uid(let uid)?: number = uid
        case .dictionary(let fields)?:
            guard case .int(let uid)? = fields["CF$UID"] else { return nil }
            number = Int(truncatingIfNeeded: uid)
        default: return nil
        }
        guard number > 0, number < objects.count else { return nil }
        return objects[number]
    }

    /// An archived object's fields, or nil when it is not an object with fields.
    func fields(_ reference: PropertyListValue?) -> Fields? {
        if case .dictionary(let fields)? = object(reference) { return fields }
        return nil
    }

    /// The class name of an object (`$class` → `$classname`).
    func className(_ fields: Fields) -> String? {
        if case .string(let name)? = self.fields(fields["$class"])?["$classname"] { return name }
        return nil
    }

    /// A string field: a plain string, or an `NSString`/`NSMutableString` object (`NS.string`).
    func string(_ fields: Fields, _ key: String) -> String? { text(object(fields[key])) }

    private func text(_ value: PropertyListValue?) -> String? {
        switch value {
        case .string(let string)?: return string == "$null" ? nil : string
        case .dictionary(let object)?:
            if case .string(let string)? = object["NS.string"] { return string }
            if case .data(let bytes)? = object["NS.bytes"] { return String(decoding: bytes, as: UTF8.self) }
            return nil
        default: return nil
        }
    }

    func int(_ fields: Fields, _ key: String) -> Int? {
        switch fields[key] {
        case .int(let number)?: return Int(truncatingIfNeeded: number)
        case .bool(let flag)?: return flag ? 1 : 0
        default: return nil
        }
    }

    func bool(_ fields: Fields, _ key: String) -> Bool { (int(fields, key) ?? 0) != 0 }

    /// A dictionary field (`NS.keys`/`NS.objects`), as key strings to references.
    func dictionary(_ fields: Fields, _ key: String) -> [(String, PropertyListValue)] {
        guard let object = self.fields(fields[key]), case .array(let keys)? = object["NS.keys"],
              case .array(let values)? = object["NS.objects"], keys.count == values.count else { return [] }
        return zip(keys, values).compactMap { key, value in text(self.object(key)).map { ($0, value) } }
    }

    /// An array or set field (`NS.objects`), as references.
    func array(_ fields: Fields, _ key: String) -> [PropertyListValue] {
        if case .array(let items)? = self.fields(fields[key])?["NS.objects"] { return items }
        return []
    }
}

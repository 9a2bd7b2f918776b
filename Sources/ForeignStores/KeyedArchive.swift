internal import CZlib
@_spi(Backend) import DataStoreAPI
import Foundation

/// An `NSKeyedArchiver` archive read as its object graph, without the classes that wrote it
/// (Core Data's do not exist on Linux): `$objects` holds every object, and an object's fields
/// refer to others by `CF$UID` references. Foundation's `PropertyListSerialization` reads the
/// binary property list; a reference is the one thing it hands over in a type of its own
/// (`_NSKeyedArchiverUID`), whose number is read through `Mirror`.
struct KeyedArchive {
    let objects: [Any]

    init(propertyList data: Data, what: String) throws {
        let root: Any
        do {
            root = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            throw StoreError(.corrupt, "\(what) is not a property list: \(error.localizedDescription)")
        }
        guard let top = root as? [String: Any], let objects = top["$objects"] as? [Any],
              (top["$archiver"] as? String) == "NSKeyedArchiver" else {
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

    /// The number of a `CF$UID` reference, or nil when `value` is not one.
    static func uid(_ value: Any?) -> Int? {
        guard let value else { return nil }
        if let dictionary = value as? [String: Any], let number = dictionary["CF$UID"] as? Int { return number }
        let typeName = String(describing: type(of: value))
        guard typeName.contains("UID") else { return nil }
        for child in Mirror(reflecting: value).children where child.label == "value" {
            if let number = child.value as? UInt32 { return Int(number) }
            if let number = child.value as? UInt64 { return Int(number) }
            if let number = child.value as? Int { return number }
        }
        return nil
    }

    /// The object a reference leads to (nil for `$null` or a reference out of range).
    func object(_ reference: Any?) -> Any? {
        guard let number = Self.uid(reference), number > 0, number < objects.count else { return nil }
        return objects[number]
    }

    /// An archived object's fields, or nil when it is not an object with fields.
    func fields(_ reference: Any?) -> [String: Any]? { object(reference) as? [String: Any] }

    /// The class name of an object (`$class` → `$classname`).
    func className(_ fields: [String: Any]) -> String? {
        (self.fields(fields["$class"])?["$classname"]) as? String
    }

    /// A string field: a plain string, or an `NSString`/`NSMutableString` object (`NS.string`).
    func string(_ fields: [String: Any], _ key: String) -> String? {
        let value = object(fields[key])
        if let string = value as? String { return string == "$null" ? nil : string }
        if let object = value as? [String: Any] {
            if let string = object["NS.string"] as? String { return string }
            if let bytes = object["NS.bytes"] as? Data { return String(decoding: bytes, as: UTF8.self) }
        }
        return nil
    }

    func int(_ fields: [String: Any], _ key: String) -> Int? {
        if let number = fields[key] as? Int { return number }
        if let number = fields[key] as? NSNumber { return number.intValue }
        return nil
    }

    func bool(_ fields: [String: Any], _ key: String) -> Bool {
        if let flag = fields[key] as? Bool { return flag }
        return (int(fields, key) ?? 0) != 0
    }

    /// A dictionary field (`NS.keys`/`NS.objects`), as key strings to references.
    func dictionary(_ fields: [String: Any], _ key: String) -> [(String, Any)] {
        guard let object = self.fields(fields[key]), let keys = object["NS.keys"] as? [Any],
              let values = object["NS.objects"] as? [Any], keys.count == values.count else { return [] }
        return zip(keys, values).compactMap { key, value in
            let name = self.object(key)
            if let name = name as? String { return (name, value) }
            if let name = name as? [String: Any], let string = name["NS.string"] as? String { return (string, value) }
            return nil
        }
    }

    /// An array or set field (`NS.objects`), as references.
    func array(_ fields: [String: Any], _ key: String) -> [Any] {
        (self.fields(fields[key])?["NS.objects"] as? [Any]) ?? []
    }
}

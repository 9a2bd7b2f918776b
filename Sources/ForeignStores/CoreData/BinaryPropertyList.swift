@_spi(Backend) import DataStoreAPI
import Foundation

/// A value of a binary property list.
indirect enum PropertyListValue: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case real(Double)
    case date(Double)
    case data([UInt8])
    case string(String)
    /// An NSKeyedArchiver reference (`CF$UID`): an index into `$objects`.
    case uid(Int)
    case array([PropertyListValue])
    case dictionary([String: PropertyListValue])
}

/// A reader of `bplist00`, Apple's binary property list format (documented in CoreFoundation's
/// `CFBinaryPList.c`): the trailer gives the offset table; each object starts with a marker
/// byte (type in the high nibble, a count or size in the low one). Every offset, count and
/// reference is checked against the data, and nesting is limited, so a damaged or hostile list
/// is refused with `corrupt`, never read out of bounds or followed round a cycle.
///
/// Foundation's `PropertyListSerialization` reads the format too, but on Linux it crashed
/// (SIGSEGV while bridging a damaged set) on archives the damage tests made; a model cache is
/// input from a user's file, so it is read here instead.
struct BinaryPropertyListReader {
    private let bytes: [UInt8]
    private let what: String
    private var offsets: [Int] = []
    private var referenceSize = 1
    /// How many more objects may be decoded: a shared object is decoded once per reference, so
    /// a hostile list of arrays referring to each other could otherwise take forever.
    private var budget = 0
    private static let maximumDepth = 64

    /// Reads the list in `bytes`; `what` names it in errors.
    static func read(_ bytes: [UInt8], what: String) throws(StoreError) -> PropertyListValue {
        var reader = BinaryPropertyListReader(bytes: bytes, what: what)
        return try reader.readAll()
    }

    private init(bytes: [UInt8], what: String) {
        self.bytes = bytes
        self.what = what
    }

    private func damaged(_ detail: String) -> StoreError {
        StoreError(.corrupt, "\(what) is not a readable binary property list: \(detail)")
    }

    private func unsigned(at offset: Int, size: Int) throws(StoreError) -> Int {
        guard size >= 1, size <= 8, offset >= 0, offset <= bytes.count - size else {
            throw damaged("a \(size)-byte number at offset \(offset) lies outside its \(bytes.count) bytes")
        }
        var value: UInt64 = 0
        for byte in bytes[offset..<offset + size] { value = value << 8 | UInt64(byte) }
        guard value <= UInt64(Int.max) else { throw damaged("a number at offset \(offset) is too large") }
        return Int(value)
    }

    private mutating func readAll() throws(StoreError) -> PropertyListValue {
        guard bytes.count >= 40, bytes[0..<8].elementsEqual("bplist00".utf8) else {
            throw damaged("it does not start with bplist00")
        }
        let trailer = bytes.count - 32
        let offsetSize = Int(bytes[trailer + 6])
        referenceSize = Int(bytes[trailer + 7])
        let count = try unsigned(at: trailer + 8, size: 8)
        let top = try unsigned(at: trailer + 16, size: 8)
        let table = try unsigned(at: trailer + 24, size: 8)
        guard (1...8).contains(offsetSize), (1...8).contains(referenceSize), count > 0, top < count,
              count <= (trailer - table) / offsetSize, table >= 8, table <= trailer else {
            throw damaged("its trailer is inconsistent")
        }
        offsets = []
        offsets.reserveCapacity(count)
        for index in 0..<count {
            let offset = try unsigned(at: table + index * offsetSize, size: offsetSize)
            guard offset >= 8, offset < table else { throw damaged("object \(index) lies outside the object area") }
            offsets.append(offset)
        }
        budget = 16 * count + 1_000
        return try object(top, depth: 0)
    }

    /// The count in a marker's low nibble, or in the int object after it (`0xF`); returns the
    /// count and where the contents start.
    private func count(_ info: UInt8, at offset: Int) throws(StoreError) -> (Int, Int) {
        guard info == 0x0F else { return (Int(info), offset + 1) }
        guard offset + 1 < bytes.count, bytes[offset + 1] >> 4 == 0x1 else {
            throw damaged("a count at offset \(offset) is not an integer")
        }
        let size = 1 << Int(bytes[offset + 1] & 0x0F)
        guard size <= 8 else { throw damaged("a count at offset \(offset) is \(size) bytes long") }
        return (try unsigned(at: offset + 2, size: size), offset + 2 + size)
    }

    private func references(_ count: Int, at start: Int) throws(StoreError) -> [Int] {
        guard count <= (bytes.count - start) / referenceSize else {
            throw damaged("\(count) references at offset \(start) run past the end")
        }
        var result: [Int] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            let reference = try unsigned(at: start + index * referenceSize, size: referenceSize)
            guard reference < offsets.count else { throw damaged("a reference to object \(reference) of \(offsets.count)") }
            result.append(reference)
        }
        return result
    }

    private mutating func object(_ index: Int, depth: Int) throws(StoreError) -> PropertyListValue {
        guard depth < Self.maximumDepth else { throw damaged("objects nest more than \(Self.maximumDepth) deep") }
        budget -= 1
        guard budget >= 0 else { throw damaged("its objects refer to each other more often than a list can") }
        let offset = offsets[index]
        let marker = bytes[offset]
        let info = marker & 0x0F
        switch marker >> 4 {
        case 0x0:
            switch info {
            case 0x8: return .bool(false)
            case 0x9: return .bool(true)
            default: return .null
            }
        case 0x1:
            let size = 1 << Int(info)
            guard size <= 16, offset + 1 + size <= bytes.count else { throw damaged("an integer at offset \(offset)") }
            // 16-byte integers hold 64-bit values in their low half.
            let low = bytes[(offset + 1 + max(0, size - 8))..<(offset + 1 + size)]
            var value: UInt64 = 0
            for byte in low { value = value << 8 | UInt64(byte) }
            return .int(size >= 8 ? Int64(bitPattern: value) : Int64(value))
        case 0x2, 0x3:
            let size = marker == 0x33 ? 8 : 1 << Int(info)
            guard size == 4 || size == 8, offset + 1 + size <= bytes.count else {
                throw damaged("a real at offset \(offset)")
            }
            let raw = UInt64(try unsigned(at: offset + 1, size: size == 8 ? 4 : size)) << (size == 8 ? 32 : 0)
                | (size == 8 ? UInt64(try unsigned(at: offset + 5, size: 4)) : 0)
            let value = size == 8 ? Double(bitPattern: raw) : Double(Float(bitPattern: UInt32(truncatingIfNeeded: raw)))
            return marker == 0x33 ? .date(value) : .real(value)
        case 0x4:
            let (length, start) = try count(info, at: offset)
            guard length <= bytes.count - start else { throw damaged("data at offset \(offset) runs past the end") }
            return .data(Array(bytes[start..<start + length]))
        case 0x5:
            let (length, start) = try count(info, at: offset)
            guard length <= bytes.count - start else { throw damaged("a string at offset \(offset) runs past the end") }
            return .string(String(decoding: bytes[start..<start + length], as: UTF8.self))
        case 0x6:
            let (length, start) = try count(info, at: offset)
            guard length <= (bytes.count - start) / 2 else {
                throw damaged("a string at offset \(offset) runs past the end")
            }
            var units: [UInt16] = []
            units.reserveCapacity(length)
            for i in 0..<length { units.append(UInt16(bytes[start + 2 * i]) << 8 | UInt16(bytes[start + 2 * i + 1])) }
            return .string(String(decoding: units, as: UTF16.self))
        case 0x8:
            return .uid(try unsigned(at: offset + 1, size: Int(info) + 1))
        case 0xA, 0xB, 0xC:
            let (length, start) = try count(info, at: offset)
            var items: [PropertyListValue] = []
            for reference in try references(length, at: start) { items.append(try object(reference, depth: depth + 1)) }
            return .array(items)
        case 0xD:
            let (length, start) = try count(info, at: offset)
            let keys = try references(length, at: start)
            let values = try references(length, at: start + length * referenceSize)
            var dictionary: [String: PropertyListValue] = [:]
            for (key, value) in zip(keys, values) {
                guard case .string(let name) = try object(key, depth: depth + 1) else {
                    throw damaged("a dictionary at offset \(offset) has a key that is not a string")
                }
                dictionary[name] = try object(value, depth: depth + 1)
            }
            return .dictionary(dictionary)
        default:
            throw damaged("object \(index) has the unknown marker \(String(marker, radix: 16))")
        }
    }
}

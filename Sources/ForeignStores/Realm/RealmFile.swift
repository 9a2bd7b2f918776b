@_spi(Backend) import DataStoreAPI
import Foundation

/// The bytes of a `.realm` file and the nodes they hold, read as realm-core lays them out (file
/// formats 10, 11 and 20 to 24; see docs/coming-from-core-data.md). A Realm file has no
/// checksums, so every reference, count and width is checked against the file before it is
/// followed: a damaged file is refused with `corrupt` naming what is wrong, never a crash.
///
/// - The header is 24 bytes: two top references, `T-DB`, two format bytes and a flag whose low
///   bit selects the slot in use (the other holds the previous commit). A file in the streaming
///   form (written by `writeCopy`) has `0xFFFF…` in the first slot and its top reference in a
///   16-byte footer that ends with a magic number.
/// - Every node starts with an 8-byte header: 4 bytes the reader ignores, a flag byte (inner
///   B+tree node, holds references, context flag, width type, width) and a 24-bit big-endian
///   element count. The width counts bits (width type 0: integers of widths 1, 2 and 4 bits
///   unsigned, 8 to 64 bits signed, little-endian) or bytes (width type 1: fixed-size cells). In a node that holds references, an odd element is an integer `n` stored as
///   `2n + 1`.
struct RealmFile {
    let bytes: [UInt8]
    /// The file, for messages.
    let path: String
    /// The file format of the selected slot.
    let format: Int
    /// The top array, or 0 for a Realm that holds nothing.
    let topRef: Int
    /// Whether the file is in the streaming form (its top reference in the footer).
    let isStreaming: Bool

    /// The formats this reader reads: those of the cluster layout realm-core has written since
    /// 2020 (and its last betas before).
    static let readableFormats: Set<Int> = [10, 11, 20, 21, 22, 23, 24]
    static let streamingCookie: UInt64 = 0x3034_1252_37E5_26C8
    /// The most elements a node of zero width is read with (see ``node(_:_:)``).
    static let maxElementsWithoutBytes = 4_096

    init(bytes: [UInt8], path: String) throws {
        self.bytes = bytes
        self.path = path
        guard bytes.count >= 24 else {
            throw StoreError(.notAStore, "\(path) is not a Realm file: it has \(bytes.count) bytes, fewer than a "
                + "Realm file's 24-byte header")
        }
        guard Self.hasHeader(bytes) else {
            if bytes.count >= 8192, bytes.count % 4096 == 0 {
                throw StoreError(.notAStore, "\(path) has no Realm header: it is encrypted (a Realm file written "
                    + "with an encryption key has none in the clear), or not a Realm file")
            }
            throw StoreError(.notAStore, "\(path) is not a Realm file: its header does not say T-DB")
        }
        guard bytes.count % 8 == 0 else {
            throw StoreError(.corrupt, "\(path) is damaged: a Realm file's size is a multiple of 8, not "
                + "\(bytes.count) bytes (cut short?)")
        }
        let slot = Int(bytes[23] & 1)
        var top = Self.uint64(bytes, at: slot * 8)
        var format = Int(bytes[20 + slot])
        var streaming = false
        if slot == 0, top == UInt64.max {
            guard bytes.count >= 40, Self.uint64(bytes, at: bytes.count - 8) == Self.streamingCookie else {
                throw StoreError(.corrupt, "\(path) is damaged: it is in Realm's streaming form (as writeCopy "
                    + "writes it) but its footer is missing (cut short?)")
            }
            top = Self.uint64(bytes, at: bytes.count - 16)
            streaming = true
            format = Int(bytes[20])
        }
        guard top % 8 == 0, top < UInt64(bytes.count) else {
            throw StoreError(.corrupt, "\(path) is damaged: its top reference \(top) is "
                + (top % 8 == 0 ? "past the end of the file (\(bytes.count) bytes)" : "not 8-aligned"))
        }
        if top != 0, !Self.readableFormats.contains(format) {
            if format < 10 {
                throw StoreError(.incompatibleFormat, "\(path) is a Realm file of format \(format), written before "
                    + "2020; this reader reads formats 10, 11 and 20 to 24: open it once with a Realm SDK of 2020 "
                    + "or later (Realm Swift 10, Realm Java 10, Realm JS 10 or later), which upgrades it, and copy "
                    + "that file")
            }
            throw StoreError(.incompatibleFormat, "\(path) is a Realm file of format \(format); this reader reads "
                + "formats 10, 11 and 20 to 24")
        }
        self.format = format
        self.topRef = Int(top)
        self.isStreaming = streaming
    }

    /// Whether `bytes` begin with a Realm header in the clear (`T-DB` at bytes 16 to 19).
    static func hasHeader(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count >= 24 && bytes.dropFirst(16).prefix(4).elementsEqual("T-DB".utf8)
    }

    static func uint64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in (0..<8).reversed() { value = value << 8 | UInt64(bytes[offset + i]) }
        return value
    }

    func damaged(_ what: String) -> StoreError {
        StoreError(.corrupt, "\(path) is damaged: \(what)")
    }
}

/// One node of a Realm file: its header, read and checked.
struct RealmNode {
    let ref: Int
    let isInner: Bool
    let hasRefs: Bool
    let context: Bool
    /// 0: `count` elements of `width` bits; 1: of `width` bytes; 2: `count` bytes.
    let widthType: Int
    let width: Int
    let count: Int
    /// Where the elements start.
    let payload: Int
    let payloadBytes: Int
}

extension RealmFile {
    /// The node at `ref`, its elements inside the file.
    func node(_ ref: Int, _ what: @autoclosure () -> String) throws -> RealmNode {
        guard ref > 0, ref % 8 == 0, ref <= bytes.count - 8 else {
            throw damaged("\(what()) refers to offset \(ref), " + (ref % 8 != 0 ? "which is not 8-aligned"
                : "outside the file (\(bytes.count) bytes)"))
        }
        let flags = bytes[ref + 4]
        let count = Int(bytes[ref + 5]) << 16 | Int(bytes[ref + 6]) << 8 | Int(bytes[ref + 7])
        let width = (1 << Int(flags & 7)) >> 1
        let widthType = Int(flags >> 3) & 3
        let payloadBytes: Int
        switch widthType {
        case 0: payloadBytes = (count * width + 7) / 8
        case 1: payloadBytes = count * width  // the width counts bytes
        case 2: payloadBytes = count
        default: throw damaged("\(what()) at offset \(ref) has an unknown width type")
        }
        // A node of bytes (width type 2) is read as integers too by a caller that expects
        // integers there: whatever it is read as, the elements are inside the file.
        guard payloadBytes <= bytes.count - ref - 8, (count * width + 7) / 8 <= bytes.count - ref - 8 else {
            throw damaged("\(what()) at offset \(ref) has \(count) elements, which run past the end of the file")
        }
        // The decode budget: elements of no bytes cost nothing in the file but a step each to
        // read. realm-core's nodes hold at most 1,000 elements (a B+tree leaf; a cluster leaf
        // 256), so a count of thousands with no bytes behind it is a damaged header.
        guard width > 0 || widthType == 2 || count <= Self.maxElementsWithoutBytes else {
            throw damaged("\(what()) at offset \(ref) says it holds \(count) elements of no bytes")
        }
        return RealmNode(ref: ref, isInner: flags & 0x80 != 0, hasRefs: flags & 0x40 != 0, context: flags & 0x20 != 0,
                         widthType: widthType, width: width, count: count, payload: ref + 8,
                         payloadBytes: payloadBytes)
    }

    /// Element `i` of an integer node: widths under 8 bits unsigned, the others signed.
    func int(_ node: RealmNode, _ i: Int) -> Int64 {
        let width = node.width
        switch width {
        case 0: return 0
        case 1, 2, 4:
            let bit = i * width
            let byte = bytes[node.payload + bit / 8]
            return Int64((byte >> UInt8(bit % 8)) & UInt8((1 << width) - 1))
        case 8: return Int64(Int8(bitPattern: bytes[node.payload + i]))
        default:
            let size = width / 8
            var value: UInt64 = 0
            let start = node.payload + i * size
            for k in (0..<size).reversed() { value = value << 8 | UInt64(bytes[start + k]) }
            switch size {
            case 2: return Int64(Int16(truncatingIfNeeded: value))
            case 4: return Int64(Int32(truncatingIfNeeded: value))
            default: return Int64(bitPattern: value)
            }
        }
    }

    /// Element `i` of an unsigned node (cluster keys, B+tree offsets): every width unsigned.
    func unsigned(_ node: RealmNode, _ i: Int) -> UInt64 {
        let width = node.width
        guard width >= 8 else { return UInt64(int(node, i)) }
        let size = width / 8
        var value: UInt64 = 0
        let start = node.payload + i * size
        for k in (0..<size).reversed() { value = value << 8 | UInt64(bytes[start + k]) }
        return value
    }

    /// Every element of the integer node at `ref`.
    func ints(_ ref: Int, _ what: @autoclosure () -> String) throws -> [Int64] {
        let node = try node(ref, what())
        guard node.widthType == 0 else { throw damaged("\(what()) at offset \(ref) is not an integer array") }
        // Realm's arrays hold at most a few thousand elements (a B+tree leaf 1,000); a count in the
        // millions with no bytes behind it (width 0) is a damaged header, not zeros to allocate.
        guard node.count <= 1 << 20 else {
            throw damaged("\(what()) at offset \(ref) says it holds \(node.count) elements")
        }
        return (0..<node.count).map { int(node, $0) }
    }

    /// Element `i` of a node that holds references: a reference (0 for none) or, when odd, the
    /// integer it tags.
    enum RefOrInt: Equatable {
        case ref(Int)
        case int(Int64)
    }

    func refOrInt(_ node: RealmNode, _ i: Int) -> RefOrInt {
        let raw = int(node, i)
        return raw & 1 == 1 ? .int(raw >> 1) : .ref(Int(raw))
    }

    /// Element `i` of a node that holds references, as a reference (0 for none).
    func ref(_ node: RealmNode, _ i: Int, _ what: @autoclosure () -> String) throws -> Int {
        guard i < node.count else {
            throw damaged("\(what()) is missing: its array at offset \(node.ref) has \(node.count) elements")
        }
        switch refOrInt(node, i) {
        case .ref(let ref):
            guard ref >= 0 else { throw damaged("\(what()) is the negative reference \(ref)") }
            return ref
        case .int(let value): throw damaged("\(what()) is the number \(value) where a reference belongs")
        }
    }

    /// Element `i` of a node that holds references, as the integer it tags.
    func tagged(_ node: RealmNode, _ i: Int, _ what: @autoclosure () -> String) throws -> Int64 {
        guard i < node.count, case .int(let value) = refOrInt(node, i) else {
            throw damaged("\(what()) is not a number in the array at offset \(node.ref)")
        }
        return value
    }

    // MARK: Strings and bytes

    /// The values of a string or binary leaf (nil for null): the short form (cells of `width`
    /// bytes, the last byte the padding, `width` for null), the medium form (offsets, one blob,
    /// null flags) or the big form (a blob per value). Strings in the medium and big forms end in
    /// a zero byte that is not theirs.
    func byteStrings(_ ref: Int, isString: Bool, _ what: @autoclosure () -> String) throws -> [[UInt8]?] {
        let leaf = try node(ref, what())
        if !leaf.hasRefs {
            guard leaf.widthType == 1 else {
                throw damaged("\(what()) at offset \(ref) is a string column of enumerated values, which this "
                    + "reader does not read")
            }
            let width = leaf.width
            return (0..<leaf.count).map { i -> [UInt8]? in
                guard width > 0 else { return nil }
                let start = leaf.payload + i * width
                let padding = Int(bytes[start + width - 1])
                guard padding < width else { return nil }
                return Array(bytes[start..<(start + width - 1 - padding)])
            }
        }
        let trailing = isString ? 1 : 0
        if !leaf.context {
            // Medium: offsets, blob, null flags.
            let offsets = try ints(try self.ref(leaf, 0, "the offsets of \(what())"), "the offsets of \(what())")
            let blob = try node(try self.ref(leaf, 1, "the bytes of \(what())"), "the bytes of \(what())")
            guard blob.widthType == 2 else { throw damaged("the bytes of \(what()) at offset \(blob.ref) are not a blob") }
            let nulls = leaf.count > 2 ? try ints(try self.ref(leaf, 2, "the nulls of \(what())"), "the nulls of \(what())")
                : []
            var values: [[UInt8]?] = []
            var start = 0
            for (i, end) in offsets.enumerated() {
                guard end >= start, Int(end) <= blob.count else {
                    throw damaged("\(what()) at offset \(ref) has a value at bytes \(start)..<\(end) of a "
                        + "\(blob.count)-byte blob")
                }
                if i < nulls.count, nulls[i] != 0 {
                    values.append(nil)
                } else {
                    let length = max(0, Int(end) - start - trailing)
                    values.append(Array(bytes[(blob.payload + start)..<(blob.payload + start + length)]))
                }
                start = Int(end)
            }
            return values
        }
        // Big: a blob per value.
        return try (0..<leaf.count).map { i -> [UInt8]? in
            let blobRef = try self.ref(leaf, i, "value \(i) of \(what())")
            guard blobRef != 0 else { return nil }
            let value = try blob(blobRef, what(), depth: 0)
            return Array(value.dropLast(min(trailing, value.count)))
        }
    }

    /// The bytes of a blob node; one with the context flag is split, its parts blobs.
    func blob(_ ref: Int, _ what: @autoclosure () -> String, depth: Int) throws -> [UInt8] {
        guard depth < 4 else { throw damaged("\(what()) nests its blobs deeper than a Realm file does") }
        let node = try node(ref, what())
        if node.context {
            var joined: [UInt8] = []
            for i in 0..<node.count {
                joined += try blob(try self.ref(node, i, "part \(i) of \(what())"), what(), depth: depth + 1)
            }
            return joined
        }
        guard node.widthType == 2 else { throw damaged("\(what()) at offset \(ref) is not a blob") }
        return Array(bytes[node.payload..<(node.payload + node.count)])
    }

    /// The values of a leaf of fixed-size values (ObjectId: 12, UUID: 16 bytes): blocks of one
    /// byte of null flags and 8 values.
    func fixedBytes(_ ref: Int, size: Int, _ what: @autoclosure () -> String) throws -> [[UInt8]?] {
        let leaf = try node(ref, what())
        let block = 1 + 8 * size
        let total = leaf.count
        let count = (total - (total + block - 1) / block) / size
        guard leaf.payloadBytes >= total else { throw damaged("\(what()) at offset \(ref) is cut short") }
        return (0..<count).map { i -> [UInt8]? in
            let flags = bytes[leaf.payload + (i / 8) * block]
            if flags & (1 << UInt8(i % 8)) != 0 { return nil }
            let start = leaf.payload + (i / 8) * block + 1 + (i % 8) * size
            return Array(bytes[start..<(start + size)])
        }
    }

    // MARK: B+trees

    /// The leaves of a list's B+tree, in order: a leaf, or an inner node (first element the
    /// children's sizes or offsets, last the total count, children between).
    func bplusLeaves(_ ref: Int, _ what: @autoclosure () -> String, depth: Int = 0) throws -> [Int] {
        guard depth < 16 else { throw damaged("\(what()) nests its B+tree deeper than a Realm file does") }
        let root = try node(ref, what())
        guard root.isInner else { return [ref] }
        guard root.count >= 2 else { throw damaged("\(what()): an inner B+tree node at offset \(ref) is empty") }
        var leaves: [Int] = []
        for i in 1..<(root.count - 1) {
            leaves += try bplusLeaves(try self.ref(root, i, "child \(i) of \(what())"), what(), depth: depth + 1)
        }
        return leaves
    }
}

/// Encoded keys one after another in one buffer, key `i` ending at `ends[i]`: what the change
/// recorder holds for every key a transaction touches (up to `maxKeysPerTransaction`, 100,000 by
/// default). A ``PrimaryKey`` per key (its value, and an array of its bytes kept alive until the
/// commit) would cost a retain, and a release and a free at the commit, per key, and a second
/// copy of the keys for the entry. Here a key is its bytes and one offset, and a bulk load's
/// table goes into the entry as it is.
struct TouchedKeys {
    private(set) var bytes: [UInt8] = []
    private(set) var ends: [Int] = []

    /// Where key `i`'s bytes are in ``bytes``.
    func range(_ i: Int) -> Range<Int> { (i == 0 ? 0 : ends[i - 1])..<ends[i] }

    mutating func append(_ key: UnsafeRawBufferPointer) {
        // As typed bytes, which an array copies in one go.
        key.withMemoryRebound(to: UInt8.self) { bytes.append(contentsOf: $0) }
        ends.append(bytes.count)
    }

    /// Appends key `i` of `other`.
    mutating func append(_ i: Int, of other: TouchedKeys) {
        bytes.append(contentsOf: other.bytes[other.range(i)])
        ends.append(bytes.count)
    }

    mutating func removeAll() {
        bytes = []
        ends = []
    }

    /// Key `i`'s bytes against `key`, three ways, in the canonical key order (bytes, a prefix first).
    func compare(_ i: Int, _ key: UnsafeRawBufferPointer) -> Int {
        let range = range(i)
        return bytes.withUnsafeBytes { all in
            // Two ints' keys (8 big-endian bytes each) as the numbers they are: memcmp's order.
            if range.count == 8, key.count == 8 {
                let a = UInt64(bigEndian: all.loadUnaligned(fromByteOffset: range.lowerBound, as: UInt64.self))
                let b = UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
                return a < b ? -1 : (a == b ? 0 : 1)
            }
            return Value.compareBytes(Self.slice(all, range), key)
        }
    }

    /// `range` of `all`, without the bounds checks of a slice (`range` comes from `ends`).
    private static func slice(_ all: UnsafeRawBufferPointer, _ range: Range<Int>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: all.baseAddress.map { $0 + range.lowerBound }, count: range.count)
    }

    /// Key `i` against key `j`, three ways.
    func compare(_ i: Int, _ j: Int) -> Int {
        let (a, b) = (range(i), range(j))
        return bytes.withUnsafeBytes { Value.compareBytes(Self.slice($0, a), Self.slice($0, b)) }
    }

    /// Key `i`'s bytes, as an array.
    func key(_ i: Int) -> [UInt8] { Array(bytes[range(i)]) }
}

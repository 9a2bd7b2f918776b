/// The encoded keys a transaction touched, in the order they came: what the change recorder
/// holds for every key a transaction touches (up to `maxKeysPerTransaction`, 100,000 by
/// default). A ``PrimaryKey`` per key (its value, and an array of its bytes kept alive until the
/// commit) would cost a retain, and a release and a free at the commit, per key, and a second
/// copy of the keys for the entry. Here a key is its bytes and one offset, and a bulk load's
/// table goes into the entry as it is.
///
/// An int entity's keys (8 bytes each, ``KeyEncoding``) are kept as the numbers those bytes are
/// when read big-endian (``words``): appending one is one store, comparing two compares two
/// numbers (the order of their bytes), and the entry writes them as differences
/// (``ChangeLog/encodeEntry(_:committedAt:)``). Any other key goes into one buffer, key `i`
/// ending at `ends[i]`. A key that is not 8 bytes arriving at a table of words (which an int
/// entity's keys never are) moves every key to the buffer first.
struct TouchedKeys {
    /// Whether the keys are in ``words``; otherwise in ``bytes`` and ``ends``.
    private(set) var isWords: Bool
    private(set) var words: [UInt64] = []
    private(set) var bytes: [UInt8] = []
    private(set) var ends: [Int] = []

    /// An empty table; its keys kept as words when `intKeys` (an int entity's).
    init(intKeys: Bool = false) { isWords = intKeys }

    var count: Int { isWords ? words.count : ends.count }

    /// Hands key `i`'s bytes to `body`.
    func withKey<T>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        if isWords { return try withUnsafeBytes(of: words[i].bigEndian, body) }
        let range = range(i)
        return try bytes.withUnsafeBytes { try body(Self.slice($0, range)) }
    }

    /// Where key `i`'s bytes are in ``bytes`` (not kept as words).
    private func range(_ i: Int) -> Range<Int> { (i == 0 ? 0 : ends[i - 1])..<ends[i] }

    mutating func append(_ key: UnsafeRawBufferPointer) {
        if isWords {
            if key.count == 8 {
                words.append(UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)))
                return
            }
            moveToBytes()
        }
        // As typed bytes, which an array copies in one go.
        key.withMemoryRebound(to: UInt8.self) { bytes.append(contentsOf: $0) }
        ends.append(bytes.count)
    }

    /// Appends an int entity's key, as its word (``words``), when it is greater than the last
    /// (a bulk load's next key); otherwise changes nothing and returns false.
    @inline(__always)
    mutating func appendWordIfLast(_ word: UInt64) -> Bool {
        guard isWords, words.last.map({ $0 < word }) ?? true else { return false }
        words.append(word)
        return true
    }

    /// Appends key `i` of `other`.
    mutating func append(_ i: Int, of other: TouchedKeys) {
        if isWords, other.isWords {
            words.append(other.words[i])
            return
        }
        other.withKey(i) { append($0) }
    }

    /// Every key from ``words`` into ``bytes``.
    private mutating func moveToBytes() {
        let kept = words
        (isWords, words) = (false, [])
        for word in kept { withUnsafeBytes(of: word.bigEndian) { append($0) } }
    }

    mutating func removeAll() {
        words = []
        bytes = []
        ends = []
    }

    /// Key `i`'s bytes against `key`, three ways, in the canonical key order (bytes, a prefix first).
    func compare(_ i: Int, _ key: UnsafeRawBufferPointer) -> Int {
        if isWords, key.count == 8 {
            // Two ints' keys (8 big-endian bytes each) as the numbers they are: memcmp's order.
            let (a, b) = (words[i], UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)))
            return a < b ? -1 : (a == b ? 0 : 1)
        }
        return withKey(i) { Value.compareBytes($0, key) }
    }

    /// `range` of `all`, without the bounds checks of a slice (`range` comes from `ends`).
    private static func slice(_ all: UnsafeRawBufferPointer, _ range: Range<Int>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: all.baseAddress.map { $0 + range.lowerBound }, count: range.count)
    }

    /// Key `i` against key `j`, three ways.
    func compare(_ i: Int, _ j: Int) -> Int {
        if isWords {
            let (a, b) = (words[i], words[j])
            return a < b ? -1 : (a == b ? 0 : 1)
        }
        let (a, b) = (range(i), range(j))
        return bytes.withUnsafeBytes { Value.compareBytes(Self.slice($0, a), Self.slice($0, b)) }
    }

    /// Key `i`'s bytes, as an array.
    func key(_ i: Int) -> [UInt8] { withKey(i) { Array($0) } }
}

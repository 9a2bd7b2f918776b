/// The attribute names of an entity in schema order, shared by every record a store returns
/// for that entity, so that such a record is an array of values rather than a dictionary.
@_spi(Backend) public final class RecordLayout: Sendable, Hashable {
    /// The attribute names, in schema order.
    public let names: [String]
    let slots: [String: Int]
    /// Each name's two words as Swift holds it: equal words are the same string (a short name is
    /// held in the words themselves; a literal's words point at its text in the binary).
    private let words: [NameWords]

    /// A layout of `names`, in order.
    public init(_ names: [String]) {
        self.names = names
        slots = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        words = names.map { unsafeBitCast($0, to: NameWords.self) }
    }

    /// The position of an attribute, if the layout has it: first by the name's two words (the
    /// same words are the same string, as when a name written in the code is asked for again and
    /// again), then a short layout compares names, a longer one hashes. Names are equal when
    /// their bytes are: Swift's `==` and hashing treat canonically equivalent strings as one
    /// (`K` and KELVIN SIGN `\u{212A}`), so a match by either is checked by byte counts too
    /// (``Schema/isName(_:_:)``: exact for a schema's names, which are ASCII).
    public func slot(of name: String) -> Int? {
        let asked = unsafeBitCast(name, to: NameWords.self)
        for index in words.indices where sameWords(words[index], asked) { return index }
        if names.count > 8 {
            guard let index = slots[name], Schema.isName(names[index], name) else { return nil }
            return index
        }
        return names.firstIndex { Schema.isName($0, name) }
    }

    public static func == (lhs: RecordLayout, rhs: RecordLayout) -> Bool {
        // Equal words are equal names (see `words`): two stores' layouts of one entity, compared
        // per record pair by a verify, are told equal without comparing strings.
        lhs === rhs || lhs.words.count == rhs.words.count && zip(lhs.words, rhs.words).allSatisfy(sameWords)
            || lhs.names == rhs.names
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(names)
    }
}

/// A string's two words as Swift holds it.
@usableFromInline typealias NameWords = (UInt64, UInt64)

/// Whether two strings' words are the same, compared word by word: a tuple's `==` is generic,
/// and unspecialized (a debug build) it looks up the tuple's type metadata on every call.
@inlinable @inline(__always) func sameWords(_ lhs: NameWords, _ rhs: NameWords) -> Bool {
    lhs.0 == rhs.0 && lhs.1 == rhs.1
}

@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import Testing

/// `NameIndex`, which finds a schema's entities and a backend's statements and databases by
/// name: random adds, changes and removals, across the size where it starts hashing (8), against
/// a list of pairs searched byte for byte. The names include look-alikes (`K` and the Kelvin sign,
/// `é` composed and not), which Swift's `==` and a `Dictionary` take for one name.
@Suite struct NameIndexTests {
    static let names = ["Item", "Note", "K", "\u{212A}", "é", "e\u{301}", "a", "b", "c", "d", "e", "f", "g", "h",
                        "Tag", "User", ""]

    /// The reference: pairs in the order added, a name found by its UTF-8 bytes.
    struct Model {
        var pairs: [(String, Int)] = []
        func position(_ name: String) -> Int? { pairs.firstIndex { Array($0.0.utf8) == Array(name.utf8) } }
        subscript(name: String) -> Int? { position(name).map { pairs[$0].1 } }
        mutating func set(_ value: Int?, _ name: String) {
            switch (position(name), value) {
            case (let p?, let v?): pairs[p].1 = v
            case (nil, let v?): pairs.append((name, v))
            case (let p?, nil): pairs.remove(at: p)
            case (nil, nil): break
            }
        }
    }

    @Test(arguments: 0..<20) func randomChangesAgreeWithPairsComparedByTheirBytes(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed))
        var index = NameIndex<Int>()
        var model = Model()
        for step in 0..<400 {
            let name = Self.names[Int(rng.next() % UInt64(Self.names.count))]
            switch rng.next() % 4 {
            case 0, 1:
                index[name] = step
                model.set(step, name)
            case 2:
                #expect(index.removeValue(forKey: name) == model[name], "seed \(seed), step \(step)")
                model.set(nil, name)
            default:
                index[name, default: -1] += 1
                model.set((model[name] ?? -1) + 1, name)
            }
            #expect(index.count == model.pairs.count)
            for asked in Self.names {
                #expect(index[asked] == model[asked], "seed \(seed), step \(step), \(Array(asked.utf8))")
            }
        }
        #expect(index.map(\.name) == model.pairs.map(\.0))
        #expect(index.map(\.value) == model.pairs.map(\.1))
    }

    @Test func theFirstOfTwoPairsWithOneNameIsKeptWhateverTheSize() {
        for count in [1, 8, 9, 20] {
            let pairs = (0..<count).map { ("n\($0)", $0) } + [("n0", -1)]
            let index = NameIndex(pairs)
            #expect(index.count == count)
            #expect(index["n0"] == 0)
            #expect(index["n\(count - 1)"] == count - 1)
            #expect(index["n\(count)"] == nil)
            #expect(index.map(\.name) == (0..<count).map { "n\($0)" })
        }
    }

    @Test func aLiteralPastTheHashingSizeFindsEachOfItsNames() {
        let index: NameIndex<Int> = ["a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 5, "g": 6, "h": 7, "i": 8, "j": 9]
        #expect(index.count == 10)
        for (position, name) in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"].enumerated() {
            #expect(index[name] == position)
        }
        #expect(index["k"] == nil)
        let empty: NameIndex<Int> = [:]
        #expect(empty.isEmpty && empty["a"] == nil)
    }
}

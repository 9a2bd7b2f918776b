import DataStoreAPI
import Foundation

/// Ordered to-many relationships: their order through inserts, moves and removes at an index
/// (against a model of arrays), renumbering, deletes, child-store merges, the change feed,
/// reopening and schema steps.
enum OrderedRelationshipCases {
    /// Playlists with an ordered many-to-many of tracks (the tracks see their playlists
    /// unordered); albums with an ordered one-to-many of songs.
    static let schema = Schema(version: 1, entities: [
        EntitySchema("Playlist", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toMany("tracks", to: "Track", inverse: "playlists", ordered: true)]),
        EntitySchema("Track", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toMany("playlists", to: "Playlist", inverse: "tracks")]),
        EntitySchema("Album", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toMany("songs", to: "Song", inverse: "album", ordered: true)]),
        EntitySchema("Song", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toOne("album", to: "Album", inverse: "songs")]),
    ])

    static let owners: [Int64] = [1, 2, 3]
    struct RollBack: Error {}
    static let targets: [Int64] = Array(1...12)

    static func load(_ store: any DataStore) throws {
        try store.writeSync { w in
            for id in owners {
                try w.insert(["id": .int(id)], into: "Playlist")
                try w.insert(["id": .int(id)], into: "Album")
            }
            for id in targets {
                try w.insert(["id": .int(id)], into: "Track")
                try w.insert(["id": .int(id)], into: "Song")
            }
        }
    }

    /// The lists as stored: for each relationship and owner, the related keys in order.
    static func lists(_ r: ReadAccessor) throws -> [String: [Int64: [Value]]] {
        var lists: [String: [Int64: [Value]]] = [:]
        for (entity, relationship) in [("Playlist", "tracks"), ("Album", "songs")] {
            for owner in owners {
                lists[relationship, default: [:]][owner] = try r.related(entity, key: .int(owner), relationship)
                    .map { $0["id"] }
            }
        }
        return lists
    }

    /// A model of the two relationships: arrays of keys. A song is in one album's list at most.
    struct Model: Equatable {
        var lists: [String: [Int64: [Value]]] = ["tracks": [1: [], 2: [], 3: []], "songs": [1: [], 2: [], 3: []]]

        mutating func place(_ relationship: String, _ owner: Int64, _ target: Value, at index: Int?) {
            var list = lists[relationship]![owner]!
            let existing = list.firstIndex(of: target)
            if index == nil, existing != nil { return }
            if let existing { list.remove(at: existing) }
            if relationship == "songs" {
                for other in Model.ownersOtherThan(owner) { lists["songs"]![other]!.removeAll { $0 == target } }
            }
            list.insert(target, at: index ?? list.count)
            lists[relationship]![owner] = list
        }

        static func ownersOtherThan(_ owner: Int64) -> [Int64] {
            OrderedRelationshipCases.owners.filter { $0 != owner }
        }
    }

    static func entity(of relationship: String) -> String { relationship == "tracks" ? "Playlist" : "Album" }

    /// Random appends, inserts, moves and removes at an index, a few per transaction, on both
    /// relationships, every third transaction in a child store merged afterwards; the store's
    /// lists equal the model's after each transaction, in eager loads too, and after the store
    /// is reopened.
    static func randomSequence(_ c: ConformanceContext, seed: UInt64) throws {
        var store = try c.open(schema)
        try load(store)
        var rng = SplitMix64(seed: seed)
        var model = Model()
        for transaction in 0..<60 {
            let before = model
            let rollsBack = transaction % 5 == 4
            // Every third transaction runs in a child store, merged afterwards.
            let child = transaction % 3 == 1 ? try store.makeChild() : nil
            let target: any DataStore = child ?? store
            do {
                try target.writeSync { w in
                    for _ in 0..<Int.random(in: 1...4, using: &rng) {
                        let relationship = Bool.random(using: &rng) ? "tracks" : "songs"
                        let entity = entity(of: relationship)
                        let owner = owners.randomElement(using: &rng)!
                        let key = Value.int(owner)
                        let count = model.lists[relationship]![owner]!.count
                        let target = Value.int(targets.randomElement(using: &rng)!)
                        switch Int.random(in: 0..<10, using: &rng) {
                        case 0..<3:
                            try w.link(entity, key: key, relationship, to: target)
                            model.place(relationship, owner, target, at: nil)
                        case 3..<6:
                            let already = model.lists[relationship]![owner]!.contains(target)
                            let index = Int.random(in: 0...(already ? count - 1 : count), using: &rng)
                            try w.link(entity, key: key, relationship, to: target, at: index)
                            model.place(relationship, owner, target, at: index)
                        case 6..<8 where count > 0:
                            let from = Int.random(in: 0..<count, using: &rng)
                            let to = Int.random(in: 0..<count, using: &rng)
                            try w.moveRelated(entity, key: key, relationship, from: from, to: to)
                            let moved = model.lists[relationship]![owner]!.remove(at: from)
                            model.lists[relationship]![owner]!.insert(moved, at: to)
                        case 8 where count > 0:
                            let index = Int.random(in: 0..<count, using: &rng)
                            let removed = try w.unlink(entity, key: key, relationship, at: index)
                            let expected = model.lists[relationship]![owner]!.remove(at: index)
                            c.expectEqual(removed, expected, "unlink(at:) returns the key it removed")
                        default:
                            let related = try w.unlink(entity, key: key, relationship, from: target)
                            let list = model.lists[relationship]![owner]!
                            c.expectEqual(related, list.contains(target),
                                          "unlink(from:) says whether they were related")
                            model.lists[relationship]![owner]!.removeAll { $0 == target }
                        }
                    }
                    // Every fifth transaction rolls back: the lists stay as they were.
                    if rollsBack { throw RollBack() }
                }
                if let child {
                    c.expectEqual(try store.read { try lists($0) }, before.lists,
                                  "seed \(seed), transaction \(transaction): the parent sees nothing before the merge")
                    _ = try store.merge(child)
                }
            } catch is RollBack {
                model = before
            }
            let stored = try store.read { try lists($0) }
            c.expectEqual(stored, model.lists, "seed \(seed), after transaction \(transaction)")
            if stored != model.lists { break }
        }
        try store.read { r in
            let loaded = try r.fetch(FetchRequest("Playlist"), including: ["tracks"])
            c.expectEqual(loaded.map { $0["tracks"].map { $0.record["id"] } },
                          owners.map { model.lists["tracks"]![$0]! }, "an eager load gives each list in its order")
        }
        try store.close()
        store = try c.open(nil)
        c.expectEqual(try store.read { try lists($0) }, model.lists, "the order after the store is reopened")
        try store.close()
    }

    /// Forty inserts at the same index exhaust the room between two neighbors: the list is
    /// renumbered, in order.
    static func insertsAtOneIndexRenumberTheList(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try load(store)
        try store.writeSync { w in
            for id in [1, 2] as [Int64] {
                try w.link("Playlist", key: 1, "tracks", to: .int(id))
                try w.link("Album", key: 1, "songs", to: .int(id))
            }
        }
        var expected: [Value] = [1, 2]
        for round in 0..<40 {
            let target = Value.int(Int64(3 + round % 10))
            try store.writeSync { w in
                try w.link("Playlist", key: 1, "tracks", to: target, at: 1)
                try w.link("Album", key: 1, "songs", to: target, at: 1)
            }
            expected.removeAll { $0 == target }
            expected.insert(target, at: 1)
        }
        try store.read { r in
            c.expectEqual(try r.related("Playlist", key: 1, "tracks").map { $0["id"] }, expected)
            c.expectEqual(try r.related("Album", key: 1, "songs").map { $0["id"] }, expected)
            // The positions are ascending and distinct.
            let positions = try r.fetch(FetchRequest("Song", filter: Field("album") == 1)).map { $0["album_position"] }
            c.expect(!positions.contains(.null), "every song of the list has a position")
            c.expectEqual(Set(positions).count, positions.count, "positions are distinct")
        }
        try store.close()
    }

    /// Bad indexes, an unordered relationship, and an item that does not exist are refused, and
    /// name what is wrong.
    static func badIndexesAndUnorderedRelationshipsAreRefused(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try load(store)
        try store.writeSync { try $0.link("Playlist", key: 1, "tracks", to: 5) }
        c.expectError(.invalidArgument, naming: "index 2 is outside 'Playlist.tracks' of 1, which has 1 item") {
            try store.writeSync { try $0.link("Playlist", key: 1, "tracks", to: 6, at: 2) }
        }
        c.expectError(.invalidArgument, naming: "index -1") {
            try store.writeSync { try $0.moveRelated("Album", key: 1, "songs", from: -1, to: 0) }
        }
        c.expectError(.invalidArgument, naming: "index 0 is outside 'Album.songs' of 2, which has 0 items") {
            try store.writeSync { _ = try $0.unlink("Album", key: 2, "songs", at: 0) }
        }
        c.expectError(.invalidArgument, naming: "'Track.playlists' is not an ordered to-many") {
            try store.writeSync { try $0.link("Track", key: 1, "playlists", to: 1, at: 0) }
        }
        c.expectError(.notFound, naming: "'Playlist' with key 9") {
            try store.writeSync { try $0.link("Playlist", key: 9, "tracks", to: 1, at: 0) }
        }
        c.expectError(.invalidArgument, naming: "'Song.album' is to-one and ordered") {
            _ = try Schema(version: 1, entities: [
                EntitySchema("Album", primaryKey: "id", attributes: [Attribute("id", .int)],
                             relationships: [.toMany("songs", to: "Song", inverse: "album")]),
                EntitySchema("Song", primaryKey: "id", attributes: [Attribute("id", .int)],
                             relationships: [Relationship("album", to: "Album", cardinality: .toOne, inverse: "songs",
                                                          ordered: true)]),
            ]).resolved()
        }
        c.expectError(.invalidArgument, naming: "'Song.album_position' holds the places of ordered relationship "
            + "'Album.songs', so it must be an optional int") {
            _ = try Schema(version: 1, entities: [
                EntitySchema("Album", primaryKey: "id", attributes: [Attribute("id", .int)],
                             relationships: [.toMany("songs", to: "Song", inverse: "album", ordered: true)]),
                EntitySchema("Song", primaryKey: "id", attributes: [Attribute("id", .int),
                                                                    Attribute("album_position", .string)],
                             relationships: [.toOne("album", to: "Album", inverse: "songs")]),
            ]).resolved()
        }
        c.expectEqual(try store.read { try $0.related("Playlist", key: 1, "tracks").map { $0["id"] } }, [5],
                      "nothing of the refused writes stayed")
        try store.close()
    }

    /// The schema holds the positions; a store reopened with the declared schema is the same;
    /// deleting an item leaves the rest in order; nullify clears a song's place with its album.
    static func theSchemaHoldsThePositionsAndDeletesKeepTheRestInOrder(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        c.expectEqual(store.schema.entity(named: "Song")?.attribute(named: "album_position"),
                      Attribute("album_position", .int, optional: true))
        c.expectEqual(store.schema.entity(named: "Playlist_tracks")?.attribute(named: "source_position"),
                      Attribute("source_position", .int, optional: true))
        c.expectEqual(store.schema.entity(named: "Playlist_tracks")?.attribute(named: "target_position"), nil,
                      "the tracks' side is not ordered")
        try load(store)
        try store.writeSync { w in
            for id in [4, 2, 9, 7] as [Int64] {
                try w.link("Playlist", key: 1, "tracks", to: .int(id))
                try w.link("Album", key: 1, "songs", to: .int(id))
            }
        }
        try store.writeSync { w in
            _ = try w.delete("Track", key: 2)
            _ = try w.delete("Song", key: 9)
        }
        try store.read { r in
            c.expectEqual(try r.related("Playlist", key: 1, "tracks").map { $0["id"] }, [4, 9, 7])
            c.expectEqual(try r.related("Album", key: 1, "songs").map { $0["id"] }, [4, 2, 7])
        }
        try store.writeSync { _ = try $0.delete("Album", key: 1) }
        try store.read { r in
            let songs = try r.fetch(FetchRequest("Song", filter: Field("id") <= 9))
            c.expect(songs.allSatisfy { $0["album"].isNull && $0["album_position"].isNull },
                     "nullify clears each song's album and its place in the album's list")
        }
        try store.close()
        let reopened = try c.open(schema)
        c.expectEqual(reopened.schema, store.schema, "the declared schema opens the store it made")
        c.expectEqual(reopened.schema.entity(named: "Album")?.relationship(named: "songs")?.isOrdered, true)
        try reopened.close()
    }

    /// A child store's inserts and moves merge into the parent in the child's order, and the
    /// change feed lists the items whose places changed.
    static func aMergeAndTheFeedCarryTheOrder(_ c: ConformanceContext) throws {
        let store = try c.open(schema)
        try load(store)
        try store.writeSync { w in
            for id in [1, 2, 3] as [Int64] { try w.link("Playlist", key: 1, "tracks", to: .int(id)) }
        }
        let token = try store.read { try $0.changeToken() }
        let child = try store.makeChild()
        try child.writeSync { w in
            try w.moveRelated("Playlist", key: 1, "tracks", from: 2, to: 0)
            try w.link("Playlist", key: 1, "tracks", to: 8, at: 1)
        }
        c.expectEqual(try store.read { try $0.related("Playlist", key: 1, "tracks").map { $0["id"] } }, [1, 2, 3],
                      "the parent sees nothing before the merge")
        _ = try store.merge(child)
        c.expectEqual(try store.read { try $0.related("Playlist", key: 1, "tracks").map { $0["id"] } }, [3, 8, 1, 2])
        let changed = try store.read { try $0.changes(since: token) }.flatMap(\.items).map(\.entity)
        c.expect(changed.contains("Playlist_tracks"), "the feed lists the pairs whose places changed: \(changed)")
        try store.close()
    }

    /// A schema step adds an ordered one-to-many (the songs' places added, empty) and removes
    /// it again (the places removed with the to-one).
    static func schemaStepsAddAndRemoveAnOrderedRelationship(_ c: ConformanceContext) throws {
        let plain = Schema(version: 1, entities: [
            EntitySchema("Album", primaryKey: "id", attributes: [Attribute("id", .int)]),
            EntitySchema("Song", primaryKey: "id", attributes: [Attribute("id", .int)]),
        ])
        var store = try c.open(plain)
        try store.writeSync { w in
            try w.insert(["id": 1], into: "Album")
            for id in [3, 1, 2] as [Int64] { try w.insert(["id": .int(id)], into: "Song") }
        }
        try store.close()
        var added = plain
        added.version = 2
        added.entities[0].relationships = [.toMany("songs", to: "Song", inverse: "album", ordered: true)]
        added.entities[1].relationships = [.toOne("album", to: "Album", inverse: "songs")]
        var upgrades = SchemaUpgrades()
        upgrades.version(2, .addRelationship(
            entity: "Album", relationship: .toMany("songs", to: "Song", inverse: "album", ordered: true),
            inverse: .toOne("album", to: "Album", inverse: "songs")))
        store = try c.open(added, upgrades: upgrades)
        c.expectEqual(store.schema.entity(named: "Song")?.attribute(named: "album_position")?.type, .int)
        try store.writeSync { w in
            for id in [3, 1, 2] as [Int64] { try w.link("Album", key: 1, "songs", to: .int(id)) }
            try w.moveRelated("Album", key: 1, "songs", from: 0, to: 2)
        }
        c.expectEqual(try store.read { try $0.related("Album", key: 1, "songs").map { $0["id"] } }, [1, 2, 3])
        try store.close()
        var removed = plain
        removed.version = 3
        upgrades.version(3, .removeRelationship(entity: "Album", name: "songs"))
        store = try c.open(removed, upgrades: upgrades)
        c.expectEqual(store.schema.entity(named: "Song")?.attributes.map(\.name), ["id"],
                      "the to-one and the places went with the relationship")
        try store.close()
    }

    struct Deck: DataObject, Equatable {
        static let entityName = "Deck"
        static let primaryKey = "id"
        static let cards = toMany("cards", Card.self, inverse: "decks", ordered: true)
        static let relationships = [cards.relationship]
        var id: Int
    }

    struct Card: DataObject, Equatable {
        static let entityName = "Card"
        static let primaryKey = "id"
        static let decks = toMany("decks", Deck.self, inverse: "cards")
        static let relationships = [decks.relationship]
        var id: Int
        var face: String
    }

    /// The typed API puts, moves and removes objects at an index.
    static func typedObjectsInsertMoveAndRemoveAtAnIndex(_ c: ConformanceContext) throws {
        let store = try c.open(try Schema(models: [Deck.self, Card.self]))
        let deck = Deck(id: 1)
        let cards = (1...4).map { Card(id: $0, face: "c\($0)") }
        try store.writeSync { w in
            try w.insert(deck)
            for card in cards { try w.insert(card) }
            try w.link(deck, Deck.cards, to: cards[0])
            try w.link(deck, Deck.cards, to: cards[1], at: 0)
            try w.link(deck, Deck.cards, to: cards[2], at: 1)
            try w.link(deck, Deck.cards, to: cards[3])
            try w.move(in: deck, Deck.cards, from: 3, to: 0)
            let removed = try w.unlink(deck, Deck.cards, at: 2)
            c.expectEqual(removed.face, "c3")
        }
        try store.read { r in
            c.expectEqual(try r.related(Deck.cards, of: deck).map(\.id), [4, 2, 1])
            let loaded = try r.fetch(Deck.self, including: Deck.cards)
            c.expectEqual(try loaded.first?.related(Deck.cards).map(\.face), ["c4", "c2", "c1"])
        }
        try store.close()
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Ordered relationships", "insertsAtOneIndexRenumberTheList", insertsAtOneIndexRenumberTheList),
        ConformanceCase("Ordered relationships", "badIndexesAndUnorderedRelationshipsAreRefused",
                        badIndexesAndUnorderedRelationshipsAreRefused),
        ConformanceCase("Ordered relationships", "theSchemaHoldsThePositionsAndDeletesKeepTheRestInOrder",
                        theSchemaHoldsThePositionsAndDeletesKeepTheRestInOrder),
        ConformanceCase("Ordered relationships", "aMergeAndTheFeedCarryTheOrder", aMergeAndTheFeedCarryTheOrder),
        ConformanceCase("Ordered relationships", "schemaStepsAddAndRemoveAnOrderedRelationship",
                        schemaStepsAddAndRemoveAnOrderedRelationship),
        ConformanceCase("Ordered relationships", "typedObjectsInsertMoveAndRemoveAtAnIndex",
                        typedObjectsInsertMoveAndRemoveAtAnIndex),
    ] + (1...3).map { seed in
        ConformanceCase("Ordered relationships", "randomSequence\(seed)EndsEqualToAModelOfArrays") { c in
            try randomSequence(c, seed: UInt64(seed))
        }
    }
}

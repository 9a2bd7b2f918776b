import DataStoreAPI
import InMemoryStore
import Testing

/// Neighbouring positions of an ordered relationship further apart than an Int64 counts
/// (another program wrote them: a foreign store's order values): a member placed between them
/// takes the middle, not an overflow of their difference.
@Test func aMemberPlacedBetweenPositionsFarApartTakesTheMiddle() throws {
    let schema = Schema(version: 1, entities: [
        EntitySchema("Album", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toMany("songs", to: "Song", inverse: "album", ordered: true)]),
        EntitySchema("Song", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toOne("album", to: "Album", inverse: "songs")]),
    ])
    let store = try InMemoryStore(schema: schema)
    try store.writeSync { w in
        try w.insert(["id": 1], into: "Album")
        for id in 1...3 { try w.insert(["id": .int(Int64(id))], into: "Song") }
        try w.link("Album", key: 1, "songs", to: 1)
        try w.link("Album", key: 1, "songs", to: 2)
        _ = try w.update("Song", key: 1, set: ["album_position": .int(-6_000_000_000_000_000_000)])
        _ = try w.update("Song", key: 2, set: ["album_position": .int(6_000_000_000_000_000_000)])
        try w.link("Album", key: 1, "songs", to: 3, at: 1)
    }
    let songs = try store.read { try $0.related("Album", key: 1, "songs") }
    #expect(songs.map { $0["id"] } == [1, 3, 2])
    #expect(songs.map { $0["album_position"] } == [.int(-6_000_000_000_000_000_000), .int(0),
                                                    .int(6_000_000_000_000_000_000)])
}

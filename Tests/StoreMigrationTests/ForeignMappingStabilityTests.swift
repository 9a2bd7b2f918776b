import DataStoreAPI
import DataStoreTestSupport
@testable import ForeignStores
import Foundation
@testable import StoreMigration
import Testing

/// A database shaped like the music store samples (Chinook): tables with several foreign keys,
/// two of them to one table, a self-reference and a composite-key join table.
func writeMusicStoreDatabase(_ path: String) throws {
    try sqliteShell(path, """
        CREATE TABLE genre (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE media_type (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE artist (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE album (id INTEGER PRIMARY KEY, title TEXT NOT NULL, artist_id INTEGER NOT NULL REFERENCES artist(id));
        CREATE TABLE track (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
          album_id INTEGER REFERENCES album(id), media_type_id INTEGER NOT NULL REFERENCES media_type(id),
          genre_id INTEGER REFERENCES genre(id), composer TEXT, milliseconds INTEGER NOT NULL, unit_price NUMERIC);
        CREATE TABLE employee (id INTEGER PRIMARY KEY, last_name TEXT NOT NULL, reports_to INTEGER REFERENCES employee(id),
          mentor INTEGER REFERENCES employee(id));
        CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT, support_rep_id INTEGER REFERENCES employee(id),
          account_manager INTEGER REFERENCES employee(id));
        CREATE TABLE invoice (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customer(id), total NUMERIC);
        CREATE TABLE invoice_line (id INTEGER PRIMARY KEY, invoice_id INTEGER NOT NULL REFERENCES invoice(id),
          track_id INTEGER NOT NULL REFERENCES track(id), quantity INTEGER NOT NULL);
        CREATE TABLE playlist (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE playlist_track (playlist_id INTEGER NOT NULL REFERENCES playlist(id),
          track_id INTEGER NOT NULL REFERENCES track(id), PRIMARY KEY (playlist_id, track_id));
        CREATE INDEX track_album ON track(album_id);
        CREATE INDEX track_genre ON track(genre_id);
        INSERT INTO genre VALUES (1, 'Rock'), (2, 'Jazz');
        INSERT INTO media_type VALUES (1, 'MPEG'), (2, 'AAC');
        INSERT INTO artist VALUES (1, 'AC/DC'), (2, 'Miles');
        INSERT INTO album VALUES (1, 'Back in Black', 1), (2, 'Kind of Blue', 2);
        INSERT INTO track VALUES (1, 'Hells Bells', 1, 1, 1, 'Young', 312000, 0.99), (2, 'So What', 2, 2, 2, NULL, 545000, 1.29),
          (3, 'Intro', NULL, 1, NULL, NULL, 1000, NULL);
        INSERT INTO employee VALUES (1, 'Adams', NULL, NULL), (2, 'Edwards', 1, 1), (3, 'Peacock', 2, 1);
        INSERT INTO customer VALUES (1, 'Luís', 3, 2), (2, 'Leonie', 3, NULL);
        INSERT INTO invoice VALUES (1, 1, 1.98), (2, 2, 1.29);
        INSERT INTO invoice_line VALUES (1, 1, 1, 2), (2, 2, 2, 1);
        INSERT INTO playlist VALUES (1, 'Music'), (2, 'Empty');
        INSERT INTO playlist_track VALUES (1, 1), (1, 2);
        """)
}

/// The mapping of a foreign file is the file's: the same in every process (nothing follows a
/// hash order, which changes from process to process), so that a copy made by one run is
/// verified, synced, diffed and resumed by another.
@Suite struct ForeignMappingStabilityTests {
    @Test func aPlainDatabaseMapsToOneSchemaInTenProcesses() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("music.db")
        try writeMusicStoreDatabase(path)
        let source = "plain-sqlite:\(path)"
        var schemas: Set<String> = []
        for _ in 0..<10 { schemas.insert(try runCommand(migrateStore.path, ["inspect", "--schema", source])) }
        #expect(schemas.count == 1, "\(schemas.count) different schemas in 10 processes")
        let copy = "lmdb:\(dir.path("music.lmdb"))"
        _ = try runCommand(migrateStore.path, ["copy", "--from", source, "--to", copy])
        for run in 0..<10 {
            for command in ["verify", "diff", "sync"] {
                let output = try runCommand(migrateStore.path, [command, "--from", source, "--to", copy],
                                            allowingFailure: true)
                #expect(!output.contains("error"), "run \(run), \(command): \(output)")
            }
        }
    }

    @Test func aCopyStoppedInOneProcessIsResumedInAnotherTenTimes() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("music.db")
        try writeMusicStoreDatabase(path)
        let source = StoreLocation(kind: "plain-sqlite", path: path)
        for run in 0..<10 {
            let destination = dir.location(.sqlite, "copy\(run)")
            var batches = 0
            #expect(throws: MigrationInterrupted.self) {
                try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 1),
                                  shouldStop: { batches += 1; return batches == 4 + run })
            }
            let output = try runCommand(migrateStore.path, ["copy", "--from", "plain-sqlite:\(path)",
                                                             "--to", "sqlite:\(destination.path)", "--resume"],
                                        allowingFailure: true)
            #expect(output.contains("verified"), "run \(run): \(output)")
        }
    }

    /// Two schemas that hold the same relationships or indexes in another order: the message
    /// names what is in which order.
    @Test func aSchemaInAnotherOrderIsNamed() {
        let a = EntitySchema("t", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("x", .int)],
                             indexes: [Index("i1", on: ["x"]), Index("i2", on: ["id", "x"])])
        var b = a
        b.indexes.reverse()
        #expect(Migrator.orderDifference(a, b) == "its indexes are in the order i1, i2; the source's i2, i1")
    }
}

/// Plain-SQLite columns whose values decide their type: each copies exactly or is refused in
/// one line before anything is copied.
@Suite struct PlainSQLiteValueMappingTests {
    @Test func textThatOnlyBeginsWithADateIsText() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("log.db")
        try sqliteShell(path, """
            CREATE TABLE event (id INTEGER PRIMARY KEY, note TEXT, at TEXT);
            INSERT INTO event VALUES (1, '2024-01-02 03:04:05 started', '2024-01-02 03:04:05'),
              (2, '2024-01-02 03:04:05', '2024-01-02T03:04:05.250Z');
            """)
        let store = try PlainSQLiteStore(ForeignSource(path: path))
        defer { try? store.close() }
        let event = try #require(store.schema.entity(named: "event"))
        #expect(event.attribute(named: "note")?.type == .string)
        #expect(event.attribute(named: "at")?.type == .date)
        let copy = dir.location(.lmdb, "copy")
        let report = try Migrator.copy(from: StoreLocation(kind: "plain-sqlite", path: path), to: copy)
        #expect(report.verified && report.differences == 0)
        let notes = try contents(copy)["event"]?.map { $0["note"] }
        #expect(notes == [.string("2024-01-02 03:04:05 started"), .string("2024-01-02 03:04:05")])
    }

    @Test func aBlobNamedUUIDThatIsNotSixteenBytesIsBytes() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("things.db")
        try sqliteShell(path, """
            CREATE TABLE thing (id INTEGER PRIMARY KEY, uuid BLOB, device_uuid BLOB);
            INSERT INTO thing VALUES (1, X'00112233445566778899AABBCCDDEEFF', X'0011'),
              (2, NULL, X'00112233445566778899AABBCCDDEEFF');
            """)
        let store = try PlainSQLiteStore(ForeignSource(path: path))
        let thing = try #require(store.schema.entity(named: "thing"))
        try store.close()
        #expect(thing.attribute(named: "uuid")?.type == .uuid)
        #expect(thing.attribute(named: "device_uuid")?.type == .bytes)
        let report = try Migrator.copy(from: StoreLocation(kind: "plain-sqlite", path: path),
                                       to: dir.location(.sqlite, "copy"))
        #expect(report.verified && report.differences == 0)
        try sqliteShell(path, "CREATE TABLE declared (id INTEGER PRIMARY KEY, u UUID); INSERT INTO declared VALUES (1, X'01');")
        #expect { try PlainSQLiteStore(ForeignSource(path: path)) } throws: { error in
            "\(error)".contains("declared.u is declared 'UUID' (a uuid) but holds blobs that are not 16 bytes")
                && !"\(error)".contains("\n")
        }
    }

    @Test func aTextKeyHoldingANulIsCopiedWithItsReferences() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("keys.db")
        let database = try FixtureDatabase(path)
        try database.exec("""
            CREATE TABLE parent (code TEXT PRIMARY KEY, name TEXT);
            CREATE TABLE child (id INTEGER PRIMARY KEY, parent TEXT REFERENCES parent(code));
            """)
        try database.insert("INSERT INTO parent VALUES (?, 'nul')", ["a\u{0}b"])
        try database.insert("INSERT INTO parent VALUES (?, 'plain')", ["a"])
        try database.insert("INSERT INTO child VALUES (1, ?)", ["a\u{0}b"])
        try database.insert("INSERT INTO child VALUES (2, ?)", ["a"])
        database.close()
        let source = StoreLocation(kind: "plain-sqlite", path: path)
        _ = try source.check()
        let copy = dir.location(.lmdb, "copy")
        let report = try Migrator.copy(from: source, to: copy)
        #expect(report.verified && report.differences == 0)
        let children = try contents(copy)["child"]?.map { $0["parent"] }
        #expect(children == [.string("a\u{0}b"), .string("a")])
    }

    /// A table without a key named as the message shows it (`t.COLUMN`) or as the flag wants
    /// (`t=COLUMN`): both are taken.
    @Test func aKeyFlagTakesBothSpellings() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("log.db")
        try sqliteShell(path, "CREATE TABLE log (msg TEXT); INSERT INTO log VALUES ('a'), ('b');")
        for spelling in ["log=rowid", "log.rowid"] {
            let output = try runCommand(migrateStore.path, ["copy", "--from", "plain-sqlite:\(path)", "--key", spelling,
                                                             "--to", "lmdb:\(dir.path("out-\(spelling).lmdb"))"],
                                        allowingFailure: true)
            #expect(output.contains("verified"), "--key \(spelling): \(output)")
        }
    }
}

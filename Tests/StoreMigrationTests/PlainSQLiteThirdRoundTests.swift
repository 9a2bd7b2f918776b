@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
@testable import ForeignStores
import Foundation
import StoreMigration
import Testing

/// Plain SQLite files of the third round: full-text and spatial indexes, a declared
/// primary key that holds NULL, a file cut short. Each read by every command that reads: exact,
/// or refused in one line with no destination left and the file untouched.

/// A library database with full-text and spatial tables beside two real tables: an FTS5 index over
/// `book` (external content) and a contentless one, which are derived data; an FTS4, an FTS5 and
/// an FTS3 table that hold their own text, and two R*Trees, which hold the only copy of their rows.
private func libraryDatabase(_ path: String) throws {
    _ = try runCommand("/usr/bin/sqlite3", [path, """
        CREATE TABLE author (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE book (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
                           author_id INTEGER REFERENCES author(id) ON DELETE CASCADE);
        CREATE VIRTUAL TABLE book_fts USING fts5(title, content='book', content_rowid='id');
        CREATE VIRTUAL TABLE word_fts USING fts5(word, content='');
        CREATE VIRTUAL TABLE note_fts USING fts4(body);
        CREATE VIRTUAL TABLE quote_fts USING fts5(text, source, tokenize = 'porter');
        CREATE VIRTUAL TABLE old_fts USING fts3(line);
        CREATE VIRTUAL TABLE shelf_box USING rtree(id, minx, maxx, miny, maxy);
        CREATE VIRTUAL TABLE tile_box USING rtree_i32(tile, x0, x1);
        INSERT INTO author VALUES (1, 'Ann'), (2, 'Bo');
        INSERT INTO book VALUES (1, 'Dune', 1), (2, 'Emma', 2), (3, 'Ulysses', 1);
        INSERT INTO book_fts(book_fts) VALUES ('rebuild');
        INSERT INTO word_fts(rowid, word) VALUES (1, 'dune');
        INSERT INTO note_fts(docid, body) VALUES (7, 'a note'), (9, 'another, with ünïcode');
        INSERT INTO quote_fts(rowid, text, source) VALUES (3, 'Fear is the mind-killer.', 'Dune'), (4, 'x', NULL);
        INSERT INTO old_fts VALUES ('an old line');
        INSERT INTO shelf_box VALUES (1, 0, 1.5, 0, 1), (2, -2, 2, -1, 1);
        INSERT INTO tile_box VALUES (10, -5, 5);
        """])
}

@Test func fullTextAndSpatialTablesThatHoldTheirRowsAreReadAndIndexesLeftOut() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("library.db")
    try libraryDatabase(path)
    let before = try Data(contentsOf: URL(fileURLWithPath: path))
    let source = "plain-sqlite:\(path)"
    let inspect = try runCLI(["inspect", source])
    #expect(inspect.status == 0, "\(inspect.errors)")
    #expect(inspect.output.contains("left out as derived data"), "\(inspect.output)")
    #expect(inspect.output.contains("the virtual tables book_fts, word_fts and"), "\(inspect.output)")
    #expect(inspect.output.contains("note_fts, old_fts, quote_fts, shelf_box, tile_box, which hold the only copy"),
            "\(inspect.output)")
    #expect(!inspect.output.contains("book_fts_data:") && !inspect.output.contains("shelf_box_node:"))
    for kind in [StoreKind.sqlite, .lmdb] {
        let destination = dir.location(kind, "copy")
        let copy = try runCLI(["copy", "--from", source, "--to", destination.description, "--progress", "none"])
        #expect(copy.status == 0, "\(kind): \(copy.errors)")
        let copied = try contents(destination)
        #expect(copied.keys.sorted() == ["author", "book", "note_fts", "old_fts", "quote_fts", "shelf_box", "tile_box"],
                "\(kind)")
        #expect(copied["book"]?.count == 3)
        #expect(copied["note_fts"]?.map { [$0["rowid"], $0["body"]] }
            == [[7, "a note"], [9, "another, with ünïcode"]], "\(kind): \(copied["note_fts"] ?? [])")
        #expect(copied["quote_fts"]?.map { [$0["rowid"], $0["text"], $0["source"]] }
            == [[3, "Fear is the mind-killer.", "Dune"], [4, "x", nil]], "\(kind)")
        #expect(copied["old_fts"]?.map { $0["line"] } == ["an old line"])
        #expect(copied["shelf_box"]?.map { [$0["id"], $0["minx"], $0["maxx"]] } == [[1, 0.0, 1.5], [2, -2.0, 2.0]],
                "\(kind): \(copied["shelf_box"] ?? [])")
        #expect(copied["tile_box"]?.map { [$0["tile"], $0["x0"], $0["x1"]] } == [[10, -5, 5]],
                "\(kind): \(copied["tile_box"] ?? [])")
        for command in ["verify", "sync", "diff"] {
            let result = try runCLI([command, "--from", source, "--to", destination.description])
            #expect(result.status == 0, "\(kind) \(command): \(result.errors)")
        }
        try destination.destroy()
    }
    // --entities: a table that holds its rows may be chosen; an index or a shadow table is named
    // as what it is; an unknown name is told the tables that may be chosen.
    let chosen = dir.location(.sqlite, "chosen")
    let some = try runCLI(["copy", "--from", source, "--entities", "book,note_fts", "--to", chosen.description,
                           "--progress", "none"])
    #expect(some.status == 0, "\(some.errors)")
    #expect(try contents(chosen).keys.sorted() == ["book", "note_fts"])
    for (name, naming) in [("book_fts", "'book_fts' is an FTS5 full-text index (over 'book'), derived data"),
                           ("word_fts", "FTS5 full-text index (contentless)"),
                           ("note_fts_segments", "is a shadow table")] {
        let result = try runCLI(["copy", "--from", source, "--entities", "book,\(name)",
                                 "--to", dir.location(.lmdb, "never").description])
        #expect(result.status == 2 && result.errors.contains(naming), "\(name): \(result.errors)")
        #expect(result.errors.split(separator: "\n").count == 1)
    }
    #expect(!FileManager.default.fileExists(atPath: dir.location(.lmdb, "never").path))
    #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the file is untouched")
}

/// A virtual table of a module this reader does not know (an extension's, here spellfix1) may
/// hold the only copy of its rows: the file is refused in one line naming it, and --entities
/// choosing the other tables copies them.
@Test func aVirtualTableOfAnUnknownModuleIsRefusedUnlessLeftOutByEntities() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("ext.db")
    _ = try runCommand("/usr/bin/sqlite3", [path, """
        CREATE TABLE word (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO word VALUES (1, 'a');
        PRAGMA writable_schema = ON;
        INSERT INTO sqlite_master VALUES ('table', 'fix', 'fix', 0, 'CREATE VIRTUAL TABLE fix USING spellfix1(x)');
        """])
    let source = "plain-sqlite:\(path)"
    let refused = try runCLI(["copy", "--from", source, "--to", dir.location(.lmdb, "never").description])
    #expect(refused.status == 2 && refused.errors.contains("'fix' is a virtual table of the module spellfix1"),
            "\(refused.errors)")
    #expect(refused.errors.split(separator: "\n").count == 1)
    #expect(!FileManager.default.fileExists(atPath: dir.location(.lmdb, "never").path))
    let chosen = dir.location(.lmdb, "chosen")
    let copy = try runCLI(["copy", "--from", source, "--entities", "word", "--to", chosen.description, "--progress", "none"])
    #expect(copy.status == 0, "\(copy.errors)")
    #expect(try contents(chosen)["word"]?.count == 1)
}

/// A declared primary key that is not a rowid alias holds NULL (SQLite lets it): keyed by rowid,
/// the column is optional, so `inspect` and `copy` agree and the copy is exact.
@Test func aDeclaredPrimaryKeyHoldingNullIsAnOptionalColumnWhenKeyedByRowid() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("nulls.db")
    _ = try runCommand("/usr/bin/sqlite3", [path, """
        CREATE TABLE tag (id INT PRIMARY KEY, name TEXT);
        INSERT INTO tag VALUES (1, 'a'), (NULL, 'b'), (3, 'c');
        """])
    let source = "plain-sqlite:\(path)"
    let inspect = try runCLI(["inspect", source, "--key", "tag=rowid"])
    #expect(inspect.status == 0, "\(inspect.errors)")
    let destination = dir.location(.sqlite, "copy")
    let copy = try runCLI(["copy", "--from", source, "--key", "tag=rowid", "--to", destination.description,
                           "--progress", "none"])
    #expect(copy.status == 0, "\(copy.errors)")
    let tags = try #require(try contents(destination)["tag"])
    #expect(tags.map(\.["id"]) == [.int(1), .null, .int(3)])
    let verify = try runCLI(["verify", "--from", source, "--key", "tag=rowid", "--to", destination.description])
    #expect(verify.status == 0, "\(verify.errors)")
}

/// A file cut short (as a full disk leaves it) is named as damaged before any table is read,
/// by every command, with or without keys; nothing is left behind.
@Test func aFileCutShortIsNamedAsDamagedFirst() throws {
    let dir = try TemporaryDirectory()
    let whole = dir.path("whole.db")
    _ = try runCommand("/usr/bin/sqlite3", [whole, """
        CREATE TABLE android_metadata (locale TEXT);
        INSERT INTO android_metadata VALUES ('en_US');
        CREATE TABLE item (id INTEGER PRIMARY KEY, body TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
        INSERT INTO item SELECT i, printf('%0200d', i) FROM n;
        """])
    let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
    // Cut at a page boundary (the schema still reads: the case that was reported as a table
    // without a primary key) and in the middle of a page.
    for (name, length) in [("cut-at-page", (bytes.count / 2 / 4_096) * 4_096), ("cut-mid-page", bytes.count / 2 + 100)] {
    let path = dir.path("\(name).db")
    try bytes.prefix(length).write(to: URL(fileURLWithPath: path))
    let before = try Data(contentsOf: URL(fileURLWithPath: path))
    let source = "plain-sqlite:\(path)"
    let destination = dir.location(.lmdb, "never")
    for arguments in [["inspect", source], ["inspect", source, "--key", "android_metadata=rowid"],
                      ["check", source], ["copy", "--from", source, "--to", destination.description],
                      ["copy", "--from", source, "--key", "android_metadata=rowid", "--to", destination.description]] {
        let result = try runCLI(arguments)
        #expect(result.status == 2, "\(arguments): \(result.errors)")
        #expect(result.errors.split(separator: "\n").count == 1 && result.errors.contains("is damaged"),
                "\(arguments): \(result.errors)")
        #expect(!result.errors.contains("no primary key"), "\(arguments): \(result.errors)")
    }
    #expect(!FileManager.default.fileExists(atPath: destination.path), "no destination left behind")
    #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the file is untouched")
    }
}

/// `--entities` names the tables read before any table is checked: a table that cannot be
/// carried (no primary key) does not stop a copy, verify, sync or diff of the others.
@Test func entitiesNamingTheRealTablesReadOnlyThem() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("app.db")
    try libraryDatabase(path)
    _ = try runCommand("/usr/bin/sqlite3", [path, "CREATE TABLE log (line TEXT); INSERT INTO log VALUES ('x');"])
    let source = "plain-sqlite:\(path)"
    let whole = try runCLI(["copy", "--from", source, "--to", dir.location(.lmdb, "whole").description])
    #expect(whole.status == 2 && whole.errors.contains("'log' has no primary key"), "\(whole.errors)")
    #expect(!FileManager.default.fileExists(atPath: dir.location(.lmdb, "whole").path))
    let destination = dir.location(.lmdb, "some")
    let copy = try runCLI(["copy", "--from", source, "--entities", "author,book", "--to", destination.description,
                           "--progress", "none"])
    #expect(copy.status == 0, "\(copy.errors)")
    #expect(try contents(destination).keys.sorted() == ["author", "book"])
    for command in ["verify", "sync", "diff"] {
        let result = try runCLI([command, "--from", source, "--entities", "author,book", "--to", destination.description])
        #expect(result.status == 0, "\(command): \(result.errors)")
    }
    // A table left out that others refer to: the reference is a plain value.
    let books = dir.location(.sqlite, "books")
    let only = try runCLI(["copy", "--from", source, "--entities", "book", "--to", books.description])
    #expect(only.status == 0, "\(only.errors)")
    #expect(try contents(books)["book"]?.first?["author_id"] == .int(1))
    let unknown = try runCLI(["copy", "--from", source, "--entities", "book,nope", "--to",
                              dir.location(.lmdb, "never").description])
    #expect(unknown.status == 2 && unknown.errors.contains("'nope'"), "\(unknown.errors)")
}

/// A column and an index with a collation this reader does not have (an app's `unicase`) are
/// read byte for byte: the table copies exactly, and verifies.
@Test func aCollationTheReaderLacksIsReadByteForByte() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("unicase.db")
    // The sqlite3 shell has no unicase either: the schema is written as the app wrote it.
    _ = try runCommand("/usr/bin/sqlite3", [path, """
        CREATE TABLE word (id INTEGER PRIMARY KEY, text TEXT);
        INSERT INTO word VALUES (1, 'Éclair'), (2, 'apple'), (3, 'Zebra');
        PRAGMA writable_schema = ON;
        UPDATE sqlite_master SET sql = 'CREATE TABLE word (id INTEGER PRIMARY KEY, text TEXT COLLATE unicase)'
            WHERE name = 'word';
        """])
    let source = "plain-sqlite:\(path)"
    let destination = dir.location(.sqlite, "copy")
    let copy = try runCLI(["copy", "--from", source, "--to", destination.description, "--progress", "none"])
    #expect(copy.status == 0, "\(copy.errors)")
    #expect(try contents(destination)["word"]?.map(\.["text"]) == [.string("Éclair"), .string("apple"), .string("Zebra")])
    let verify = try runCLI(["verify", "--from", source, "--to", destination.description])
    #expect(verify.status == 0, "\(verify.errors)")
}

/// `--model` given an Xcode model of the old binary form says so and what to do.
@Test func anXcodeModelOfTheOldBinaryFormIsNamedAsSuch() throws {
    let dir = try TemporaryDirectory()
    let store = dir.path("Notes.sqlite")
    try CoreDataFixture.write(at: store)
    let model = dir.path("Old.xcdatamodel")
    try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
    try Data("bplist00".utf8).write(to: URL(fileURLWithPath: model + "/elements"))
    let result = try runCLI(["inspect", "coredata:\(store)", "--model", model])
    #expect(result.status == 2, "\(result.errors)")
    #expect(result.errors.contains("old binary form") && result.errors.contains("Xcode"), "\(result.errors)")
}

/// `--key T=rowid` on a WITHOUT ROWID table is refused first, in one line, whatever the other
/// tables hold.
@Test func aRowidKeyOnAWithoutRowidTableIsRefusedFirst() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("pairs.db")
    _ = try runCommand("/usr/bin/sqlite3", [path, """
        CREATE TABLE pair (a TEXT, b TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID;
        INSERT INTO pair VALUES ('x', 'y');
        CREATE TABLE fine (id INTEGER PRIMARY KEY, v TEXT);
        """])
    let result = try runCLI(["inspect", "plain-sqlite:\(path)", "--key", "pair=rowid"])
    #expect(result.status == 2, "\(result.errors)")
    #expect(result.errors.contains("key=pair.rowid") && result.errors.contains("WITHOUT ROWID"), "\(result.errors)")
}

/// What SQLite before 3.37 (no `pragma_table_list`) reads the virtual and shadow tables as is
/// what this SQLite's list says.
@Test func virtualTablesAreFoundWithoutPragmaTableListToo() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("library.db")
    try libraryDatabase(path)
    let database = try ForeignDatabase(path: path)
    defer { database.close() }
    let listed = try PlainSQLiteMapping.derivedTables(database, tableList: true)
    #expect(listed["book_fts"] == "virtual" && listed["book_fts_data"] == "shadow" && listed["shelf_box_node"] == "shadow")
    // A name that holds the word (housing_fts) does not hide the module.
    let housing = dir.path("housing.db")
    _ = try runCommand("/usr/bin/sqlite3", [housing, "CREATE VIRTUAL TABLE housing_fts USING fts5(body)"])
    let other = try ForeignDatabase(path: housing)
    defer { other.close() }
    let found = try PlainSQLiteMapping.virtualTables(other, derived: PlainSQLiteMapping.derivedTables(other))
    #expect(found.map(\.module) == ["fts5"] && found.first?.holdsData == true)
    let virtual = try PlainSQLiteMapping.virtualTables(database, derived: listed)
    #expect(virtual.map(\.name) == ["book_fts", "note_fts", "old_fts", "quote_fts", "shelf_box", "tile_box", "word_fts"])
    #expect(virtual.filter(\.holdsData).map(\.name) == ["note_fts", "old_fts", "quote_fts", "shelf_box", "tile_box"])
    #expect(virtual.first { $0.name == "shelf_box" }?.key == "id")
    #expect(try PlainSQLiteMapping.derivedTables(database, tableList: false) == listed)
}

/// A WAL database whose file's header counts more pages than the file holds (a checkpoint cut
/// short), while its -wal makes it whole: read from the snapshot, not named as damaged.
@Test func aHeaderAheadOfTheFileIsNotDamageWhenTheWALMakesItWhole() throws {
    let dir = try TemporaryDirectory()
    let live = dir.path("live.db"), path = dir.path("copied.db")
    // The shell copies the files while its connection still holds the rows in the -wal.
    _ = try runCommand("/usr/bin/sqlite3", [live, """
        PRAGMA journal_mode=WAL;
        PRAGMA wal_autocheckpoint=0;
        CREATE TABLE item (id INTEGER PRIMARY KEY, body TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
        INSERT INTO item SELECT i, printf('%0100d', i) FROM n;
        """, ".shell cp '\(live)' '\(path)' && cp '\(live)-wal' '\(path)-wal'"])
    #expect(((try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0) > 0)
    // The file's header: 40 pages, its count marked valid (version-valid-for = change counter).
    var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    #expect(bytes.count < 40 * 4_096)
    bytes.replaceSubrange(28..<32, with: [0, 0, 0, 40])
    bytes.replaceSubrange(92..<96, with: bytes[24..<28])
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    let destination = dir.location(.sqlite, "copy")
    let copy = try runCLI(["copy", "--from", "plain-sqlite:\(path)", "--to", destination.description,
                           "--progress", "none"])
    #expect(copy.status == 0, "\(copy.errors)")
    #expect(try contents(destination)["item"]?.count == 500)
}

/// What the file is (a store of this toolkit, a Core Data store) is decided on all of its
/// tables, whatever `--entities` names.
@Test func entitiesDoNotHideWhatTheFileIs() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.sqlite, "toolkit")
    try DemoData.seed(store, items: 50, seed: 1)
    let result = try runCLI(["copy", "--from", "plain-sqlite:\(store.path)", "--entities", "Product",
                             "--to", dir.location(.lmdb, "never").description])
    #expect(result.status == 2 && result.errors.contains("is a store of this toolkit"), "\(result.errors)")
}

/// A join table named in `--entities` is named as the many-to-many it is; one that comes along
/// with the two tables it pairs and cannot be carried is refused saying why it came and how to
/// leave it out.
@Test func joinTablesAndEntitiesOnPlainSQLite() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("tags.db")
    _ = try runCommand("/usr/bin/sqlite3", [path, """
        CREATE TABLE post (id INTEGER PRIMARY KEY, title TEXT);
        CREATE TABLE tag (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE post_tag (post_id INTEGER NOT NULL REFERENCES post(id) ON DELETE CASCADE,
                               tag_id INTEGER NOT NULL REFERENCES tag(id) ON DELETE CASCADE,
                               PRIMARY KEY (post_id, tag_id));
        CREATE TABLE odd (id INTEGER PRIMARY KEY);
        CREATE TABLE post_odd (post_id INTEGER NOT NULL REFERENCES post(id) ON DELETE SET DEFAULT,
                               odd_id INTEGER NOT NULL REFERENCES odd(id),
                               PRIMARY KEY (post_id, odd_id));
        INSERT INTO post VALUES (1, 'a'), (2, 'b'); INSERT INTO tag VALUES (1, 'x'), (2, 'y');
        INSERT INTO post_tag VALUES (1, 1), (1, 2), (2, 2);
        """])
    let source = "plain-sqlite:\(path)"
    let named = try runCLI(["copy", "--from", source, "--entities", "post,tag,post_tag",
                            "--to", dir.location(.lmdb, "never").description])
    #expect(named.status == 2 && named.errors.contains("'post_tag' is the join table of the many-to-many between "
        + "'post' and 'tag'") && named.errors.contains("choose post,tag"), "\(named.errors)")
    #expect(named.errors.split(separator: "\n").count == 1)
    let carried = dir.location(.sqlite, "carried")
    let copy = try runCLI(["copy", "--from", source, "--entities", "post,tag", "--to", carried.description,
                           "--progress", "none"])
    #expect(copy.status == 0, "\(copy.errors)")
    let verify = try runCLI(["verify", "--from", source, "--entities", "post,tag", "--to", carried.description])
    #expect(verify.status == 0, "\(verify.errors)")
    let odd = try runCLI(["copy", "--from", source, "--entities", "post,odd",
                          "--to", dir.location(.lmdb, "never").description])
    #expect(odd.status == 2 && odd.errors.contains("SET DEFAULT") && odd.errors.contains("which --entities chose"),
            "\(odd.errors)")
    let oneSide = try runCLI(["copy", "--from", source, "--entities", "post", "--to", dir.location(.lmdb, "post").description,
                              "--progress", "none"])
    #expect(oneSide.status == 0, "\(oneSide.errors)")
    #expect(!FileManager.default.fileExists(atPath: dir.location(.lmdb, "never").path))
}

import DataStoreAPI
import Foundation

/// Writes a SwiftData store the way SwiftData's Core Data stack lays it out (the layout read from
/// a real SwiftData store of a public app: its tables, its `Z_MODELCACHE` and its columns), for
/// tests of composite attributes:
///
/// - `Cocktail`: `id` (UUID), `name`, `favorite` (Bool), `author` (an optional struct: `id`
///   UUID, `person`, `place`, `year` Int64, `favorite` String), `tags` (a struct: `flavors`
///   Data holding JSON, and `origin`, a nested struct of `country` and `region`), `ice` (an
///   optional enum, kept as a composite of one element of the same name); `garnish`, a
///   many-to-many to `Garnish`; `spec`, a to-many to `Ingredient` with no inverse (cascade).
/// - `Garnish`: `name`; `cocktails`.
/// - `Ingredient`: `id` (UUID), `amount` (Double), `unit` (an enum).
/// - Persistent history: `ACHANGE`, `ATRANSACTION`, `ATRANSACTIONSTRING`, numbered 16001 to
///   16003 in `Z_PRIMARYKEY`, as SwiftData writes them.
///
/// Columns are grouped by SQL type (integers, floats, text, UUIDs, other binary data), each group
/// in top-level attribute name order; elements that share a name are numbered in that order:
/// `author.id` is `ZID` and `id` is `ZID1`; `favorite` (a Bool) is `ZFAVORITE` and
/// `author.favorite` (text) `ZFAVORITE1`.
public enum SwiftDataFixture {
    public static let numbers = ["Cocktail": 1, "Garnish": 2, "Ingredient": 3]

    public static func uuid(_ byte: UInt8) -> [UInt8] { (0..<16).map { $0 == 6 ? 0x40 : $0 == 8 ? 0x80 : byte &+ UInt8($0) } }

    public static func modelArchive() -> [UInt8] {
        CoreDataModelWriter([
            .init("Cocktail", [
                .attribute("id", type: 1100, optional: false),
                .attribute("name", type: 700, optional: false),
                .attribute("favorite", type: 800, optional: false),
                .composite("author", elements: [
                    .attribute("id", type: 1100), .attribute("person", type: 700), .attribute("place", type: 700),
                    .attribute("year", type: 300), .attribute("favorite", type: 700),
                ]),
                .composite("tags", elements: [
                    .attribute("flavors", type: 1000),
                    .composite("origin", elements: [.attribute("country", type: 700), .attribute("region", type: 700)]),
                ], optional: false),
                .composite("ice", elements: [.attribute("ice", type: 700)]),
                .relationship("garnish", to: "Garnish", inverse: "cocktails", toMany: true),
                .relationship("spec", to: "Ingredient", inverse: nil, toMany: true, rule: 2),
            ], uniquenessConstraints: [["name"]]),
            .init("Garnish", [
                .attribute("name", type: 700, optional: false),
                .relationship("cocktails", to: "Cocktail", inverse: "garnish", toMany: true),
            ]),
            .init("Ingredient", [
                .attribute("id", type: 1100, optional: false), .attribute("amount", type: 500, optional: false),
                .composite("unit", elements: [.attribute("unit", type: 700)]),
            ]),
        ], inherited: .fullCopies).archive()
    }

    /// Writes the store at `path`.
    public static func write(at path: String) throws {
        let database = try FixtureDatabase(path)
        defer { database.close() }
        let exec = database.exec, insert = database.insert
        try exec("""
            PRAGMA journal_mode=WAL;
            CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
            CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
            CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB);
            CREATE TABLE ZCOCKTAIL ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZYEAR INTEGER,
              ZFAVORITE INTEGER, ZFAVORITE1 VARCHAR, ZPERSON VARCHAR, ZPLACE VARCHAR, ZICE VARCHAR, ZNAME VARCHAR,
              ZCOUNTRY VARCHAR, ZREGION VARCHAR, ZID BLOB, ZID1 BLOB, ZFLAVORS BLOB );
            CREATE UNIQUE INDEX Z_Cocktail_UNIQUE_name ON ZCOCKTAIL (ZNAME COLLATE BINARY ASC);
            CREATE TABLE ZGARNISH ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR );
            CREATE TABLE ZINGREDIENT ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, Z1SPEC INTEGER,
              ZAMOUNT FLOAT, ZUNIT VARCHAR, ZID BLOB );
            CREATE INDEX ZINGREDIENT_Z1SPEC_INDEX ON ZINGREDIENT (Z1SPEC);
            CREATE TABLE Z_1GARNISH ( Z_1COCKTAILS INTEGER, Z_2GARNISH INTEGER, PRIMARY KEY (Z_1COCKTAILS, Z_2GARNISH) );
            CREATE INDEX Z_1GARNISH_Z_2GARNISH_INDEX ON Z_1GARNISH (Z_2GARNISH, Z_1COCKTAILS);
            CREATE TABLE ACHANGE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCHANGETYPE INTEGER,
              ZENTITY INTEGER, ZENTITYPK INTEGER, ZTRANSACTIONID INTEGER, ZCOLUMNS BLOB );
            CREATE TABLE ATRANSACTION ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZAUTHORTS INTEGER,
              ZBUNDLEIDTS INTEGER, ZCONTEXTNAMETS INTEGER, ZPROCESSIDTS INTEGER, ZTIMESTAMP FLOAT, ZAUTHOR VARCHAR,
              ZBUNDLEID VARCHAR, ZCONTEXTNAME VARCHAR, ZPROCESSID VARCHAR, ZQUERYGEN BLOB );
            CREATE TABLE ATRANSACTIONSTRING ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR );
            """)
        try exec("BEGIN")
        for (name, number) in numbers.sorted(by: { $0.value < $1.value }) {
            try insert("INSERT INTO Z_PRIMARYKEY VALUES (?, ?, 0, 10)", [number, name])
        }
        for (number, name) in [(16001, "CHANGE"), (16002, "TRANSACTION"), (16003, "TRANSACTIONSTRING")] {
            try insert("INSERT INTO Z_PRIMARYKEY VALUES (?, ?, 0, 2)", [number, name])
        }
        try insert("INSERT INTO Z_METADATA VALUES (1, ?, ?)", ["C0FFEE00-0000-4000-8000-0000000000D1", [UInt8]()])
        try insert("INSERT INTO Z_MODELCACHE VALUES (?)", [try CoreDataFixture.deflateRaw(modelArchive())])
        try exec("""
            INSERT INTO ATRANSACTIONSTRING VALUES (1, 16003, 1, 'com.example.cocktails');
            INSERT INTO ATRANSACTION VALUES (1, 16002, 1, NULL, 1, NULL, NULL, 764929412.25, NULL, NULL, NULL, NULL, NULL);
            INSERT INTO ACHANGE VALUES (1, 16001, 1, 0, 1, 1, 1, NULL);
            """)
        // ZYEAR, ZFAVORITE, ZFAVORITE1, ZPERSON, ZPLACE, ZICE, ZNAME, ZCOUNTRY, ZREGION, ZID, ZID1, ZFLAVORS
        let cocktails: [[Any?]] = [
            [1, 2018, 1, "yes", "Kenny", "Denver", "Large cube", "Paloma", "Mexico", "Jalisco", uuid(0x10), uuid(0xA0),
             Array(#"["Grapefruit","Lime"]"#.utf8)],
            // No author at all (every column of the optional struct NULL), no ice.
            [2, nil, 0, nil, nil, nil, nil, "Daiquiri", "Cuba", nil, nil, uuid(0xB0), Array(#"["Lime"]"#.utf8)],
            // An author with only a person and an id; a struct whose nested struct is empty.
            [3, nil, 1, nil, "Sam Ross", nil, "Crushed", "Penicillin", nil, nil, uuid(0x30), uuid(0xC0), nil],
        ]
        for cocktail in cocktails {
            try insert("INSERT INTO ZCOCKTAIL VALUES (?, 1, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", cocktail)
        }
        for (pk, name) in [(1, "Lime wheel"), (2, "Salt rim"), (3, "Mint")] {
            try insert("INSERT INTO ZGARNISH VALUES (?, 2, 1, ?)", [pk, name])
        }
        for (cocktail, garnish) in [(1, 1), (1, 2), (2, 1), (3, 3)] {
            try insert("INSERT INTO Z_1GARNISH VALUES (?, ?)", [cocktail, garnish])
        }
        // Z1SPEC: the cocktail whose spec holds the ingredient (one with none is in no spec).
        let ingredients: [[Any?]] = [[1, 1, 2.0, "oz", uuid(0x50)], [2, 1, 0.75, nil, uuid(0x60)],
                                     [3, 2, 2.0, "oz", uuid(0x70)], [4, nil, 1, "dash", uuid(0x80)]]
        for ingredient in ingredients {
            try insert("INSERT INTO ZINGREDIENT VALUES (?, 3, 1, ?, ?, ?, ?)", ingredient)
        }
        try exec("COMMIT")
    }
}

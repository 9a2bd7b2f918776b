import DataStoreAPI
import Foundation

/// A Core Data store in the shapes Apple's framework writes and our first fixture did not:
/// three levels of inheritance (`Vehicle` ← `Car` ← `SportsCar`) whose model cache carries
/// inherited properties as full copies (or proxies), a to-one into the hierarchy
/// (`Owner.favourite` → `SportsCar`, with the destination's entity column `Z4FAVOURITE` beside
/// it), a one-to-one (`Owner.licence` ↔ `Licence.owner`), two many-to-many relationships named
/// `tags` towards one entity (so the `Tag` side's join columns are numbered: `Z_5TAGS`,
/// `Z_5TAGS1`), a uniqueness constraint (`Z_Vehicle_UNIQUE_vin`), a derived attribute, Decimal
/// and Transformable attributes, and the persistent-history tables (`ATRANSACTION`, `ACHANGE`,
/// `ATRANSACTIONSTRING`). With `swiftData`, every row lives only in the `-wal`, as in a SwiftData
/// store whose app was killed.
public enum GarageFixture {
    public struct Options {
        public var inheritedProperties = CoreDataModelWriter.InheritedProperties.fullCopies
        /// Rows only in the WAL, as SwiftData leaves a `default.store`.
        public var swiftData = false
        public init() {}
    }

    /// Entity numbers, in name order as Core Data gives them.
    public static let numbers = ["Car": 1, "Licence": 2, "Owner": 3, "SportsCar": 4, "Tag": 5, "Vehicle": 6]
    public static let specs: [UInt8] = Array("bplist00-specs".utf8)

    public static var model: [CoreDataModelWriter.Entity] {
        [
            .init("Vehicle", [
                .attribute("vin", type: 700, optional: false), .attribute("color", type: 700),
                .attribute("wheels", type: 100), .attribute("price", type: 400), .attribute("specs", type: 1800),
                .relationship("owner", to: "Owner", inverse: "vehicles", toMany: false),
                .relationship("tags", to: "Tag", inverse: "vehicles", toMany: true),
            ], uniquenessConstraints: [["vin"]]),
            .init("Car", parent: "Vehicle", [.attribute("doors", type: 100)]),
            .init("SportsCar", parent: "Car", [
                .attribute("topSpeed", type: 500),
                .relationship("fans", to: "Owner", inverse: "favourite", toMany: true),
            ]),
            .init("Owner", [
                .attribute("name", type: 700, optional: false), .attribute("nameLower", type: 700, derived: true),
                .relationship("vehicles", to: "Vehicle", inverse: "owner", toMany: true, rule: 2),
                .relationship("favourite", to: "SportsCar", inverse: "fans", toMany: false),
                .relationship("licence", to: "Licence", inverse: "owner", toMany: false),
                .relationship("tags", to: "Tag", inverse: "owners", toMany: true),
            ]),
            .init("Licence", [
                .attribute("number", type: 700, optional: false),
                .relationship("owner", to: "Owner", inverse: "licence", toMany: false),
            ]),
            .init("Tag", [
                .attribute("name", type: 700, optional: false),
                .relationship("vehicles", to: "Vehicle", inverse: "tags", toMany: true),
                .relationship("owners", to: "Owner", inverse: "tags", toMany: true),
            ]),
        ]
    }

    /// Writes the store at `path`.
    public static func write(at path: String, _ options: Options = Options()) throws {
        let staging = options.swiftData ? path + ".building" : path
        let database = try FixtureDatabase(staging)
        if options.swiftData { try database.exec("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0") }
        try database.exec("""
            CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
            CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
            CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB);
            CREATE TABLE ZVEHICLE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZWHEELS INTEGER,
              ZDOORS INTEGER, ZOWNER INTEGER, ZTOPSPEED FLOAT, ZCOLOR VARCHAR, ZVIN VARCHAR, ZPRICE DECIMAL,
              ZSPECS BLOB );
            CREATE TABLE ZOWNER ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZFAVOURITE INTEGER,
              Z4FAVOURITE INTEGER, ZLICENCE INTEGER, ZNAME VARCHAR, ZNAMELOWER VARCHAR );
            CREATE TABLE ZLICENCE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZOWNER INTEGER,
              ZNUMBER VARCHAR );
            CREATE TABLE ZTAG ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR );
            CREATE TABLE Z_3TAGS ( Z_3OWNERS INTEGER, Z_5TAGS INTEGER, PRIMARY KEY (Z_3OWNERS, Z_5TAGS) );
            CREATE TABLE Z_6TAGS ( Z_6VEHICLES INTEGER, Z_5TAGS1 INTEGER, PRIMARY KEY (Z_6VEHICLES, Z_5TAGS1) );
            CREATE INDEX ZVEHICLE_ZOWNER_INDEX ON ZVEHICLE (ZOWNER);
            CREATE INDEX ZOWNER_ZFAVOURITE_INDEX ON ZOWNER (ZFAVOURITE);
            CREATE INDEX Z_3TAGS_Z_5TAGS_INDEX ON Z_3TAGS (Z_5TAGS, Z_3OWNERS);
            CREATE INDEX Z_6TAGS_Z_5TAGS1_INDEX ON Z_6TAGS (Z_5TAGS1, Z_6VEHICLES);
            CREATE UNIQUE INDEX Z_Vehicle_UNIQUE_vin ON ZVEHICLE (ZVIN COLLATE BINARY ASC);
            CREATE TABLE ATRANSACTIONSTRING ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZNAME VARCHAR );
            CREATE TABLE ATRANSACTION ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZAUTHORTS INTEGER,
              ZBUNDLEIDTS INTEGER, ZCONTEXTNAMETS INTEGER, ZPROCESSIDTS INTEGER, ZTIMESTAMP FLOAT, ZAUTHOR VARCHAR,
              ZBUNDLEID VARCHAR, ZCONTEXTNAME VARCHAR, ZPROCESSID VARCHAR, ZQUERYGEN BLOB );
            CREATE TABLE ACHANGE ( Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZCHANGETYPE INTEGER,
              ZENTITY INTEGER, ZENTITYPK INTEGER, ZTRANSACTIONID INTEGER, ZCOLUMNS BLOB );
            """)
        try database.exec("BEGIN")
        for (name, number) in numbers.sorted(by: { $0.value < $1.value }) {
            let parent = ["Car": numbers["Vehicle"], "SportsCar": numbers["Car"]][name] ?? 0
            try database.insert("INSERT INTO Z_PRIMARYKEY VALUES (?, ?, ?, ?)", [number, name, parent, 10])
        }
        try database.insert("INSERT INTO Z_METADATA VALUES (1, ?, ?)", ["C0FFEE00-0000-4000-8000-000000000002", [UInt8]()])
        let archive = CoreDataModelWriter(model, inherited: options.inheritedProperties).archive()
        try database.insert("INSERT INTO Z_MODELCACHE VALUES (?)", [try CoreDataFixture.deflateRaw(archive)])
        try database.exec("COMMIT")
        // The rows in transactions of their own: with swiftData, only in the WAL.
        try database.exec("BEGIN")
        let vehicle = "INSERT INTO ZVEHICLE (Z_PK, Z_ENT, Z_OPT, ZVIN, ZCOLOR, ZWHEELS, ZDOORS, ZTOPSPEED, ZPRICE, "
            + "ZSPECS, ZOWNER) VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?)"
        try database.insert(vehicle, [1, numbers["Vehicle"], "V1", "red", 2, nil, nil, 10.5, specs, 1])
        try database.insert(vehicle, [2, numbers["Car"], "V2", "blue", 4, 4, nil, nil, nil, 1])
        try database.insert(vehicle, [3, numbers["SportsCar"], "V3", "yellow", 4, 2, 300.5, 99999.99, nil, 2])
        try database.insert(vehicle, [4, numbers["SportsCar"], "V4", nil, nil, nil, nil, nil, nil, nil])
        let owner = "INSERT INTO ZOWNER (Z_PK, Z_ENT, Z_OPT, ZNAME, ZNAMELOWER, ZFAVOURITE, Z4FAVOURITE, ZLICENCE) "
            + "VALUES (?, 3, 1, ?, ?, ?, ?, ?)"
        try database.insert(owner, [1, "Ada", "ada", 3, numbers["SportsCar"], 1])
        try database.insert(owner, [2, "Bo", "bo", nil, nil, nil])
        try database.insert("INSERT INTO ZLICENCE VALUES (1, 2, 1, 1, 'L-1')", [])
        try database.insert("INSERT INTO ZLICENCE VALUES (2, 2, 1, NULL, 'L-2')", [])
        try database.insert("INSERT INTO ZTAG VALUES (1, 5, 1, 'fast')", [])
        try database.insert("INSERT INTO ZTAG VALUES (2, 5, 1, 'old')", [])
        for (ownerKey, tag) in ownerTags { try database.insert("INSERT INTO Z_3TAGS VALUES (?, ?)", [ownerKey, tag]) }
        for (vehicleKey, tag) in vehicleTags {
            try database.insert("INSERT INTO Z_6TAGS VALUES (?, ?)", [vehicleKey, tag])
        }
        try database.insert("INSERT INTO ATRANSACTIONSTRING VALUES (1, 16001, 1, 'NSCoreDataCoreSpotlightExporter')", [])
        try database.insert("INSERT INTO ATRANSACTION (Z_PK, Z_ENT, Z_OPT, ZTIMESTAMP) VALUES (1, 16002, 1, 7e8)", [])
        try database.insert("INSERT INTO ACHANGE VALUES (1, 16003, 1, 0, 6, 1, 1, NULL)", [])
        try database.exec("COMMIT")
        if options.swiftData {
            for suffix in ["", "-wal"] {
                try? FileManager.default.removeItem(atPath: path + suffix)
                try FileManager.default.copyItem(atPath: staging + suffix, toPath: path + suffix)
            }
            database.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: staging + suffix) }
        }
    }

    /// (owner, tag) pairs of `Owner.tags` and (vehicle, tag) pairs of `Vehicle.tags`.
    public static let ownerTags = [(1, 1), (2, 2), (2, 1)]
    public static let vehicleTags = [(3, 1), (4, 1), (1, 2)]

    /// The vehicles a copy must hold, by key: every attribute of the hierarchy (`pk`, `entity`,
    /// and the attributes of the entities each item is not: null).
    public static func expectedVehicles() -> [Int64: [String: Value]] {
        [
            1: ["pk": .int(1), "entity": .string("Vehicle"), "vin": .string("V1"), "color": .string("red"),
                "wheels": .int(2), "doors": .null, "topSpeed": .null, "price": .double(10.5), "specs": .bytes(specs),
                "owner": .int(1)],
            2: ["pk": .int(2), "entity": .string("Car"), "vin": .string("V2"), "color": .string("blue"),
                "wheels": .int(4), "doors": .int(4), "topSpeed": .null, "price": .null, "specs": .null,
                "owner": .int(1)],
            3: ["pk": .int(3), "entity": .string("SportsCar"), "vin": .string("V3"), "color": .string("yellow"),
                "wheels": .int(4), "doors": .int(2), "topSpeed": .double(300.5), "price": .double(99999.99),
                "owner": .int(2)],
            4: ["pk": .int(4), "entity": .string("SportsCar"), "vin": .string("V4"), "color": .null, "owner": .null],
        ]
    }
}

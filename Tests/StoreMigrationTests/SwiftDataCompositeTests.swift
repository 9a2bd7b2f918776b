@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// SwiftData's composite attributes: a stored struct, a nested one and an enum
/// come in as one attribute per element, in a store with a many-to-many, a to-many without an
/// inverse and persistent history, exactly, by every command that reads, the file untouched.

private func uuid(_ byte: UInt8) -> Value { .uuid(UUID(bytes: SwiftDataFixture.uuid(byte))!) }

@Test func swiftDataCompositeAttributesAreReadOneAttributePerElement() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("default.store")
    try SwiftDataFixture.write(at: path)
    let before = try Data(contentsOf: URL(fileURLWithPath: path))
    let source = "coredata:\(path)"
    let inspect = try runCLI(["inspect", source])
    #expect(inspect.status == 0, "\(inspect.errors)")
    for line in ["  author_id: uuid?", "  author_year: int?", "  author_favorite: string?", "  favorite: bool",
                 "  id: uuid", "  tags_flavors: bytes?", "  tags_origin_country: string?", "  ice: string?",
                 "  unit: string?", "  Cocktail_spec: int?"] {
        #expect(inspect.output.contains(line + "\n"), "\(line): \(inspect.output)")
    }
    // The same schema, line for line, from another process.
    #expect(try runCLI(["inspect", source]).output == inspect.output)
    for kind in [StoreKind.sqlite, .lmdb, .jsonl] {
        let destination = dir.location(kind, "copy")
        let copy = try runCLI(["copy", "--from", source, "--to", destination.description, "--progress", "none"])
        #expect(copy.status == 0, "\(kind): \(copy.errors)")
        let copied = try contents(destination)
        let cocktails = Dictionary(uniqueKeysWithValues: (copied["Cocktail"] ?? []).map { ($0["pk"], $0) })
        #expect(cocktails.count == 3)
        let paloma = try #require(cocktails[.int(1)])
        #expect(paloma["author_id"] == uuid(0x10) && paloma["id"] == uuid(0xA0), "ZID is author.id, ZID1 is id")
        #expect(paloma["favorite"] == .bool(true) && paloma["author_favorite"] == .string("yes"),
                "ZFAVORITE is the Bool, ZFAVORITE1 the element")
        #expect(paloma["author_person"] == .string("Kenny") && paloma["author_year"] == .int(2018))
        #expect(paloma["tags_flavors"] == .bytes(Array(#"["Grapefruit","Lime"]"#.utf8)))
        #expect(paloma["tags_origin_country"] == .string("Mexico") && paloma["tags_origin_region"] == .string("Jalisco"))
        #expect(paloma["ice"] == .string("Large cube"))
        let daiquiri = try #require(cocktails[.int(2)])
        #expect(["author_id", "author_person", "author_place", "author_year", "author_favorite", "ice"]
            .allSatisfy { daiquiri[$0] == .null })
        #expect(daiquiri["id"] == uuid(0xB0) && daiquiri["favorite"] == .bool(false))
        let penicillin = try #require(cocktails[.int(3)])
        #expect(penicillin["author_id"] == uuid(0x30) && penicillin["author_person"] == .string("Sam Ross"))
        #expect(penicillin["tags_flavors"] == .null && penicillin["tags_origin_country"] == .null)
        // The to-many without an inverse, through the inverse the reader gives it.
        let specs = Dictionary(uniqueKeysWithValues: (copied["Ingredient"] ?? []).map { ($0["pk"], $0["Cocktail_spec"]) })
        #expect(specs == [.int(1): .int(1), .int(2): .int(1), .int(3): .int(2), .int(4): .null])
        #expect(copied["Ingredient"]?.first { $0["pk"] == .int(2) }?["unit"] == .null)
        #expect(copied["Cocktail_garnish"]?.count == 4, "the many-to-many's pairs")
        #expect(copied.keys.allSatisfy { !$0.hasPrefix("A") && !$0.contains("TRANSACTION") }, "no history tables")
        for command in ["verify", "sync", "diff"] {
            let result = try runCLI([command, "--from", source, "--to", destination.description])
            #expect(result.status == 0, "\(kind) \(command): \(result.errors)")
        }
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the file is untouched")
}

/// A model whose composite the store's table does not hold, and a model file that gives a
/// composite without its elements: refused in one line, naming them, with nothing written.
@Test func compositeAttributesThatDoNotMatchTheStoreAreRefused() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("default.store")
    try SwiftDataFixture.write(at: path)
    _ = try runCommand("/usr/bin/sqlite3", [path, "ALTER TABLE ZCOCKTAIL DROP COLUMN ZREGION"])
    let destination = dir.location(.lmdb, "never")
    let result = try runCLI(["copy", "--from", "coredata:\(path)", "--to", destination.description])
    #expect(result.status == 2 && result.errors.contains("'Cocktail.tags.origin.region' has no column ZREGION"),
            "\(result.errors)")
    #expect(result.errors.split(separator: "\n").count == 1)
    _ = try runCommand("/usr/bin/sqlite3", [path, "ALTER TABLE ZCOCKTAIL DROP COLUMN ZID1"])
    let clash = try runCLI(["inspect", "coredata:\(path)"])
    #expect(clash.status == 2 && clash.errors.contains("share the column name ZID"), "\(clash.errors)")
    let model = dir.path("Model.xcdatamodel")
    try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
    try Data("""
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel">
            <entity name="Cocktail"><attribute name="name" attributeType="String"/>
                <attribute name="author" optional="YES" attributeType="Composite" composite="Author"/></entity>
            <entity name="Garnish"><attribute name="name" attributeType="String"/></entity>
            <entity name="Ingredient"><attribute name="amount" attributeType="Double"/></entity>
        </model>
        """.utf8).write(to: URL(fileURLWithPath: model + "/contents"))
    let fromFile = try runCLI(["copy", "--from", "coredata:\(path)", "--model", model, "--to", destination.description])
    #expect(fromFile.status == 2 && fromFile.errors.contains("'Cocktail.author' is a composite whose elements the "
        + "model does not give"), "\(fromFile.errors)")
    #expect(!FileManager.default.fileExists(atPath: destination.path))
}

@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import LMDBStore
import StoreMigration
import Testing

/// An LMDB item stored under a key other than the one its record carries is damage to every
/// command that reads it: `check` and `copy` refuse it, and so does `verify`, from either side,
/// instead of finding the stores equal.
@Test func verifyRefusesAnLMDBItemStoredUnderAnotherKey() throws {
    let dir = try TemporaryDirectory()
    let damaged = dir.location(.lmdb, "damaged")
    let good = dir.location(.sqlite, "good")
    try DemoData.seed(damaged, items: 100, seed: 8)
    _ = try Migrator.copy(from: damaged, to: good)
    let engine = try LMDBEngine(path: damaged.path, schema: nil)
    let product = try #require(engine.schema.entity(named: "Product"))
    try engine.withWriter { writer in
        let first = try #require(try writer.scan(product, after: nil, limit: 1).first)
        #expect(try writer.delete(key: PrimaryKey(first["sku"]), in: product))
        try writer.put(first, key: PrimaryKey(.string("\u{FF}moved")), in: product)
    }
    try engine.close()
    for command in [["check", damaged.description],
                    ["verify", "--from", damaged.description, "--to", good.description],
                    ["verify", "--from", good.description, "--to", damaged.description],
                    ["copy", "--from", damaged.description, "--to", dir.location(.sqlite, "copy").description]] {
        let result = try runCLI(command + (command[0] == "check" ? [] : ["--progress", "none"]))
        #expect(result.status == 2, "\(command): exit \(result.status) \(result.output)\(result.errors)")
        #expect(result.errors.contains("Product"), "\(command): \(result.errors)")
    }
}

@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import LMDBStore
import StoreMigration
import Testing

/// Changes a demo store the way a program outside the package would, without a change-feed
/// entry: through the `sqlite3` shell for SQLite, through the engine below the store (which
/// records no feed entry) for LMDB. Changes one product's title and deletes the last order
/// with its pairs of products, as a careful program would (foreign keys are off in the shell).
func writeOutsideThePackage(_ location: StoreLocation) throws {
    switch location.kind {
    case .sqlite:
        _ = try runCommand("/usr/bin/sqlite3", [location.path, """
            UPDATE "Product" SET "title" = 'changed outside' WHERE "sku" = (SELECT min("sku") FROM "Product");
            DELETE FROM "Order_products" WHERE "source" = (SELECT max("id") FROM "Order");
            DELETE FROM "Order" WHERE "id" = (SELECT max("id") FROM "Order");
            """])
    case .lmdb:
        let engine = try LMDBEngine(path: location.path, schema: nil)
        defer { try? engine.close() }
        let product = try #require(engine.schema.entity(named: "Product"))
        let order = try #require(engine.schema.entity(named: "Order"))
        let pairs = try #require(engine.schema.entity(named: "Order_products"))
        try engine.withWriter { writer in
            let first = try #require(try writer.scan(product, after: nil, limit: 1).first)
            var values = first.values
            values["title"] = "changed outside"
            try writer.put(try product.normalize(Record(values)), key: PrimaryKey(first["sku"]), in: product)
            let orders = try writer.fetch(FetchRequest("Order"), in: order)
            let last = try #require(orders.last)
            for pair in try writer.fetch(FetchRequest("Order_products", filter: Field("source") == last["id"]), in: pairs) {
                #expect(try writer.delete(key: PrimaryKey(pair["id"]), in: pairs))
            }
            #expect(try writer.delete(key: PrimaryKey(last["id"]), in: order))
        }
    default:
        Issue.record("no outside writer for \(location.kind)")
    }
}

/// A follow that starts from a position stored in the destination still finds writes made to
/// the source outside the package since that position (they have no feed entry): `sync
/// --follow` ends with a destination that `verify` finds equal, SQLite into LMDB and back.
@Test(arguments: [(StoreKind.sqlite, StoreKind.lmdb), (.lmdb, .sqlite)])
func aFollowFromAStoredPositionFindsWritesMadeOutsideThePackage(_ kinds: (StoreKind, StoreKind)) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(kinds.0, "source")
    let destination = dir.location(kinds.1, "destination")
    try DemoData.seed(source, items: 300, seed: 5)
    let arguments = ["--from", source.description, "--to", destination.description, "--progress", "none"]
    let copy = try runCLI(["copy"] + arguments + ["--follow", "--until-idle", "0.3"])
    #expect(copy.status == 0, "\(copy.errors)")
    #expect(!copy.output.contains("caught up"), "the copy's own position is followed: \(copy.output)")

    try writeOutsideThePackage(source)
    let follow = try runCLI(["sync"] + arguments + ["--follow", "--until-idle", "0.3"])
    #expect(follow.status == 0, "\(follow.errors)")
    #expect(follow.output.contains("caught up by a merge-join sync: a follow starts by comparing"), "\(follow.output)")
    let verify = try runCLI(["verify"] + arguments)
    #expect(verify.status == 0 && verify.output.contains("every item equals"), "\(verify.output)\(verify.errors)")
}

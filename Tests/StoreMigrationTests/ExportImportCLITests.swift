import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// The demo graph exported with its orders nested, changed (a customer's orders dropped, one
/// renamed, a new customer with an order), then imported: `--dry-run` leaves the store's files
/// byte for byte as they were and prints, entity by entity, the counts the real run then prints;
/// an export in snake_case imported back changes nothing.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func aNestedImportDryRunWritesNothingAndCountsWhatTheRunDoes(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(kind, "store")
    try DemoData.seed(store, items: 200, seed: 9)
    let exported = dir.path("customers.json")
    let export = try runCLI(["export", "--from", store.description, "--entity", "Customer", "--snake-case",
                             "-o", exported])
    #expect(export.status == 0, "\(export.errors)")
    let unchanged = try runCLI(["import", "--to", store.description, "--entity", "Customer", exported])
    #expect(unchanged.status == 0, "\(unchanged.errors)")
    #expect(unchanged.output.contains(": 0 deleted, 0 inserted, 0 updated,"), "\(unchanged.output)")
    #expect(unchanged.output.contains("Order: 0 deleted, 0 unlinked, 0 inserted, 0 updated, 0 linked"),
            "\(unchanged.output)")

    let data = try Data(contentsOf: URL(fileURLWithPath: exported))
    var customers = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
    let withOrders = try #require(customers.firstIndex { ($0["orders"] as? [Any])?.isEmpty == false })
    customers[withOrders]["orders"] = [Any]()
    customers[0]["name"] = "Renamed"
    customers.removeLast()
    customers.append(["id": "00000000-0000-0000-0000-0000000000aa", "name": "New", "email": "new@example.com",
                      "vip": false, "balance": 0, "joined_at": "2024-05-01",
                      "orders": [["id": 999_999, "quantity": 1, "total": 2.5, "placed_at": 1_714_521_600_000,
                                  "products_ids": ["SKU-000001"]]]])
    let changed = dir.path("changed.json")
    try JSONSerialization.data(withJSONObject: customers).write(to: URL(fileURLWithPath: changed))

    let files = kind == .lmdb ? [store.path + "/data.mdb"] : [store.path, store.path + "-wal"]
    let before = files.map(fileDigest)
    let arguments = ["import", "--to", store.description, "--entity", "Customer", changed]
    let dryRun = try runCLI(arguments + ["--dry-run"])
    #expect(dryRun.status == 0, "\(dryRun.errors)")
    #expect(files.map(fileDigest) == before, "the dry run wrote nothing")
    let real = try runCLI(arguments)
    #expect(real.status == 0, "\(real.errors)")
    func counts(_ output: String) -> [String] {
        output.replacingOccurrences(of: "would be ", with: "").replacingOccurrences(of: " (dry run: nothing written)",
                                                                                    with: "")
            .split(separator: "\n").map(String.init)
    }
    #expect(counts(dryRun.output) == counts(real.output), "\(dryRun.output)\n---\n\(real.output)")
    #expect(real.output.contains(" 1 deleted, 1 inserted, 1 updated,"), "\(real.output)")
    #expect(real.output.contains("Order:"), "\(real.output)")
    let opened = try store.open(schema: nil)
    defer { try? opened.close() }
    let newOrder = try opened.read { try $0.get("Order", key: 999_999) }
    #expect(newOrder?["customer"] == .uuid(UUID(uuidString: "00000000-0000-0000-0000-0000000000aa")!))
    #expect(try opened.read { try $0.related("Order", key: 999_999, "products").map(\.["sku"]) } == ["SKU-000001"])
}

/// An export's mistakes get one line that names what is wrong.
@Test func exportMistakesGetOneLineNamingWhatIsWrong() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.sqlite, "store")
    try DemoData.seed(store, items: 20, seed: 1)
    for (arguments, expected) in [
        (["--entity", "Nope"], "no entity 'Nope'"),
        (["--entity", "Customer", "--relationships", "deep"], "--relationships must be nested, ids or none"),
        (["--entity", "Customer", "--where", "vip == 3"], "'vip' is a bool"),
        (["--entity", "Customer", "--where", "ratng > 3"], "no attribute 'ratng'"),
        (["--entity", "Customer", "--where", "name >"], "a value expected"),
    ] {
        let result = try runCLI(["export", "--from", store.description] + arguments)
        #expect(result.status == (arguments.contains("deep") ? 64 : 2), "\(arguments): \(result.errors)")
        let lines = result.errors.split(separator: "\n").filter { !$0.hasPrefix("Usage") && !$0.hasPrefix("  See") }
        #expect(lines.first?.contains(expected) == true, "\(arguments): \(result.errors)")
    }
}

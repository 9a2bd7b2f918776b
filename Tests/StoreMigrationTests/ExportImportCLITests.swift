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
        (["--entity", "Customer", "-o", "/nonexistent-directory/x.json"], "/nonexistent-directory does not exist"),
    ] {
        let result = try runCLI(["export", "--from", store.description] + arguments)
        #expect(result.status == (arguments.contains("deep") ? 64 : 2), "\(arguments): \(result.errors)")
        let lines = result.errors.split(separator: "\n").filter { !$0.hasPrefix("Usage") && !$0.hasPrefix("  See") }
        #expect(lines.first?.contains(expected) == true, "\(arguments): \(result.errors)")
    }
}

extension DataStore {
    /// The block's result, with the store closed afterwards.
    func readAndClose<T>(_ body: (ReadAccessor) throws -> T) throws -> T {
        defer { try? close() }
        return try read(body)
    }
}

/// A nested import killed with SIGKILL part way, then run again, ends with the store and the
/// counts of an import that was never interrupted, and a rejects file that names each refused
/// object and why, on SQLite and LMDB.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"),
      arguments: runsThoroughTests ? [(StoreKind.sqlite, 300), (.lmdb, 300), (.sqlite, 3_000), (.lmdb, 3_000)]
          : [(StoreKind.sqlite, 300), (.lmdb, 3_000)])
func aNestedImportKilledWithSIGKILLGoesOnAndEndsAsAnUninterruptedOne(_ kind: StoreKind, _ imported: Int) throws {
    let dir = try TemporaryDirectory()
    // Customers with nested orders (each referring to a product by key, some further on), and
    // every 500th customer without a name, which the store refuses.
    var customers: [String] = []
    for i in 0..<6_000 {
        let id = String(format: "00000000-0000-0000-0000-%012d", i)
        let name = i % 500 == 7 ? "null" : "\"customer \(i)\""
        let orders = (0..<3).map { k in
            #"{"id": \#(i * 3 + k), "quantity": \#(k + 1), "total": \#(Double(k) + 0.5), "placed_at": "2024-01-0\#(k + 1)","#
                + #""products_ids": ["SKU-\#(String(format: "%06d", (i + k) % 50))"]}"#
        }
        customers.append(#"{"id": "\#(id)", "name": \#(name), "email": "c\#(i)@example.com", "vip": false,"#
            + #""balance": \#(i), "joined_at": 1700000000, "orders": [\#(orders.joined(separator: ","))]}"#)
    }
    let payload = dir.path("customers.json")
    try Data(("[" + customers.joined(separator: ",\n") + "]").utf8).write(to: URL(fileURLWithPath: payload))
    func seeded(_ name: String) throws -> StoreLocation {
        let location = dir.location(kind, name)
        let store = try location.open(schema: DemoData.schema)
        try store.writeSync { w in
            for p in 0..<50 {
                try w.insert(["sku": .string(String(format: "SKU-%06d", p)), "title": "p", "price": 1.0, "stock": 1],
                             into: "Product")
            }
        }
        try store.close()
        return location
    }
    let reference = try seeded("reference")
    let straight = try runCLI(["import", "--to", reference.description, "--entity", "Customer", "--batch-size", "100",
                               payload])
    #expect(straight.status == 0, "\(straight.errors)")

    let killed = try seeded("killed")
    let rejects = dir.path("rejects.jsonl")
    let arguments = ["import", "--to", killed.description, "--entity", "Customer", "--batch-size", "100",
                     "--rejects", rejects, payload]
    let (process, _, _) = try startCLI(arguments)
    // Killed once the store holds `imported` customers, in the middle of a batch or between two.
    let deadline = Date().addingTimeInterval(60)
    while Date() < deadline {
        let count = try? killed.openSource(alreadyChecked: true).readAndClose { try $0.count(FetchRequest("Customer")) }
        if let count, count >= imported { break }
        Thread.sleep(forTimeInterval: 0.02)
    }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    let again = try runCLI(arguments)
    #expect(again.status == 0, "\(again.errors)")
    #expect(again.output.contains("went on after"), "killed after \(imported) customers: \(again.output)")
    func counts(_ output: String) -> [String] {
        // Without the store's path and the note that the run went on from a checkpoint.
        output.split(separator: "\n").map {
            $0.replacingOccurrences(of: #"^import .* Customer: "#, with: "", options: .regularExpression)
                .replacingOccurrences(of: #" \(went on after \d+ objects of an interrupted run\)"#, with: "",
                                      options: .regularExpression)
        }
    }
    #expect(counts(again.output) == counts(straight.output), "\(again.output)\n---\n\(straight.output)")
    #expect(try contents(killed).filter { !$0.key.hasPrefix("Order_products") }
        == contents(reference).filter { !$0.key.hasPrefix("Order_products") })
    let opened = try killed.open(schema: nil)
    defer { try? opened.close() }
    let pairs = try opened.read { try $0.related("Order", key: 301, "products").map(\.["sku"]) }
    #expect(pairs == ["SKU-000001"], "\(pairs)")
    let lines = try String(contentsOfFile: rejects, encoding: .utf8).split(separator: "\n")
    #expect(lines.count == 12, "\(lines.count) rejects")
    #expect(lines.allSatisfy { $0.contains(#""reason":"#) && $0.contains("name") && $0.contains(#""object":"#) })
}

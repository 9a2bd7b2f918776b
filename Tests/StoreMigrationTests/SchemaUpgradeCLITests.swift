import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// The plan the README shows: versions 2 and 3 of the demo store.
let demoPlan = SchemaPlan([
    .init(2, [
        .addAttribute(entity: "Order", attribute: Attribute("comment", .string, optional: true)),
        .addAttribute(entity: "Product", attribute: Attribute("active", .bool, default: .bool(true))),
        .renameAttribute(entity: "Customer", from: "vip", to: "isVIP"),
        .addIndex(entity: "Order", index: Index("byPlaced", on: ["placedAt"])),
    ]),
    .init(3, [
        .changeType(entity: "Order", attribute: "quantity", to: .double),
        .renameEntity(from: "Order", to: "Purchase"),
    ]),
])

func writePlan(_ plan: SchemaPlan, in dir: TemporaryDirectory, name: String = "plan.json") throws -> String {
    let path = dir.path(name)
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(plan).write(to: URL(fileURLWithPath: path))
    return path
}

@Test(arguments: ["sqlite", "lmdb", "memory"])
func upgradeAppliesAPlanWithDryRunHistoryAndExitCodes(_ kind: String) throws {
    let dir = try TemporaryDirectory()
    let store = kind == "memory" ? StoreLocation(kind: .memory, path: "up-\(UUID().uuidString)")
        : dir.location(StoreKind(rawValue: kind), "demo")
    try DemoData.seed(store, items: 3_000, seed: 5)
    let plan = try writePlan(demoPlan, in: dir)
    if kind != "memory" {
        // The in-memory kind lives in one process: the CLI cannot see this test's database.
        let before = fileDigest(store.path)
        let dry = try runCLI(["upgrade", "\(store)", "--plan", plan, "--dry-run"])
        #expect(dry.status == 0 && dry.output.contains("would upgrade") && dry.output.contains("v3: rename entity Order "
            + "to Purchase"), "\(dry.output)\(dry.errors)")
        #expect(fileDigest(store.path) == before, "a dry run writes nothing")
        let run = try runCLI(["upgrade", "\(store)", "--plan", plan, "--progress", "none"])
        #expect(run.status == 0 && run.output.contains("upgraded \(store) from schema version 1 to 3"),
                "\(run.output)\(run.errors)")
        let inspect = try runCLI(["inspect", "\(store)"])
        #expect(inspect.output.contains("schema version 3") && inspect.output.contains("version 1 -> 3: add attribute "
            + "Order.comment"), "\(inspect.output)")
        let again = try runCLI(["upgrade", "\(store)", "--plan", plan])
        #expect(again.status == 0 && again.output.contains("nothing to apply"), "\(again.output)")
        // An older plan than the store, a damaged plan, a step that cannot apply: one line, exit 2.
        let older = try writePlan(SchemaPlan([.init(1, [])]), in: dir, name: "older.json")
        let newer = try runCLI(["upgrade", "\(store)", "--plan", older])
        #expect(newer.status == 2 && newer.errors.contains("newer than the plan's last version 1"), "\(newer.errors)")
        try Data("{\"versions\": [{\"version\": 4, \"steps\": [{\"dropEverything\": {}}]}]}".utf8)
            .write(to: URL(fileURLWithPath: dir.path("bad.json")))
        let bad = try runCLI(["upgrade", "\(store)", "--plan", dir.path("bad.json")])
        #expect(bad.status == 2 && bad.errors.split(separator: "\n").count == 1 && bad.errors.contains("bad.json"),
                "\(bad.errors)")
        let wrong = try writePlan(SchemaPlan([.init(4, [.removeAttribute(entity: "Order", name: "total")])]), in: dir,
                                  name: "wrong.json")
        let unknown = try runCLI(["upgrade", "\(store)", "--plan", wrong])
        #expect(unknown.status == 2 && unknown.errors.contains("no entity 'Order'"), "\(unknown.errors)")
    } else {
        let report = try SchemaUpgrade.upgrade(store, plan: demoPlan)
        #expect(report.fromVersion == 1 && report.toVersion == 3 && report.steps.count == 6)
    }
    let opened = try store.open(schema: nil)
    defer { try? opened.close() }
    #expect(opened.schema.version == 3)
    #expect(opened.schema.entity(named: "Purchase")?.attribute(named: "quantity")?.type == .double)
    #expect(try (opened as? Store)?.schemaHistory().map(\.toVersion) == [3])
}

/// `copy --plan` moves a store to another backend and upgrades it; it equals the source upgraded in place.
@Test func copyWithAPlanEqualsAnUpgradeInPlace() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 3_000, seed: 8)
    let plan = try writePlan(demoPlan, in: dir)
    let destination = dir.location(.lmdb, "moved")
    let copy = try runCLI(["copy", "--from", "\(source)", "--to", "\(destination)", "--plan", plan, "--progress", "none"])
    #expect(copy.status == 0 && copy.output.contains("upgraded \(destination) from schema version 1 to 3"),
            "\(copy.output)\(copy.errors)")
    let inPlace = dir.location(.sqlite, "inplace")
    try FileManager.default.copyItem(atPath: source.path, toPath: inPlace.path)
    _ = try SchemaUpgrade.upgrade(inPlace, plan: demoPlan)
    let verify = try runCLI(["verify", "--from", "\(inPlace)", "--to", "\(destination)", "--progress", "none"])
    #expect(verify.status == 0, "\(verify.output)\(verify.errors)")
}

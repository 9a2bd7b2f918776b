@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import JSONLStore
import StoreMigration
import Testing

/// Orders deleted in the `sqlite3` shell (where foreign keys are off unless asked for) leave
/// their pairs of products dangling: `check` exits 2 naming each, a copy refuses with the same
/// message, and a copy told not to check its source copies, then refuses to finish its
/// destination, naming them again.
@Test func danglingReferencesWrittenOutsideThePackageAreNamedByCheckAndCopy() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.sqlite, "edited")
    try DemoData.seed(store, items: 500, seed: 3)
    let pairs = try runCommand("/usr/bin/sqlite3", [store.path, """
        SELECT count(*) FROM "Order_products" WHERE "source" IN (1, 2);
        DELETE FROM "Order" WHERE "id" IN (1, 2);
        """]).trimmingCharacters(in: .whitespacesAndNewlines)
    let named = "refers through 'source' to 'Order' 1, which does not exist"

    let check = try runCLI(["check", store.description])
    #expect(check.status == 2, "\(check.output)\(check.errors)")
    #expect(check.errors.contains("holds \(pairs) dangling references") && check.errors.contains(named),
            "\(check.errors)")

    let copy = try runCLI(["copy", "--from", store.description, "--to", dir.location(.lmdb, "out").description,
                           "--progress", "none"])
    #expect(copy.status == 2 && copy.errors.contains(named), "\(copy.errors)")
    #expect(!dir.location(.lmdb, "out").exists, "nothing was created")

    // Into every kind of destination, a JSON Lines file (written whole) included.
    for kind in [StoreKind.lmdb, .sqlite, .jsonl] {
        let unchecked = dir.location(kind, "unchecked")
        let forced = try runCLI(["copy", "--from", store.description, "--to", unchecked.description, "--no-check",
                                 "--progress", "none"])
        #expect(forced.status == 2, "\(kind): \(forced.output)\(forced.errors)")
        #expect(forced.errors.contains("left unfinished") && forced.errors.contains(named), "\(kind): \(forced.errors)")
        #expect(!opensAsComplete(unchecked), "\(kind): the destination does not open as a finished store")
        #expect(try Migrator.copyState(of: unchecked) == .unfinished, "\(kind)")
    }
}

/// `check` of a JSON Lines store reads each entity once to check references: time grows with
/// the items, not with their square (a check of 4,000 items took 7.8 s, 1,000 took 0.6 s, when
/// each reference was a point get that read up to 1,024 lines).
@Test func checkingTheReferencesOfAJSONLinesStoreReadsEachEntityOnce() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 8_000, seed: 6)
    let file = try StoreLocation(parsing: "jsonl:\(dir.path("copy.jsonl.gz"))")
    try Migrator.copy(from: source, to: file)
    let store = try JSONLinesStore(path: file.path)
    defer { try? store.close() }
    // A JSON Lines store is read in its lines: count the lines the check decodes.
    let report = try store.read { try $0.checkReferences() }
    #expect(report.danglingCount == 0 && report.checked > 8_000, "\(report)")
    // Each referring entity once, and each entity referred to once for its keys: at most two
    // passes over the file.
    #expect(store.linesDecoded <= 2 * 8_000, "\(store.linesDecoded) lines decoded for 8,000 items")
}

@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
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

    let unchecked = dir.location(.lmdb, "unchecked")
    let forced = try runCLI(["copy", "--from", store.description, "--to", unchecked.description, "--no-check",
                             "--progress", "none"])
    #expect(forced.status == 2, "\(forced.output)\(forced.errors)")
    #expect(forced.errors.contains("left unfinished") && forced.errors.contains(named), "\(forced.errors)")
    #expect(!opensAsComplete(unchecked), "the destination does not open as a finished store")
}

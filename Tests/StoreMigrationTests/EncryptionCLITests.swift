@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import StoreMigration
import Testing

/// `migrate-store` with encrypted stores: copies in and out of encryption, rekeying, and a
/// rekey killed at each phase.

private func keyFile(_ dir: TemporaryDirectory, _ name: String, _ contents: String) throws -> String {
    let path = dir.path(name)
    try Data((contents + "\n").utf8).write(to: URL(fileURLWithPath: path))
    return path
}

private let hexKey1 = String(repeating: "0123456789abcdef", count: 4)
private let hexKey2 = String(repeating: "fedcba9876543210", count: 4)

@Test func aStoreCopiedPlainToEncryptedToRekeyedToPlainEqualsTheOriginal() throws {
    let dir = try TemporaryDirectory()
    let k1 = try keyFile(dir, "k1", hexKey1)
    let k2 = try keyFile(dir, "k2", "a passphrase, not hexadecimal")
    let original = dir.location(.sqlite, "original")
    try DemoData.seed(original, items: 400, seed: 5)

    let encrypted = dir.location(.lmdb, "encrypted")
    #expect(try runCLI(["copy", "--from", original.description, "--to", encrypted.description, "--to-key-file", k1,
                        "--progress", "none"]).status == 0)
    let other = dir.location(.sqlite, "other")
    #expect(try runCLI(["copy", "--from", encrypted.description, "--key-file", k1, "--to", other.description,
                        "--to-key-file", k2, "--progress", "none"]).status == 0)
    // Verify and check take the key as every command does.
    #expect(try runCLI(["verify", "--from", original.description, "--to", other.description, "--to-key-file", k2])
        .status == 0)
    let check = try runCLI(["check", other.description, "--key-file", k2])
    #expect(check.status == 0 && check.output.contains("no damage found"), "\(check.errors)")
    // Rekey in place: the passphrase store gets the raw key.
    let rekey = try runCLI(["rekey", other.description, "--key-file", k2, "--new-key-file", k1, "--progress", "none"])
    #expect(rekey.status == 0, "\(rekey.errors)")
    #expect(rekey.output.contains("rekeyed, verified and swapped into place"))
    #expect(try runCLI(["inspect", other.description, "--key-file", k2]).errors.contains("the key does not open"))
    let back = dir.location(.sqlite, "back")
    #expect(try runCLI(["copy", "--from", other.description, "--key-file", k1, "--to", back.description,
                        "--progress", "none"]).status == 0)
    #expect(try contents(back) == contents(original))
    #expect(try contents(encrypted.with(key: StoreKey(contentsOfFile: k1))) == contents(original))
    #expect(!FileManager.default.fileExists(atPath: other.path + ".rekeyed"))
}

@Test func rekeyRefusesWhatWouldLoseTheStoreAndLeavesItAsItWas() throws {
    let dir = try TemporaryDirectory()
    let k1 = try keyFile(dir, "k1", hexKey1)
    let k2 = try keyFile(dir, "k2", hexKey2)
    let store = dir.location(.sqlite, "store")
    try DemoData.seed(store, items: 50, seed: 3)
    let digest = try contents(store)
    // No new key: refused, rather than read as "decrypt".
    let noKey = try runCLI(["rekey", store.description])
    #expect(noKey.status != 0 && noKey.errors.contains("--new-key-file"))
    // A wrong current key: wrongKey, nothing written.
    #expect(try runCLI(["rekey", store.description, "--new-key-file", k1, "--progress", "none"]).status == 0)
    let wrong = try runCLI(["rekey", store.description, "--key-file", k2, "--new-key-file", k1, "--progress", "none"])
    #expect(wrong.status == 2 && wrong.errors.contains("the key does not open this store"), "\(wrong.errors)")
    #expect(try contents(store.with(key: StoreKey(contentsOfFile: k1))) == digest)
    // A JSON Lines store, written whole, is not rekeyed in place: rekey says to copy it.
    let jsonl = "jsonl:\(dir.path("x.jsonl"))"
    #expect(try runCLI(["copy", "--from", store.description, "--key-file", k1, "--to", jsonl, "--to-key-file", k2,
                        "--progress", "none"]).status == 0)
    let rekeyJSONL = try runCLI(["rekey", jsonl, "--key-file", k2, "--new-key-file", k1, "--progress", "none"])
    #expect(rekeyJSONL.status == 2 && rekeyJSONL.errors.contains("copy --to-key-file"), "\(rekeyJSONL.errors)")
    // A missing key file is named.
    let missing = try runCLI(["rekey", store.description, "--key-file", dir.path("nope"), "--new-key-file", k2])
    #expect(missing.status == 2 && missing.errors.contains("nope"), "\(missing.errors)")
    #expect(try contents(store.with(key: StoreKey(contentsOfFile: k1))) == digest)
}

/// A rekey killed while it copies, and while it verifies: the path always opens wholly with one
/// of the two keys, and running the command again finishes it.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"),
      arguments: [("sqlite", "copy "), ("lmdb", "verify ")])
func aRekeyKilledWithSIGKILLFinishesWhenRunAgain(_ kind: String, _ phase: String) throws {
    let dir = try TemporaryDirectory()
    let k1 = try keyFile(dir, "k1", hexKey1)
    let k2 = try keyFile(dir, "k2", hexKey2)
    let reference = dir.location(.sqlite, "reference")
    try DemoData.seed(reference, items: 4_000, seed: 4)
    let store = dir.location(StoreKind(rawValue: kind), "store")
    #expect(try runCLI(["copy", "--from", reference.description, "--to", store.description, "--to-key-file", k1,
                        "--progress", "none"]).status == 0)
    let expected = try contents(reference)

    let arguments = ["rekey", store.description, "--key-file", k1, "--new-key-file", k2, "--batch-size", "100",
                     "--progress", "plain"]
    let (process, _, err) = try startCLI(arguments)
    // Killed once its progress says it reached the phase (a state, not a time).
    var seen = Data()
    while !String(decoding: seen, as: UTF8.self).contains(phase) {
        let chunk = err.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        seen.append(chunk)
    }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    #expect(String(decoding: seen, as: UTF8.self).contains(phase))

    // Whole under one key: the old one, as nothing was swapped yet.
    let old = store.with(key: try StoreKey(contentsOfFile: k1))
    let new = store.with(key: try StoreKey(contentsOfFile: k2))
    let opened = (try? contents(old)) ?? (try? contents(new))
    #expect(opened == expected)

    let again = try runCLI(Array(arguments.dropLast(2)) + ["--progress", "none"])
    #expect(again.status == 0, "\(again.errors)")
    #expect(try contents(new) == expected)
    #expect(throws: StoreError.self) { try contents(old) }
    #expect(!FileManager.default.fileExists(atPath: store.path + ".rekeyed"))
    #expect(!FileManager.default.fileExists(atPath: store.path + ".rekeyed.migrating"))
}

/// Two processes open one encrypted store with the same key, as they do without one: this
/// process holds it open and writes while `migrate-store` reads it in another.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func twoProcessesOpenOneEncryptedStoreWithTheSameKey(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let k1 = try keyFile(dir, "k1", hexKey1)
    let seeded = dir.location(.sqlite, "seeded")
    try DemoData.seed(seeded, items: 200, seed: 8)
    let location = dir.location(kind, "shared")
    #expect(try runCLI(["copy", "--from", seeded.description, "--to", location.description, "--to-key-file", k1,
                        "--progress", "none"]).status == 0)
    let store = try location.with(key: StoreKey(contentsOfFile: k1)).open(schema: nil)
    defer { try? store.close() }
    _ = try store.writeSync { try $0.deleteAll("Order_products") }
    let check = try runCLI(["check", location.description, "--key-file", k1])
    #expect(check.status == 0 && check.output.contains("no damage found"), "\(check.output)\(check.errors)")
    let copy = dir.location(.sqlite, "copy")
    #expect(try runCLI(["copy", "--from", location.description, "--key-file", k1, "--to", copy.description,
                        "--progress", "none"]).status == 0)
    let held = try store.read { r in
        try Dictionary(uniqueKeysWithValues: store.schema.entities.map { ($0.name, try r.fetch(FetchRequest($0.name))) })
    }
    #expect(try contents(copy) == held)
    #expect(held["Order_products"]?.isEmpty == true)
}

/// The states a rekey stopped after its copy leaves, made by hand, each finished by running the
/// command again: the copy marked but not swapped (the store written since), the swap done with
/// the old store still beside it, and the old store deleted with the marker still in the new one.
@Test(arguments: ["marked, not swapped", "swapped, old store beside it", "old store deleted, marker left"])
func aRekeyStoppedAfterItsCopyFinishesWhenRunAgain(_ state: String) throws {
    let dir = try TemporaryDirectory()
    let k1 = try keyFile(dir, "k1", hexKey1)
    let k2 = try keyFile(dir, "k2", hexKey2)
    let (key1, key2) = (try StoreKey(contentsOfFile: k1), try StoreKey(contentsOfFile: k2))
    let reference = dir.location(.sqlite, "reference")
    try DemoData.seed(reference, items: 300, seed: 6)
    let store = dir.location(.sqlite, "store").with(key: key1)
    try Migrator.copy(from: reference, to: store)
    let staged = Rekey.stagingLocation(of: store, newKey: key2)
    try Migrator.copy(from: store, to: staged)
    let marked = try staged.open(schema: nil)
    try marked.writeSync { try $0.setReservedMetadata(Array("marker".utf8), forKey: Rekey.stagedKey) }
    try marked.close()
    switch state {
    case "marked, not swapped":
        // The store gains an item after the copy: the rerun's sync must carry it.
        let open = try store.open(schema: nil)
        _ = try open.writeSync { try $0.deleteAll("Order_products") }
        try open.close()
        let reopened = try store.open(schema: nil)
        try reopened.close()
    default:
        let moved = store.path + ".moving"
        try FileManager.default.moveItem(atPath: store.path, toPath: moved)
        try FileManager.default.moveItem(atPath: staged.path, toPath: store.path)
        try FileManager.default.moveItem(atPath: moved, toPath: staged.path)
        if state == "old store deleted, marker left" { try staged.destroy() }
    }
    let expected = try contents(state == "marked, not swapped" ? store : reference)
    let again = try runCLI(["rekey", store.description, "--key-file", k1, "--new-key-file", k2, "--progress", "none"])
    #expect(again.status == 0, "\(again.errors)")
    #expect(try contents(store.with(key: key2)) == expected)
    #expect(!FileManager.default.fileExists(atPath: staged.path))
    let opened = try store.with(key: key2).open(schema: nil)
    defer { try? opened.close() }
    #expect(try opened.read { try $0.metadata(forKey: Rekey.stagedKey) } == nil)
}

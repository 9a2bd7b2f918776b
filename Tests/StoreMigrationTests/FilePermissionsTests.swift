import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// The permission bits of `path`.
private func mode(_ path: String) -> mode_t {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
}

/// A source only its owner can read (0600) is copied into files only its owner can read, into
/// every kind of destination that has files, whatever the umask allows; the help says so.
@Test(arguments: [StoreKind.lmdb, .sqlite, .jsonl])
func aPrivateSourceIsCopiedIntoPrivateFiles(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(kind == .sqlite ? .lmdb : .sqlite, "source")
    try DemoData.seed(source, items: 200, seed: 2)
    var isDirectory: ObjCBool = false
    _ = FileManager.default.fileExists(atPath: source.path, isDirectory: &isDirectory)
    if isDirectory.boolValue {
        chmod(source.path, 0o700)
        for name in try FileManager.default.contentsOfDirectory(atPath: source.path) {
            chmod(source.path + "/" + name, 0o600)
        }
    } else {
        chmod(source.path, 0o600)
    }
    let previous = umask(0o022)
    defer { umask(previous) }
    for (name, compressed) in [("plain", false), ("gz", true)] where kind == .jsonl || !compressed {
        var destination = dir.location(kind, name)
        if compressed { destination.path += ".gz" }
        let copy = try runCLI(["copy", "--from", source.description, "--to", destination.description,
                               "--progress", "none"])
        #expect(copy.status == 0, "\(copy.errors)")
        let files: [String]
        if kind == .lmdb {
            #expect(mode(destination.path) == 0o700, "the environment's directory")
            files = try FileManager.default.contentsOfDirectory(atPath: destination.path).map { destination.path + "/" + $0 }
        } else {
            files = [destination.path]
        }
        #expect(!files.isEmpty)
        for file in files {
            #expect(mode(file) == 0o600, "\(file): \(String(mode(file), radix: 8))")
        }
    }
    let help = try runCLI(["copy", "--help"])
    let words = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    #expect(words.contains("permission bits of the source's files"), "\(help.output)")
}

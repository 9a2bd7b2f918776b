@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import LMDBStore
import SQLiteStore
import StoreMigration
import Testing

/// Paths of one character (`a`, `x/`, `é`), which Foundation on Linux traps on when asked for
/// their directory (`NSString.deletingLastPathComponent`): a store, a report or an export named
/// so crashed the process. ``PathNames`` works the directory out instead.
@Suite struct ShortPathTests {
    /// The directory of paths of one character, and the same answers as Foundation's for paths
    /// it does not trap on.
    @Test func theDirectoryOfAPathIsFoundationsWithoutItsTrap() {
        let oneCharacter = ["a": "", ".": "", "a/": "", "é": "", "a//": "", "/a": "/", "x/é": "x", "/": "/", "": ""]
        for (path, expected) in oneCharacter.sorted(by: { $0.key < $1.key }) {
            #expect(PathNames.directory(of: path) == expected, "directory of '\(path)'")
        }
        for path in ["ab", "a/b", "/ab", "ab/", "a//b", "/a/b/", "./ab", "../x/y", "///ab", "ab//", "/a//", "x/ée"] {
            #expect(PathNames.directory(of: path) == (path as NSString).deletingLastPathComponent, "directory of '\(path)'")
        }
        #expect(PathNames.directory(of: "d/\u{301}x") == "d", "a slash before a combining mark is a slash")
        #expect(PathNames.lastName(of: "a/b/") == "b" && PathNames.lastName(of: "/") == "/")
        #expect(PathNames.containingDirectory(of: "a") == ".")
        #expect(PathNames.containingDirectory(of: "d/a") == "d")
    }

    /// Stores named with one character, in the current directory, made, copied, verified and
    /// exported through migrate-store: each command ends with its own exit status (a trap in
    /// Foundation ended it with signal 4 before).
    @Test func storesNamedWithOneCharacterAreMadeCopiedAndVerified() throws {
        let dir = try TemporaryDirectory()
        let seeded = try runCLI(["seed", "--to", "lmdb:a", "--items", "20"], in: dir.url.path)
        #expect(seeded.status == 0, "\(seeded.errors)")
        let copied = try runCLI(["copy", "--from", "lmdb:a", "--to", "sqlite:b", "--progress", "none"], in: dir.url.path)
        #expect(copied.status == 0, "\(copied.errors)")
        let verified = try runCLI(["verify", "--from", "lmdb:a", "--to", "sqlite:b"], in: dir.url.path)
        #expect(verified.status == 0, "\(verified.errors)")
        let exported = try runCLI(["export", "--from", "sqlite:b", "--entity", "Customer", "--output", "e"], in: dir.url.path)
        #expect(exported.status == 0, "\(exported.errors)")
        #expect(FileManager.default.fileExists(atPath: dir.path("e")))
        // The store the commands made, opened by the library.
        let store = try SQLiteStore(path: dir.path("b"), schema: nil)
        defer { try? store.close() }
        #expect(try store.read { try $0.count(FetchRequest("Customer")) } > 0)
    }

    /// A report named with one character is written; an empty one is refused before the copy,
    /// naming the option, with nothing copied.
    @Test func aReportOfOneCharacterIsWrittenAndAnEmptyOneIsRefused() throws {
        let dir = try TemporaryDirectory()
        try DemoData.seed(StoreLocation(kind: .lmdb, path: dir.path("s.lmdb")), items: 20, seed: 1)
        let written = try runCLI(["copy", "--from", "lmdb:s.lmdb", "--to", "sqlite:d.sqlite", "--progress", "none",
                                  "--report", "r"], in: dir.url.path)
        #expect(written.status == 0, "\(written.errors)")
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir.path("r"))))
        #expect(report is [String: Any])
        let refused = try runCLI(["copy", "--from", "lmdb:s.lmdb", "--to", "sqlite:e.sqlite", "--progress", "none",
                                  "--report", ""], in: dir.url.path)
        #expect(refused.status == 2)
        #expect(refused.errors.contains("--report is empty"), "\(refused.errors)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("e.sqlite")))
    }
}

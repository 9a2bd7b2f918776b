import DataStoreTestSupport
import Foundation
import Testing

/// The repository's root, found from this file.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The README's `Package.swift` block, as it is written there.
func readmeManifest() throws -> String {
    let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
    let blocks = readme.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
    return try #require(blocks.first { $0.contains("import PackageDescription") })
}

/// A new package that depends on a clone of this repository in a folder not named `DataStore`,
/// with the README's manifest, builds and runs (a path dependency is named after its folder
/// unless the manifest names it).
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aPackageDependingOnACloneByTheReadmesManifestBuilds() throws {
    let dir = try TemporaryDirectory()
    let clone = dir.url.appendingPathComponent("datastore-checkout").path
    _ = try runCommand("/usr/bin/git", ["clone", "--quiet", "--no-hardlinks", repositoryRoot.path, clone])
    let app = dir.url.appendingPathComponent("MyApp")
    try FileManager.default.createDirectory(at: app.appendingPathComponent("Sources/MyApp"),
                                            withIntermediateDirectories: true)
    let manifest = try readmeManifest()
    #expect(manifest.contains(#"path: "../DataStore""#))
    try manifest.replacingOccurrences(of: #"path: "../DataStore""#, with: #"path: "../datastore-checkout""#)
        .write(to: app.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
    try """
        import DataStoreAPI
        import SQLiteStore

        let store = try SQLiteStore(path: "app.sqlite", schema: Schema(entities: [
            EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int)]),
        ]))
        try store.writeSync { try $0.insert(["id": 1], into: "Note") }
        print("notes:", try store.read { try $0.count(FetchRequest("Note")) })
        try store.close()
        """.write(to: app.appendingPathComponent("Sources/MyApp/main.swift"), atomically: true, encoding: .utf8)
    let output = try runCommand("/usr/bin/env", ["bash", "-c",
        "cd '\(app.path)' && swift build --product MyApp 2>&1 && cd '\(dir.url.path)' && '\(app.path)/.build/debug/MyApp'"])
    #expect(output.contains("notes: 1"), "\(output.suffix(2_000))")
}

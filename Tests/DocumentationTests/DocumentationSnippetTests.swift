import DataStoreTestSupport
import Foundation
import Testing

/// Every Swift code block of the README and of the DocC articles, compiled from the files
/// themselves (the DocumentationSnippets plugin), runs without an error, each in a directory
/// of its own that is its working directory while it runs (the blocks name their files as an
/// app does, `app.sqlite`).
@Test func everyCodeBlockOfTheDocumentationRuns() async throws {
    #expect(documentationSnippets.count >= 10, "the blocks were found")
    let previous = FileManager.default.currentDirectoryPath
    defer { FileManager.default.changeCurrentDirectoryPath(previous) }
    for (name, run) in documentationSnippets {
        let dir = try TemporaryDirectory()
        FileManager.default.changeCurrentDirectoryPath(dir.url.path)
        do {
            try await run()
        } catch {
            Issue.record("\(name): \(error)")
        }
    }
}

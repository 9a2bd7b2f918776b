import DataStoreTestSupport
import Foundation
import Testing

/// Every Swift code block of the README and of the DocC articles, compiled from the files
/// themselves (the DocumentationSnippets plugin builds them into `documentation-snippets`),
/// runs without an error, each in a directory of its own.
@Test func everyCodeBlockOfTheDocumentationRuns() throws {
    let dir = try TemporaryDirectory()
    let process = Process()
    process.executableURL = CrashRecovery.executable(named: "documentation-snippets")
    process.currentDirectoryURL = dir.url
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "\(output)")
    let ran = output.split(separator: "\n").filter { $0.hasPrefix("ok ") }
    #expect(ran.count >= 14, "every block ran: \(output)")
    #expect(ran.contains { $0.hasPrefix("ok README.md:") }, "the README's quick start ran")
}

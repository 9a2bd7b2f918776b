// Runs every Swift code block of the README and of the DocC articles (extracted at build time
// by the DocumentationSnippets plugin), each in a new, empty directory under the current one that is
// its working directory while it runs, as an app's relative paths (`app.sqlite`) expect.
// Prints one line per block and exits 1 when any failed. A process of its own, so that
// changing the working directory touches nothing else.
import Foundation

let root = FileManager.default.currentDirectoryPath
var failed = 0
for (number, snippet) in documentationSnippets.enumerated() {
    let directory = (root as NSString).appendingPathComponent("block-\(number)")
    do {
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard FileManager.default.changeCurrentDirectoryPath(directory) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: directory])
        }
        try await snippet.run()
        print("ok \(snippet.name)")
    } catch {
        failed += 1
        print("FAILED \(snippet.name): \(error)")
    }
    _ = FileManager.default.changeCurrentDirectoryPath(root)
}
print("\(documentationSnippets.count - failed) of \(documentationSnippets.count) blocks ran")
exit(failed == 0 ? 0 : 1)

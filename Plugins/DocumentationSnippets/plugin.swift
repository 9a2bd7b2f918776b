import Foundation
import PackagePlugin

/// Extracts the Swift code blocks of the README and of the DocC articles into a source file of
/// the target it is applied to (`documentation-snippets`), which compiles and runs each block
/// as documented.
@main
struct DocumentationSnippets: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let root = context.package.directoryURL
        let catalog = root.appending(path: "Sources/DataStoreAPI/DataStoreAPI.docc")
        let articles = ((try? FileManager.default.contentsOfDirectory(atPath: catalog.path())) ?? [])
            .filter { $0.hasSuffix(".md") }.sorted().map { catalog.appending(path: $0) }
        let inputs = [root.appending(path: "README.md")] + articles
        let output = context.pluginWorkDirectoryURL.appending(path: "DocumentationSnippets.swift")
        return [.buildCommand(displayName: "Extracting the documentation's code blocks",
                              executable: try context.tool(named: "snippet-extractor").url,
                              arguments: [output.path()] + inputs.map { $0.path() },
                              inputFiles: inputs, outputFiles: [output])]
    }
}

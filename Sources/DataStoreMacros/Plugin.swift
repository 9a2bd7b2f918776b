#if Models
import DataStoreMacroExpansion
import SwiftCompilerPlugin
import SwiftSyntax
import SwiftSyntaxMacros

/// The compiler plugin of `@StoredModel` and its property marks. The macros' code lives in
/// DataStoreMacroExpansion, a library the expansion tests import: a test target that depends on a
/// macro target is built for the host with every module under it, which would compile the package
/// and its dependencies a second time. The compiler names a macro by this module
/// (`#externalMacro(module: "DataStoreMacros", ...)`), so the types it asks for are declared
/// here and hand each expansion to the library's.
@main
struct DataStoreMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [StoredModelMacro.self, StoredPropertyMarker.self]
}

/// `@StoredModel`: DataStoreMacroExpansion's expansion.
public struct StoredModelMacro: ExtensionMacro {
    public static func expansion(of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
                                 providingExtensionsOf type: some TypeSyntaxProtocol,
                                 conformingTo protocols: [TypeSyntax],
                                 in context: some MacroExpansionContext) throws -> [ExtensionDeclSyntax] {
        try DataStoreMacroExpansion.StoredModelMacro.expansion(
            of: node, attachedTo: declaration, providingExtensionsOf: type, conformingTo: protocols, in: context)
    }
}

/// `@StoredKey`, `@StoredIndex`, `@StoredUnique`: marks that `@StoredModel` reads.
public struct StoredPropertyMarker: PeerMacro {
    public static func expansion(of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [DeclSyntax] {
        try DataStoreMacroExpansion.StoredPropertyMarker.expansion(of: node, providingPeersOf: declaration, in: context)
    }
}
#else
// Without the Models trait no module uses the plugin, and swift-syntax is not fetched; a build of
// every target still links this one, so it is a program that serves no macro.
@main
enum DataStoreMacrosPlugin {
    static func main() {}
}
#endif

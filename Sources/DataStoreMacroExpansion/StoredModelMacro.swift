#if Models
import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@StoredKey`, `@StoredIndex`, `@StoredUnique`: marks that `@StoredModel` reads; they add
/// nothing themselves.
public struct StoredPropertyMarker: PeerMacro {
    public static func expansion(of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
                                 in context: some MacroExpansionContext) throws -> [DeclSyntax] {
        []
    }
}

/// `@StoredModel`: writes a struct's `RowCodable` conformance from its stored properties.
public struct StoredModelMacro: ExtensionMacro {
    public static func expansion(of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
                                 providingExtensionsOf type: some TypeSyntaxProtocol,
                                 conformingTo protocols: [TypeSyntax],
                                 in context: some MacroExpansionContext) throws -> [ExtensionDeclSyntax] {
        guard let structDecl = declaration.as(StructDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: ModelMessage.notAStruct))
            return []
        }
        let entityName = explicitEntityName(node) ?? structDecl.name.trimmedDescription
        guard let properties = storedProperties(of: structDecl, in: context) else { return [] }
        guard let key = primaryKey(of: properties, structDecl: structDecl, node: node, in: context) else { return [] }
        let access = structDecl.modifiers.contains { ["public", "package"].contains($0.name.text) }
            ? structDecl.modifiers.first { ["public", "package"].contains($0.name.text) }!.name.text + " " : ""
        // A property's initial value, when it is a constant, is its attribute's default (what an
        // upgrade that adds it gives the items that exist); `UUID()` or `Date()` is not one: the
        // schema would change at every run.
        let attributes = properties.map { property -> String in
            let call = "DataStoreAPI.StoredModelSupport.attribute(\(literal(property.attribute)), "
                + "\\\(type.trimmedDescription).\(property.name)"
            guard let value = property.binding.initializer?.value, isConstant(value) else { return call + ")" }
            return "try " + call + ", default: \(value.trimmedDescription))"
        }
        let indexes = properties.compactMap { property -> String? in
            guard property.isIndexed || property.isUnique else { return nil }
            return "DataStoreAPI.Index(\(literal("\(entityName)_\(property.attribute)")), on: [\(literal(property.attribute))]"
                + (property.isUnique ? ", unique: true)" : ")")
        }
        // Every value is read into a local before any property is set: with the properties set
        // as they were read, the finished model was copied out and the copy in `self` released
        // (a retain and a release of each string and `Data` per row, about 100 instructions).
        // Each local's type comes from its property (a closure never called), not from the
        // property's type written out, which the extension may not see (`StoredModelSupport`).
        let reads = properties.enumerated().map { position, property in
            "let __stored\(position) = try DataStoreAPI.StoredModelSupport.read(row, \(literal(property.attribute)), "
                + "as: { (model: Self) in model.\(property.name) })"
        } + properties.enumerated().map { position, property in "self.\(property.name) = __stored\(position)" }
        let writes = properties.map { "\(literal($0.attribute)): try self.\($0.name).storedValue()" }
        // The typed relationships declared as static properties, unless the model lists its
        // relationships itself.
        let relationshipNames = declaresRelationships(structDecl) ? [] : relationshipProperties(of: structDecl)
        var members = ["\(access)static var entityName: String { \(literal(entityName)) }",
                       "\(access)static var primaryKey: String { \(literal(key)) }"]
        if !relationshipNames.isEmpty {
            members.append("\(access)static var relationships: [DataStoreAPI.Relationship] { ["
                + relationshipNames.map { "Self.\($0).relationship" }.joined(separator: ", ") + "] }")
        }
        members.append("""
            \(access)static func entitySchema() throws -> DataStoreAPI.EntitySchema {
                DataStoreAPI.EntitySchema(
                    \(literal(entityName)), primaryKey: \(literal(key)),
                    attributes: [\(attributes.joined(separator: ", "))],
                    indexes: [\(indexes.joined(separator: ", "))],
                    relationships: relationships)
            }
            """)
        members.append("""
            \(access)init(row: borrowing DataStoreAPI.Row) throws {
            \(reads.map { "    " + $0 }.joined(separator: "\n"))
            }
            """)
        if structDecl.genericParameterClause == nil {
            // The record is built in the layout's order into storage allocated once; a store
            // whose entity has these names in this order keeps it as it is.
            let names = properties.map { literal($0.attribute) }.joined(separator: ", ")
            members.append("private static let _storedModelLayout = DataStoreAPI.StoredModelLayout([\(names)])")
            members.append("""
                \(access)func record() throws -> DataStoreAPI.Record {
                    var builder = DataStoreAPI.StoredRecordBuilder(Self._storedModelLayout)
                \(properties.map { "    try builder.append(self.\($0.name))" }.joined(separator: "\n"))
                    return try builder.record()
                }
                """)
            members.append("\(access)static var storedModelLayout: DataStoreAPI.StoredModelLayout? { Self._storedModelLayout }")
            members.append("""
                \(access)func writeStoredFields(to fields: inout DataStoreAPI.StoredFieldBuffer) throws {
                \(properties.map { "    try self.\($0.name).appendStored(to: &fields)" }.joined(separator: "\n"))
                }
                """)
            // The fields read back in the same order, each as its property's type, with nothing
            // after the last; any that does not read leaves the model to `init(row:)`.
            let storedReads = properties.enumerated().map { position, property in
                "let __stored\(position) = DataStoreAPI.StoredModelSupport.readStored(&reader, "
                    + "as: { (model: Self) in model.\(property.name) })"
            } + ["reader.isAtEnd"]
            members.append("\(access)static var readsStoredFields: Bool { true }")
            members.append("""
                \(access)init?(storedFields reader: inout DataStoreAPI.StoredFieldReader) {
                    guard \(storedReads.joined(separator: ",\n          ")) else { return nil }
                \(properties.enumerated().map { "    self.\($1.name) = __stored\($0)" }.joined(separator: "\n"))
                }
                """)
        } else {
            // A generic struct cannot hold a static stored property: a literal in the same order.
            members.append("""
                \(access)func record() throws -> DataStoreAPI.Record {
                    [\(writes.joined(separator: ", "))]
                }
                """)
        }
        let source: DeclSyntax = """
            extension \(type.trimmed): DataStoreAPI.RowCodable {
            \(raw: members.joined(separator: "\n"))
            }
            """
        guard let extensionDecl = source.as(ExtensionDeclSyntax.self) else { return [] }
        return [extensionDecl]
    }

    /// The entity name given as the macro's argument, if any.
    private static func explicitEntityName(_ node: AttributeSyntax) -> String? {
        guard case .argumentList(let arguments)? = node.arguments,
              let string = arguments.first?.expression.as(StringLiteralExprSyntax.self),
              string.segments.count == 1,
              case .stringSegment(let segment)? = string.segments.first else { return nil }
        return segment.content.text
    }

    /// Whether an initial value is the same at every run: a literal (a negative number, a string
    /// without interpolation, `nil`) or an enum case (`.calm`).
    private static func isConstant(_ value: ExprSyntax) -> Bool {
        switch value.kind {
        case .integerLiteralExpr, .floatLiteralExpr, .booleanLiteralExpr, .nilLiteralExpr: return true
        case .stringLiteralExpr:
            return value.as(StringLiteralExprSyntax.self)?.segments.allSatisfy { $0.is(StringSegmentSyntax.self) } ?? false
        case .memberAccessExpr:
            guard let member = value.as(MemberAccessExprSyntax.self) else { return false }
            return member.base == nil && member.declName.argumentNames == nil
        case .prefixOperatorExpr:
            guard let prefix = value.as(PrefixOperatorExprSyntax.self), prefix.operator.text == "-" else { return false }
            return prefix.expression.is(IntegerLiteralExprSyntax.self) || prefix.expression.is(FloatLiteralExprSyntax.self)
        default: return false
        }
    }

    /// Whether the struct declares `relationships` itself.
    private static func declaresRelationships(_ structDecl: StructDeclSyntax) -> Bool {
        structDecl.memberBlock.members.contains { member in
            member.decl.as(VariableDeclSyntax.self)?.bindings.contains {
                $0.pattern.as(IdentifierPatternSyntax.self)?.identifier.text == "relationships"
            } ?? false
        }
    }

    /// The static properties that hold a typed relationship: declared `ToMany<…>` or `ToOne<…>`,
    /// or made by `toMany(…)`, `toOne(…)`, `ToMany<…>(…)` or `ToOne<…>(…)`; in declaration order.
    private static func relationshipProperties(of structDecl: StructDeclSyntax) -> [String] {
        let kinds: Set<String> = ["toMany", "toOne", "ToMany", "ToOne"]
        var names: [String] = []
        for member in structDecl.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self),
                  variable.modifiers.contains(where: { $0.name.text == "static" }) else { continue }
            for binding in variable.bindings {
                guard let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.text else { continue }
                var kind: String?
                if let type = binding.typeAnnotation?.type.as(IdentifierTypeSyntax.self) { kind = type.name.text }
                if let call = binding.initializer?.value.as(FunctionCallExprSyntax.self) {
                    var callee = ExprSyntax(call.calledExpression)
                    if let specialized = callee.as(GenericSpecializationExprSyntax.self) { callee = specialized.expression }
                    if let reference = callee.as(DeclReferenceExprSyntax.self) { kind = kind ?? reference.baseName.text }
                    if let member = callee.as(MemberAccessExprSyntax.self) { kind = kind ?? member.declName.baseName.text }
                }
                if let kind, kinds.contains(kind) { names.append(name) }
            }
        }
        return names
    }

    /// A Swift string literal of `text` (names are identifiers: nothing to escape).
    private static func literal(_ text: String) -> String { "\"\(text)\"" }

    struct StoredProperty {
        /// The property's name as Swift spells it (`` `default` `` with its backticks).
        var name: String
        /// The attribute's name: the property's, without backticks.
        var attribute: String { name.filter { $0 != "`" } }
        var type: TypeSyntax
        var binding: PatternBindingSyntax
        var declaration: VariableDeclSyntax
        var isKey: Bool
        var isIndexed: Bool
        var isUnique: Bool
    }

    /// The struct's stored instance properties in declaration order; `nil` after a diagnostic.
    private static func storedProperties(of structDecl: StructDeclSyntax,
                                         in context: some MacroExpansionContext) -> [StoredProperty]? {
        var result: [StoredProperty] = []
        var failed = false
        for member in structDecl.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            if variable.modifiers.contains(where: { ["static", "class"].contains($0.name.text) }) { continue }
            // By their last name component: `@DataStoreModels.StoredKey` is `StoredKey`.
            let marks = Set(variable.attributes.compactMap {
                $0.as(AttributeSyntax.self)?.attributeName.trimmedDescription.split(separator: ".").last.map(String.init)
            })
            let bindings = Array(variable.bindings)
            for (position, binding) in bindings.enumerated() {
                if let accessors = binding.accessorBlock, isComputed(accessors) { continue }
                guard let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.trimmedDescription else {
                    context.diagnose(Diagnostic(node: binding.pattern, message: ModelMessage.pattern))
                    failed = true
                    continue
                }
                // A property wrapper or another macro (a type's name: capitalized) changes what is
                // stored; `@available` and the like do not.
                if let wrapper = marks.sorted().first(where: {
                    $0.first?.isUppercase == true && !["StoredKey", "StoredIndex", "StoredUnique"].contains($0)
                }) {
                    context.diagnose(Diagnostic(node: variable.attributes, message: ModelMessage.wrapped(name, wrapper)))
                    failed = true
                    continue
                }
                if variable.modifiers.contains(where: { $0.name.text == "lazy" }) {
                    context.diagnose(Diagnostic(node: variable, message: ModelMessage.lazy(name)))
                    failed = true
                    continue
                }
                if variable.bindingSpecifier.tokenKind == .keyword(.let), binding.initializer != nil {
                    context.diagnose(Diagnostic(
                        node: variable.bindingSpecifier, message: ModelMessage.letWithValue(name),
                        fixIt: FixIt(message: ModelFixIt.makeVar, changes: [
                            .replace(oldNode: Syntax(variable.bindingSpecifier),
                                     newNode: Syntax(variable.bindingSpecifier.with(\.tokenKind, .keyword(.var)))),
                        ])))
                    failed = true
                    continue
                }
                // `var a, b: Int`: the type is written on the last binding of the group; a binding
                // with a value and no type of its own (`var a = "x", b: Int`) is not of that type.
                let annotated = binding.initializer == nil ? bindings[position...].lazy.compactMap({ $0.typeAnnotation?.type }).first
                    : binding.typeAnnotation?.type
                guard let type = annotated else {
                    diagnoseMissingType(name, binding, in: context)
                    failed = true
                    continue
                }
                if let refusal = refusal(of: type) {
                    context.diagnose(Diagnostic(node: type, message: ModelMessage.unstorable(name, type.trimmedDescription,
                                                                                                refusal)))
                    failed = true
                    continue
                }
                result.append(StoredProperty(name: name, type: type, binding: binding, declaration: variable,
                                             isKey: marks.contains("StoredKey"), isIndexed: marks.contains("StoredIndex"),
                                             isUnique: marks.contains("StoredUnique")))
            }
        }
        if !failed && result.isEmpty {
            context.diagnose(Diagnostic(node: structDecl.name, message: ModelMessage.noProperties))
            return nil
        }
        return failed ? nil : result
    }

    /// Whether the accessors make the property computed (observers keep it stored).
    private static func isComputed(_ accessors: AccessorBlockSyntax) -> Bool {
        switch accessors.accessors {
        case .getter: return true
        case .accessors(let list):
            return list.contains { !["willSet", "didSet"].contains($0.accessorSpecifier.text) }
        }
    }

    /// A property without a type: the type of a literal it starts with is the obvious fix.
    private static func diagnoseMissingType(_ name: String, _ binding: PatternBindingSyntax,
                                            in context: some MacroExpansionContext) {
        let literalType: String?
        switch binding.initializer?.value.kind {
        case .integerLiteralExpr?: literalType = "Int"
        case .floatLiteralExpr?: literalType = "Double"
        case .stringLiteralExpr?: literalType = "String"
        case .booleanLiteralExpr?: literalType = "Bool"
        default: literalType = nil
        }
        var fixIts: [FixIt] = []
        if let literalType {
            let annotated = binding.with(\.pattern, binding.pattern.trimmed)
                .with(\.typeAnnotation, TypeAnnotationSyntax(
                    colon: .colonToken(trailingTrivia: .space),
                    type: IdentifierTypeSyntax(name: .identifier(literalType), trailingTrivia: .space)))
            fixIts.append(FixIt(message: ModelFixIt.addType(literalType),
                                changes: [.replace(oldNode: Syntax(binding), newNode: Syntax(annotated))]))
        }
        context.diagnose(Diagnostic(node: binding.pattern, message: ModelMessage.noType(name), fixIts: fixIts))
    }

    /// Why a property of this type cannot be one attribute, or `nil` when it may be (a type the
    /// macro cannot see into must conform to `RowValue`, which the compiler checks).
    private static func refusal(of type: TypeSyntax) -> String? {
        if let optional = type.as(OptionalTypeSyntax.self) {
            if optional.wrappedType.is(OptionalTypeSyntax.self) { return "an optional of an optional has no stored form" }
            return refusal(of: optional.wrappedType)
        }
        if type.is(ImplicitlyUnwrappedOptionalTypeSyntax.self) { return "write it as an optional (?)" }
        if let array = type.as(ArrayTypeSyntax.self) {
            return array.element.trimmedDescription == "UInt8" ? nil : "an attribute holds one value, not an array"
        }
        if type.is(DictionaryTypeSyntax.self) { return "an attribute holds one value, not a dictionary" }
        if type.is(TupleTypeSyntax.self) { return "an attribute holds one value, not a tuple" }
        if type.is(FunctionTypeSyntax.self) { return "a closure cannot be stored" }
        if type.is(SomeOrAnyTypeSyntax.self) { return "an attribute's type must be known: name a concrete type" }
        if let identifier = type.as(IdentifierTypeSyntax.self) {
            switch identifier.name.text {
            case "Array" where identifier.genericArgumentClause?.arguments.first?.trimmedDescription != "UInt8":
                return "an attribute holds one value, not an array"
            case "Set": return "an attribute holds one value, not a set"
            case "Dictionary": return "an attribute holds one value, not a dictionary"
            case "Optional":
                if let wrapped = identifier.genericArgumentClause?.arguments.first?.argument.as(TypeSyntax.self) {
                    return refusal(of: wrapped)
                }
                return nil
            case "Any", "AnyObject": return "an attribute's type must be known: name a concrete type"
            case "UInt", "UInt64": return "a store's integers are 64-bit signed: use Int64"
            default: return nil
            }
        }
        return nil
    }

    /// The primary key's property name; `nil` after a diagnostic.
    private static func primaryKey(of properties: [StoredProperty], structDecl: StructDeclSyntax, node: AttributeSyntax,
                                   in context: some MacroExpansionContext) -> String? {
        let marked = properties.filter(\.isKey)
        if marked.count > 1 {
            for extra in marked.dropFirst() {
                context.diagnose(Diagnostic(node: extra.declaration, message: ModelMessage.twoKeys(marked[0].name, extra.name)))
            }
            return nil
        }
        guard let key = marked.first ?? properties.first(where: { $0.name == "id" }) else {
            let first = properties[0]
            // The mark goes first, where the declaration's indentation was.
            var marked = first.declaration.with(\.leadingTrivia, [])
            marked.attributes.insert(.attribute(AttributeSyntax(
                leadingTrivia: first.declaration.leadingTrivia,
                attributeName: IdentifierTypeSyntax(name: .identifier("StoredKey")), trailingTrivia: .space)),
                at: marked.attributes.startIndex)
            context.diagnose(Diagnostic(
                node: structDecl.name, message: ModelMessage.noKey,
                fixIt: FixIt(message: ModelFixIt.markKey(first.name),
                             changes: [.replace(oldNode: Syntax(first.declaration), newNode: Syntax(marked))])))
            return nil
        }
        if let optional = key.type.as(OptionalTypeSyntax.self) {
            context.diagnose(Diagnostic(
                node: key.type, message: ModelMessage.optionalKey(key.name),
                fixIt: FixIt(message: ModelFixIt.removeOptional,
                             changes: [.replace(oldNode: Syntax(optional),
                                                newNode: Syntax(optional.wrappedType.with(\.trailingTrivia,
                                                                                          optional.trailingTrivia)))])))
            return nil
        }
        return key.attribute
    }
}

/// The macro's refusals, each naming what is wrong and what to do.
enum ModelMessage: DiagnosticMessage {
    case notAStruct
    case noProperties
    case pattern
    case wrapped(String, String)
    case lazy(String)
    case letWithValue(String)
    case noType(String)
    case unstorable(String, String, String)
    case twoKeys(String, String)
    case noKey
    case optionalKey(String)

    var message: String {
        switch self {
        case .notAStruct: return "@StoredModel applies to a struct"
        case .noProperties: return "@StoredModel needs at least one stored property (its primary key)"
        case .pattern: return "@StoredModel reads properties declared one name at a time, not a tuple pattern"
        case .wrapped(let name, let wrapper):
            return "'\(name)' has the attribute @\(wrapper); a @StoredModel property is stored as it is, without a property wrapper"
        case .lazy(let name): return "'\(name)' is lazy; a @StoredModel property is read from its row when the model is"
        case .letWithValue(let name):
            return "'\(name)' is a let with a value, which a model read from a row cannot set; make it a var"
        case .noType(let name): return "'\(name)' needs a type annotation: @StoredModel reads each attribute's type from it"
        case .unstorable(let name, let type, let reason): return "'\(name)' is \(type), which the store cannot hold: \(reason)"
        case .twoKeys(let first, let second):
            return "'\(second)' is marked @StoredKey, and so is '\(first)'; a model has one primary key"
        case .noKey: return "@StoredModel needs a primary key: mark a property @StoredKey, or name it 'id'"
        case .optionalKey(let name): return "the primary key '\(name)' cannot be optional"
        }
    }

    var diagnosticID: MessageID {
        let id: String
        switch self {
        case .notAStruct: id = "notAStruct"
        case .noProperties: id = "noProperties"
        case .pattern: id = "pattern"
        case .wrapped: id = "wrapped"
        case .lazy: id = "lazy"
        case .letWithValue: id = "letWithValue"
        case .noType: id = "noType"
        case .unstorable: id = "unstorable"
        case .twoKeys: id = "twoKeys"
        case .noKey: id = "noKey"
        case .optionalKey: id = "optionalKey"
        }
        return MessageID(domain: "DataStoreMacros", id: id)
    }

    var severity: DiagnosticSeverity { .error }
}

enum ModelFixIt: FixItMessage {
    case makeVar
    case addType(String)
    case markKey(String)
    case removeOptional

    var message: String {
        switch self {
        case .makeVar: return "make it a var"
        case .addType(let type): return "declare it \(type)"
        case .markKey(let name): return "mark '\(name)' @StoredKey"
        case .removeOptional: return "make the key non-optional"
        }
    }

    var fixItID: MessageID {
        switch self {
        case .makeVar: return MessageID(domain: "DataStoreMacros", id: "makeVar")
        case .addType: return MessageID(domain: "DataStoreMacros", id: "addType")
        case .markKey: return MessageID(domain: "DataStoreMacros", id: "markKey")
        case .removeOptional: return MessageID(domain: "DataStoreMacros", id: "removeOptional")
        }
    }
}
#endif

@_spi(Backend) import DataStoreAPI
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// A Core Data managed object model, as much of it as a copy needs: entities with their parent,
/// attributes and relationships. Read from the store's own `Z_MODELCACHE` (the compiled model,
/// an NSKeyedArchiver archive compressed with raw DEFLATE) or from the app's
/// `.xcdatamodeld`/`.xcdatamodel` (XML `contents` files).
struct CoreDataModel: Sendable {
    struct Attribute: Sendable {
        var name: String
        /// `NSAttributeType`: 100 Int16, 200 Int32, 300 Int64, 400 Decimal, 500 Double, 600 Float,
        /// 700 String, 800 Boolean, 900 Date, 1000 Binary, 1100 UUID, 1200 URI, 1800
        /// Transformable, 2000 ObjectID, 2100 Composite.
        var type: Int
        var isOptional: Bool
        var isTransient: Bool
        var allowsExternalStorage: Bool
        /// A composite's elements (type 2100: SwiftData's stored struct), in their declared
        /// order; an element may be a composite itself.
        var elements: [Attribute] = []
    }

    struct Relationship: Sendable {
        var name: String
        var destination: String
        var inverse: String?
        var isToMany: Bool
        var isOrdered: Bool
        var isOptional: Bool
        var isTransient: Bool
        /// `NSDeleteRule`: 0 no action, 1 nullify, 2 cascade, 3 deny.
        var deleteRule: Int
        /// The column that holds a to-one, when it is not `Z` and the name in capitals: the
        /// inverse this reader adds to a to-many that has none (`Z<n><NAME>`).
        var column: String? = nil
    }

    struct Entity: Sendable {
        var name: String
        /// The entity's name in the store's `Z_PRIMARYKEY` when the model renamed it
        /// (`NSRenamingIdentifier`: a lightweight migration keeps the old name there).
        var renamingIdentifier: String? = nil
        var parent: String?
        var isAbstract: Bool
        /// Declared on this entity (not inherited).
        var attributes: [Attribute]
        var relationships: [Relationship]
    }

    var entities: [Entity]

    func entity(_ name: String) -> Entity? { entities.first { $0.name == name } }

    /// The root of `name`'s hierarchy.
    func root(of name: String) -> String {
        var current = name
        var seen: Set<String> = []
        while let parent = entity(current)?.parent, seen.insert(current).inserted { current = parent }
        return current
    }

    /// `name` and every entity below it.
    func hierarchy(of name: String) -> [Entity] {
        entities.filter { candidate in
            var current: String? = candidate.name
            var seen: Set<String> = []
            while let this = current, seen.insert(this).inserted {
                if this == name { return true }
                current = entity(this)?.parent
            }
            return false
        }
    }

    // MARK: The model cache

    /// The model Core Data keeps in the store (`Z_MODELCACHE.Z_CONTENT`).
    init(modelCache compressed: [UInt8], what: String) throws {
        let data = try KeyedArchive.inflateRaw(compressed, what: what)
        let archive = try KeyedArchive(propertyList: data, what: what)
        var entities: [Entity] = []
        var seenNames: Set<String> = []
        for object in archive.objects {
            guard case .dictionary(let fields) = object, archive.className(fields) == "NSEntityDescription",
                  let name = archive.string(fields, "NSEntityName"), seenNames.insert(name).inserted else { continue }
            let parent = archive.fields(fields["NSSuperentity"]).flatMap { archive.string($0, "NSEntityName") }
            var attributes: [Attribute] = []
            var relationships: [Relationship] = []
            for (propertyName, reference) in archive.dictionary(fields, "NSProperties") {
                guard var property = archive.fields(reference) else { continue }
                var className = archive.className(property) ?? ""
                // An inherited property is a proxy of the superentity's.
                if className == "_NSPropertyDescriptionProxy" {
                    guard let underlying = archive.fields(property["NSUnderlyingProperty"]) else { continue }
                    property = underlying
                    className = archive.className(property) ?? ""
                }
                // Declared here: the property's entity is this one (an inherited one names its own).
                if let owner = archive.fields(property["NSEntity"]).flatMap({ archive.string($0, "NSEntityName") }),
                   owner != name { continue }
                let flags = archive.int(property, "_P") ?? 0
                let optional = archive.bool(property, "NSIsOptional") || flags & 0x2 != 0
                let transient = archive.bool(property, "NSIsTransient") || flags & 0x8 != 0
                let ordered = archive.bool(property, "NSIsOrdered") || flags & 0x400 != 0
                let propertyName = archive.string(property, "NSPropertyName") ?? propertyName
                switch className {
                case "NSRelationshipDescription":
                    let destination = archive.string(property, "_NSDestinationEntityName")
                        ?? archive.fields(property["NSDestinationEntity"]).flatMap { archive.string($0, "NSEntityName") }
                    let inverse = archive.string(property, "_NSInverseRelationshipName")
                        ?? archive.fields(property["NSInverseRelationship"]).flatMap { archive.string($0, "NSPropertyName") }
                    guard let destination else {
                        throw StoreError(.corrupt, "\(what): relationship '\(name).\(propertyName)' names no destination")
                    }
                    relationships.append(Relationship(
                        name: propertyName, destination: destination, inverse: inverse,
                        isToMany: (archive.int(property, "NSMaxCount") ?? 0) != 1, isOrdered: ordered,
                        isOptional: optional, isTransient: transient,
                        deleteRule: archive.int(property, "NSDeleteRule") ?? 1))
                case "NSFetchedPropertyDescription":
                    continue
                default:
                    guard let attribute = Self.attribute(property, named: propertyName, in: archive, depth: 0) else {
                        continue
                    }
                    attributes.append(attribute)
                }
            }
            let renamed = archive.string(fields, "NSRenamingIdentifier").flatMap { $0 == name ? nil : $0 }
            entities.append(Entity(name: name, renamingIdentifier: renamed, parent: parent,
                                   isAbstract: archive.bool(fields, "NSIsAbstract"),
                                   attributes: attributes.sorted { $0.name < $1.name },
                                   relationships: relationships.sorted { $0.name < $1.name }))
        }
        guard !entities.isEmpty else {
            throw StoreError(.corrupt, "\(what) holds no entity descriptions")
        }
        self.entities = Self.ownProperties(entities).sorted { $0.name < $1.name }
    }

    /// An attribute of the archive (`NSAttributeDescription`, or `NSCompositeAttributeDescription`
    /// with its `NSCompositeElements`, nested at most 16 deep), or `nil` without a type.
    private static func attribute(_ fields: KeyedArchive.Fields, named name: String, in archive: KeyedArchive,
                                  depth: Int) -> Attribute? {
        guard let type = archive.int(fields, "NSAttributeType") else { return nil }
        let flags = archive.int(fields, "_P") ?? 0
        var attribute = Attribute(name: archive.string(fields, "NSPropertyName") ?? name, type: type,
                                  isOptional: archive.bool(fields, "NSIsOptional") || flags & 0x2 != 0,
                                  isTransient: archive.bool(fields, "NSIsTransient") || flags & 0x8 != 0,
                                  allowsExternalStorage: (archive.int(fields, "NSFlagsKey") ?? 0) & 0x4 != 0)
        if type == 2100, depth < 16 {
            attribute.elements = archive.array(fields, "NSCompositeElements").compactMap { reference in
                archive.fields(reference).flatMap { Self.attribute($0, named: "", in: archive, depth: depth + 1) }
            }
        }
        return attribute
    }

    /// The entities with only the properties each declares itself. Apple's model caches carry an
    /// inherited property in one of two forms: a `_NSPropertyDescriptionProxy` of the ancestor's
    /// (dropped while reading, since it names the ancestor), or a full copy of it whose
    /// `NSEntity` is the subentity. A subentity's property is inherited when an ancestor declares
    /// one of the same name, so those copies are dropped here; a property that no ancestor
    /// declares is the subentity's own.
    static func ownProperties(_ entities: [Entity]) -> [Entity] {
        let byName = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        return entities.map { entity in
            var inherited: Set<String> = []
            var seen: Set<String> = [entity.name]
            var ancestor = entity.parent
            while let name = ancestor, seen.insert(name).inserted, let parent = byName[name] {
                inherited.formUnion(parent.attributes.map(\.name))
                inherited.formUnion(parent.relationships.map(\.name))
                ancestor = parent.parent
            }
            guard !inherited.isEmpty else { return entity }
            var own = entity
            own.attributes.removeAll { inherited.contains($0.name) }
            own.relationships.removeAll { inherited.contains($0.name) }
            return own
        }
    }

    // MARK: The model file

    /// The model of an `.xcdatamodeld` (its current version, named by `.xccurrentversion`, or its
    /// only one), an `.xcdatamodel` directory, or a `contents` file.
    init(modelFile path: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw StoreError(.notFound, "the model \(path) does not exist")
        }
        var contents = path
        if isDirectory.boolValue {
            if path.hasSuffix(".xcdatamodeld") || path.hasSuffix(".xcdatamodeld/") {
                let versions = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [])
                    .filter { $0.hasSuffix(".xcdatamodel") }.sorted()
                var chosen = versions.count == 1 ? versions.first : nil
                let current = (path as NSString).appendingPathComponent(".xccurrentversion")
                if let text = try? String(contentsOfFile: current, encoding: .utf8),
                   let range = text.range(of: #"<string>([^<]+\.xcdatamodel)</string>"#, options: .regularExpression) {
                    chosen = String(text[range]).replacingOccurrences(of: "<string>", with: "")
                        .replacingOccurrences(of: "</string>", with: "")
                }
                guard let chosen else {
                    throw StoreError(.invalidArgument, "the model \(path) holds \(versions.count) versions and no "
                        + ".xccurrentversion naming one: pass the .xcdatamodel of the store's version")
                }
                contents = (path as NSString).appendingPathComponent(chosen + "/contents")
            } else {
                contents = (path as NSString).appendingPathComponent("contents")
            }
        }
        guard let data = FileManager.default.contents(atPath: contents) else {
            let folder = PathNames.directory(of: contents)
            if FileManager.default.fileExists(atPath: (folder as NSString).appendingPathComponent("elements")) {
                throw StoreError(.invalidArgument, "the model \(folder) is in Xcode's old binary form (an 'elements' "
                    + "file, no 'contents'), which this reader does not read: open it once in Xcode 4 or later, "
                    + "which saves it as XML, or leave out --model when the store keeps its model (Z_MODELCACHE)")
            }
            throw StoreError(.notFound, "the model file \(contents) cannot be read")
        }
        try self.init(modelXML: data, what: contents)
    }

    /// The model of a `contents` XML file: `<entity name parentEntity isAbstract>` holding
    /// `<attribute name attributeType optional transient allowsExternalBinaryDataStorage>` and
    /// `<relationship name destinationEntity inverseName toMany ordered optional deletionRule
    /// maxCount>` elements.
    init(modelXML data: Data, what: String) throws {
        var entities: [Entity] = []
        for element in try XMLElements(data, what: what).elements {
            switch element.name {
            case "entity":
                guard let name = element.attributes["name"] else {
                    throw StoreError(.corrupt, "\(what): an <entity> has no name")
                }
                let renamed = element.attributes["elementID"].flatMap { $0 == name ? nil : $0 }
                entities.append(Entity(name: name, renamingIdentifier: renamed, parent: element.attributes["parentEntity"],
                                       isAbstract: element.attributes["isAbstract"] == "YES", attributes: [],
                                       relationships: []))
            case "attribute":
                guard !entities.isEmpty, let name = element.attributes["name"] else { continue }
                let typeName = element.attributes["attributeType"] ?? "Undefined"
                guard let type = Self.attributeTypes[typeName] else {
                    throw StoreError(.invalidArgument, "\(what): attribute '\(entities[entities.count - 1].name)."
                        + "\(name)' has type '\(typeName)', which this reader does not know")
                }
                entities[entities.count - 1].attributes.append(Attribute(
                    name: name, type: type, isOptional: element.attributes["optional"] == "YES",
                    isTransient: element.attributes["transient"] == "YES",
                    allowsExternalStorage: element.attributes["allowsExternalBinaryDataStorage"] == "YES"))
            case "relationship":
                guard !entities.isEmpty, let name = element.attributes["name"],
                      let destination = element.attributes["destinationEntity"] else { continue }
                let rules = ["No Action": 0, "Nullify": 1, "Cascade": 2, "Deny": 3]
                let toMany = element.attributes["toMany"] == "YES"
                entities[entities.count - 1].relationships.append(Relationship(
                    name: name, destination: destination, inverse: element.attributes["inverseName"],
                    isToMany: toMany, isOrdered: element.attributes["ordered"] == "YES",
                    isOptional: element.attributes["optional"] == "YES",
                    isTransient: element.attributes["transient"] == "YES",
                    deleteRule: rules[element.attributes["deletionRule"] ?? "Nullify"] ?? 1))
            default:
                continue
            }
        }
        guard !entities.isEmpty else { throw StoreError(.corrupt, "\(what) holds no <entity> elements") }
        self.entities = Self.ownProperties(entities).sorted { $0.name < $1.name }
    }

    static let attributeTypes: [String: Int] = [
        "Undefined": 0, "Integer 16": 100, "Integer 32": 200, "Integer 64": 300, "Decimal": 400, "Double": 500,
        "Float": 600, "String": 700, "Boolean": 800, "Date": 900, "Binary": 1000, "UUID": 1100, "URI": 1200,
        "Transformable": 1800, "ObjectID": 2000, "Composite": 2100,
    ]
}

/// The start tags of an XML document, in document order, with their attributes as an XML parser
/// reads them (Foundation's `XMLParser`: quoted values that hold `>`, comments, CDATA, character
/// and entity references, all as XML defines them): enough to read a Core Data model's
/// `contents`, whose elements carry everything in attributes.
struct XMLElements {
    struct Element {
        var name: String
        var attributes: [String: String]
    }

    let elements: [Element]

    /// The elements of `data`, named `what` in the error when it is not well-formed XML.
    /// - Throws: `corrupt` naming the line and column where the parser stopped.
    init(_ data: Data, what: String) throws {
        let parser = XMLParser(data: data)
        let collector = Collector()
        parser.delegate = collector
        parser.shouldResolveExternalEntities = false
        // FoundationXML's parse() may return true with an error set (an element left open).
        let parsed = parser.parse()
        if !parsed || parser.parserError != nil {
            throw StoreError(.corrupt, "\(what) is not well-formed XML at line \(parser.lineNumber), column "
                + "\(parser.columnNumber): \(Self.reason(parser.parserError))")
        }
        elements = collector.elements
    }

    private static func reason(_ error: (any Error)?) -> String {
        let code = (error as NSError?)?.code ?? 0
        switch XMLParser.ErrorCode(rawValue: code) {
        case .prematureDocumentEndError?: return "it ends with an element still open"
        case .documentStartError?, .emptyDocumentError?: return "it does not begin as XML"
        case .tagNameMismatchError?: return "an end tag does not match its start tag"
        case .attributeNotStartedError?, .attributeNotFinishedError?:
            return "an attribute is malformed"
        case .entityRefAtEOFError?, .entityRefLoopError?, .undeclaredEntityError?, .unparsedEntityError?,
             .entityReferenceWithoutNameError?, .entityReferenceMissingSemiError?:
            return "an entity reference is malformed"
        default: return "XML parser error \(code)"
        }
    }

    private final class Collector: NSObject, XMLParserDelegate {
        var elements: [Element] = []

        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                    qualifiedName: String?, attributes: [String: String] = [:]) {
            elements.append(Element(name: elementName, attributes: attributes))
        }
    }
}

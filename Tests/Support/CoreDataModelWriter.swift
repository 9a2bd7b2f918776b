import Foundation

/// A Core Data model as a test writes it into a store's `Z_MODELCACHE`: entities with their
/// parent and the properties each declares, archived as Core Data archives a compiled model.
public struct CoreDataModelWriter {
    /// How a subentity's archive carries the properties it inherits.
    public enum InheritedProperties: Sendable, CaseIterable {
        /// A `_NSPropertyDescriptionProxy` of the ancestor's property.
        case proxies
        /// A full copy of the ancestor's property, its `NSEntity` the subentity: what Apple's
        /// framework writes in the stores it creates.
        case fullCopies
    }

    public enum Property {
        case attribute(String, type: Int, optional: Bool = true, transient: Bool = false, external: Bool = false,
                       derived: Bool = false)
        case relationship(String, to: String, inverse: String?, toMany: Bool, ordered: Bool = false, rule: Int = 1,
                          optional: Bool = true)
        /// A composite attribute (type 2100, `NSCompositeAttributeDescription`) and its elements
        /// (attributes or composites), as SwiftData archives a stored struct or enum.
        indirect case composite(String, elements: [Property], optional: Bool = true)

        var name: String {
            switch self {
            case .attribute(let name, _, _, _, _, _), .relationship(let name, _, _, _, _, _, _),
                 .composite(let name, _, _): name
            }
        }
    }

    public struct Entity {
        public var name: String
        public var parent: String?
        public var properties: [Property]
        /// The model's uniqueness constraints (archived as `NSUniqueTuples`): each a list of
        /// attribute names.
        public var uniquenessConstraints: [[String]]

        public init(_ name: String, parent: String? = nil, _ properties: [Property],
                    uniquenessConstraints: [[String]] = []) {
            self.name = name
            self.parent = parent
            self.properties = properties
            self.uniquenessConstraints = uniquenessConstraints
        }
    }

    public var entities: [Entity]
    public var inherited: InheritedProperties

    public init(_ entities: [Entity], inherited: InheritedProperties) {
        self.entities = entities
        self.inherited = inherited
    }

    /// The entity's ancestors, nearest first.
    func ancestors(of name: String) -> [Entity] {
        var result: [Entity] = []
        var current = entities.first { $0.name == name }?.parent
        while let parent = current, let entity = entities.first(where: { $0.name == parent }) {
            result.append(entity)
            current = entity.parent
        }
        return result
    }

    /// The NSKeyedArchiver archive of the model (before Core Data's raw DEFLATE).
    public func archive() -> [UInt8] {
        var archive = KeyedArchiveWriter()
        let model = archive.reserve()
        let names = entities.map(\.name).sorted()
        var entityRefs: [String: Int] = [:]
        for name in names { entityRefs[name] = archive.reserve() }
        func add(_ property: Property, of entity: String) -> Int {
            switch property {
            case let .attribute(name, type, optional, transient, external, derived):
                var fields: [String: KeyedArchiveWriter.Item] = [
                    "NSPropertyName": .string(name), "NSEntity": .reference(entityRefs[entity] ?? 0),
                    "NSAttributeType": .int(type), "_P": .int(optional ? 3 : 1), "NSFlagsKey": .int(external ? 4 : 0),
                ]
                if optional { fields["NSIsOptional"] = .bool(true) }
                if transient { fields["NSIsTransient"] = .bool(true) }
                if derived { fields["NSDerivationExpression"] = .string("name.lowercase") }
                return archive.add(className: derived ? "NSDerivedAttributeDescription" : "NSAttributeDescription",
                                   fields, classes: derived
                                    ? ["NSDerivedAttributeDescription", "NSAttributeDescription",
                                       "NSPropertyDescription", "NSObject"] : nil)
            case let .composite(name, elements, optional):
                let references = elements.map { add($0, of: entity) }
                let list = archive.add(className: "NSMutableArray", ["NS.objects": .array(references.map { .reference($0) })],
                                       classes: ["NSMutableArray", "NSArray", "NSObject"])
                var fields: [String: KeyedArchiveWriter.Item] = [
                    "NSPropertyName": .string(name), "NSEntity": .reference(entityRefs[entity] ?? 0),
                    "NSAttributeType": .int(2100), "_P": .int(optional ? 243 : 177), "NSFlagsKey": .int(0),
                    "NSAttributeValueClassName": .string("NSDictionary"), "NSCompositeElements": .reference(list),
                ]
                if optional { fields["NSIsOptional"] = .bool(true) }
                return archive.add(className: "NSCompositeAttributeDescription", fields, classes: [
                    "NSCompositeAttributeDescription", "NSAttributeDescription", "NSPropertyDescription", "NSObject",
                ])
            case let .relationship(name, destination, inverse, toMany, ordered, rule, optional):
                var fields: [String: KeyedArchiveWriter.Item] = [
                    "NSPropertyName": .string(name), "NSEntity": .reference(entityRefs[entity] ?? 0),
                    "NSMaxCount": .int(toMany ? 0 : 1), "NSMinCount": .int(0), "NSDeleteRule": .int(rule),
                    "NSDestinationEntity": .reference(entityRefs[destination] ?? 0),
                    "_NSDestinationEntityName": .string(destination),
                    "_P": .int((optional ? 3 : 1) | (ordered ? 0x400 : 0)),
                ]
                if let inverse { fields["_NSInverseRelationshipName"] = .string(inverse) }
                if optional { fields["NSIsOptional"] = .bool(true) }
                if ordered { fields["NSIsOrdered"] = .bool(true) }
                return archive.add(className: "NSRelationshipDescription", fields)
            }
        }
        // Each entity's own properties first, so that proxies can refer to them.
        var own: [String: [(String, Int)]] = [:]
        for entity in entities {
            own[entity.name] = entity.properties.map { ($0.name, add($0, of: entity.name)) }
        }
        func dictionary(_ pairs: [(String, Int)]) -> KeyedArchiveWriter.Item {
            .reference(archive.add(className: "NSDictionary", [
                "NS.keys": .array(pairs.map { .string($0.0) }), "NS.objects": .array(pairs.map { .reference($0.1) }),
            ], classes: ["NSDictionary", "NSObject"]))
        }
        for entity in entities.sorted(by: { $0.name < $1.name }) {
            var properties: [(String, Int)] = []
            for ancestor in ancestors(of: entity.name).reversed() {
                for (property, (name, ref)) in zip(ancestor.properties, own[ancestor.name] ?? []) {
                    switch inherited {
                    case .proxies:
                        properties.append((name, archive.add(className: "_NSPropertyDescriptionProxy", [
                            "NSUnderlyingProperty": .reference(ref), "NSEntity": .reference(entityRefs[entity.name] ?? 0),
                            "NSReferenceID": .int(0),
                        ])))
                    case .fullCopies:
                        properties.append((name, add(property, of: entity.name)))
                    }
                }
            }
            properties += own[entity.name] ?? []
            let subentities = entities.filter { $0.parent == entity.name }.map { ($0.name, entityRefs[$0.name] ?? 0) }
            var fields: [String: KeyedArchiveWriter.Item] = [
                "NSEntityName": .string(entity.name), "NSClassNameForEntity": .string("NSManagedObject"),
                "NSProperties": dictionary(properties), "NSManagedObjectModel": .reference(model),
                "NSSubentities": dictionary(subentities),
            ]
            if !entity.uniquenessConstraints.isEmpty {
                fields["NSUniqueTuples"] = .array(entity.uniquenessConstraints.map { constraint in
                    .reference(archive.add(className: "NSArray", ["NS.objects": .array(constraint.map { .string($0) })],
                                           classes: ["NSArray", "NSObject"]))
                })
            }
            if let parent = entity.parent { fields["NSSuperentity"] = .reference(entityRefs[parent] ?? 0) }
            archive.fill(entityRefs[entity.name] ?? 0, className: "NSEntityDescription", fields)
        }
        archive.fill(model, className: "NSManagedObjectModel",
                     ["NSEntities": dictionary(names.map { ($0, entityRefs[$0] ?? 0) })])
        return archive.encoded(root: model)
    }
}

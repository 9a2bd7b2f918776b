@_spi(Backend) import DataStoreAPI
import Foundation

/// One JSON object mapped onto an item of an entity, with its nested objects: everything an
/// import needs to write it, found before anything is written, so that an object that cannot be
/// mapped (at any depth) is rejected whole.
final class ImportObject {
    /// An item a to-many relationship relates the object to: a nested object, or a key.
    enum Child {
        case object(ImportObject)
        case key(Value)
    }

    let entity: EntitySchema
    let key: Value
    /// The attributes the object gives, by name; a to-one given by key is among them.
    var values: [String: Value] = [:]
    /// The to-one attributes the object gives by key, which must name existing items.
    var references: [Relationship] = []
    /// The to-one relationships given as nested objects.
    var toOne: [(Relationship, ImportObject)] = []
    /// The to-many relationships the object gives, with the items it lists, in input order.
    var toMany: [(Relationship, [Child])] = []

    init(entity: EntitySchema, key: Value) {
        self.entity = entity
        self.key = key
    }

    /// Maps `json` onto an item of `entity`.
    /// - Throws: ``JSONImport/ImportRejection`` naming the key (with its path inside the object)
    ///   and what is wrong.
    static func map(_ json: JSON, into entity: EntitySchema, schema: Schema, names: ImportNames,
                    options: JSONImport.Options, path: String = "") throws -> ImportObject {
        guard case .object(let fields) = json else {
            throw JSONImport.ImportRejection("\(path.isEmpty ? "" : path + " is ")not a JSON object")
        }
        let object = ImportObject(entity: entity, key: try primaryKey(fields, entity, names, options, path))
        var given = Set<String>()
        func label(_ key: String) -> String { path.isEmpty ? "'\(key)'" : "'\(path).\(key)'" }
        for (key, value) in fields {
            guard let target = names.target(key, in: entity) else { continue }
            switch target {
            case .attribute(let attribute):
                guard given.insert(attribute.name).inserted else {
                    throw JSONImport.ImportRejection("attribute '\(attribute.name)' is given twice")
                }
                guard let converted = convert(value, to: attribute.type, options) else {
                    throw JSONImport.ImportRejection("\(label(key)) holds \(value.summary), which is not a "
                        + "\(attribute.type)")
                }
                object.values[attribute.name] = converted
                if let relationship = entity.relationship(named: attribute.name), !converted.isNull {
                    object.references.append(relationship)
                }
            case .toOne(let relationship):
                guard given.insert(relationship.name).inserted else {
                    throw JSONImport.ImportRejection("relationship '\(relationship.name)' is given twice")
                }
                guard let destination = schema.entity(named: relationship.destination) else { continue }
                switch value {
                case .object:
                    let nested = try map(value, into: destination, schema: schema, names: names, options: options,
                                         path: path.isEmpty ? key : "\(path).\(key)")
                    object.toOne.append((relationship, nested))
                case .null:
                    object.values[relationship.name] = .null
                default:
                    guard let target = convert(value, to: destination.primaryKeyType, options), !target.isNull else {
                        throw JSONImport.ImportRejection("\(label(key)) holds \(value.summary), which is neither an "
                            + "object nor a key of '\(destination.name)'")
                    }
                    object.values[relationship.name] = target
                    object.references.append(relationship)
                }
            case .toMany(let relationship):
                guard given.insert(relationship.name).inserted else {
                    throw JSONImport.ImportRejection("relationship '\(relationship.name)' is given twice")
                }
                guard let destination = schema.entity(named: relationship.destination) else { continue }
                if case .null = value {
                    object.toMany.append((relationship, []))
                    continue
                }
                guard case .array(let items) = value else {
                    throw JSONImport.ImportRejection("\(label(key)) holds \(value.summary), which is not an array")
                }
                var children: [Child] = []
                for (position, item) in items.enumerated() {
                    let itemPath = (path.isEmpty ? key : "\(path).\(key)") + "[\(position)]"
                    if case .object = item {
                        children.append(.object(try map(item, into: destination, schema: schema, names: names,
                                                        options: options, path: itemPath)))
                    } else if let target = convert(item, to: destination.primaryKeyType, options), !target.isNull {
                        children.append(.key(target))
                    } else {
                        throw JSONImport.ImportRejection("'\(itemPath)' holds \(item.summary), which is neither an "
                            + "object nor a key of '\(destination.name)'")
                    }
                }
                object.toMany.append((relationship, children))
            }
        }
        return object
    }

    /// The object's primary key.
    static func primaryKey(_ fields: [(key: String, value: JSON)], _ entity: EntitySchema, _ names: ImportNames,
                           _ options: JSONImport.Options, _ path: String) throws -> Value {
        for (key, json) in fields {
            guard case .attribute(let attribute)? = names.target(key, in: entity),
                  attribute.name == entity.primaryKey else { continue }
            guard let value = convert(json, to: attribute.type, options), !value.isNull else {
                throw JSONImport.ImportRejection("\(path.isEmpty ? "" : path + ": ")primary key '\(key)' holds "
                    + "\(json.summary), which is not a \(attribute.type)")
            }
            return value
        }
        throw JSONImport.ImportRejection("\(path.isEmpty ? "" : path + ": ")no primary key '\(entity.primaryKey)'")
    }

    /// A JSON value as a value of `type`, with Sync's dates; `nil` when it is not one.
    static func convert(_ json: JSON, to type: ValueType, _ options: JSONImport.Options) -> Value? {
        switch (json, type) {
        case (.number(let text), .date):
            return Double(text).flatMap { ImportDates.timestamp($0, epoch: options.epochUnit) }.map(Value.date)
        case (.string(let text), .date):
            return ImportDates.parse(text, epoch: options.epochUnit).map(Value.date)
        case (.number(let text), .double):
            guard let d = Double(text), d.isFinite else { return nil }
            return .double(d)
        case (.number(let text), .int):
            if let i = Int64(text) { return .int(i) }
            // An integral number written with a fraction or exponent (3.0, 1e3).
            guard let d = Double(text), d.rounded() == d, let i = Int64(exactly: d) else { return nil }
            return .int(i)
        case (.string(let text), .int):
            // A key sent as text ("company_id": "7"), as APIs often do.
            return Int64(text).map(Value.int)
        default:
            return JSONLineCodec.value(json, as: type)
        }
    }
}

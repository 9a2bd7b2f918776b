import DataStoreAPI
import Foundation

/// What a store must hold after schema steps, computed on plain dictionaries by code of its
/// own: the oracle of the schema-upgrade cases.
struct UpgradeOracle {
    var schema: Schema
    /// Items by entity, then by primary-key value.
    var items: [String: [Value: [String: Value]]] = [:]

    init(schema: Schema) {
        self.schema = schema
    }

    mutating func insert(_ record: [String: Value], into entityName: String) {
        let entity = schema.entity(named: entityName)!
        var full: [String: Value] = [:]
        for attribute in entity.attributes {
            var value = record[attribute.name] ?? attribute.defaultValue ?? .null
            if attribute.type == .double, case .int(let i) = value { value = .double(Double(i)) }
            full[attribute.name] = value
        }
        items[entityName, default: [:]][full[entity.primaryKey]!] = full
    }

    private func index(of name: String) -> Int { schema.entities.firstIndex { $0.name == name }! }

    /// Whether the oracle accepts the step: everything it names exists, nothing it adds does,
    /// and it leaves no index over a missing attribute or a key that is not the key.
    private func accepts(_ step: SchemaStep) -> Bool {
        func taken(_ name: String, _ names: [String]) -> Bool { names.contains { $0.lowercased() == name.lowercased() } }
        let entityNames = schema.entities.map(\.name)
        if case .addEntity(let entity) = step { return !taken(entity.name, entityNames) }
        guard let entity = schema.entity(named: step.entityName) else { return false }
        let attributes = entity.attributes.map(\.name)
        switch step {
        case .addEntity: return false
        case .removeEntity: return true
        case .renameEntity(_, let to): return !taken(to, entityNames)
        case .addAttribute(_, let attribute):
            return !taken(attribute.name, attributes) && (attribute.isOptional || attribute.defaultValue != nil)
        case .removeAttribute(_, let name):
            return attributes.contains(name) && name != entity.primaryKey
                && !entity.indexes.contains { $0.attributes.contains(name) }
        case let .renameAttribute(_, from, to): return attributes.contains(from) && !taken(to, attributes)
        case let .changeType(_, attribute, type, _):
            guard let before = entity.attribute(named: attribute), attribute != entity.primaryKey else { return false }
            return before.type == type || ValueConversion.isDefined(from: before.type, to: type)
        case .addIndex(_, let index):
            return !taken(index.name, entity.indexes.map(\.name)) && index.attributes.allSatisfy(attributes.contains)
        case .removeIndex(_, let name): return entity.indexes.contains { $0.name == name }
        case .addRelationship, .removeRelationship, .changeDeleteRule: return false
        }
    }

    /// Applies a step; returns false when the oracle expects the step to fail.
    mutating func apply(_ step: SchemaStep) -> Bool {
        guard accepts(step) else { return false }
        switch step {
        case .addEntity(let entity):
            schema.entities.append(entity)
            items[entity.name] = [:]
        case .removeEntity(let name):
            schema.entities.remove(at: index(of: name))
            items[name] = nil
        case let .renameEntity(from, to):
            schema.entities[index(of: from)].name = to
            items[to] = items.removeValue(forKey: from)
        case let .addAttribute(name, attribute):
            schema.entities[index(of: name)].attributes.append(attribute)
            for key in items[name, default: [:]].keys {
                items[name]![key]![attribute.name] = attribute.defaultValue ?? .null
            }
        case let .removeAttribute(name, attribute):
            schema.entities[index(of: name)].attributes.removeAll { $0.name == attribute }
            for key in items[name, default: [:]].keys { items[name]![key]![attribute] = nil }
        case let .renameAttribute(name, from, to):
            let i = index(of: name)
            for j in schema.entities[i].attributes.indices where schema.entities[i].attributes[j].name == from {
                schema.entities[i].attributes[j].name = to
            }
            if schema.entities[i].primaryKey == from { schema.entities[i].primaryKey = to }
            schema.entities[i].indexes = schema.entities[i].indexes.map {
                Index($0.name, on: $0.attributes.map { $0 == from ? to : $0 }, unique: $0.isUnique)
            }
            for key in items[name, default: [:]].keys {
                items[name]![key]![to] = items[name]![key]!.removeValue(forKey: from)
            }
        case let .changeType(name, attribute, type, optional):
            let i = index(of: name)
            let j = schema.entities[i].attributes.firstIndex { $0.name == attribute }!
            schema.entities[i].attributes[j].type = type
            if let optional { schema.entities[i].attributes[j].isOptional = optional }
            let required = !schema.entities[i].attributes[j].isOptional
            if let value = schema.entities[i].attributes[j].defaultValue {
                schema.entities[i].attributes[j].defaultValue = Self.convert(value, to: type)
            }
            for key in items[name, default: [:]].keys {
                guard let converted = Self.convert(items[name]![key]![attribute]!, to: type),
                      !(converted.isNull && required) else { return false }
                items[name]![key]![attribute] = converted
            }
        case let .addIndex(name, index):
            schema.entities[self.index(of: name)].indexes.append(index)
            if index.isUnique && hasDuplicates(name, index) { return false }
        case let .removeIndex(name, index):
            schema.entities[self.index(of: name)].indexes.removeAll { $0.name == index }
        case .addRelationship, .removeRelationship, .changeDeleteRule:
            return false
        }
        return true
    }

    private func hasDuplicates(_ name: String, _ index: Index) -> Bool {
        var seen = Set<[Value]>()
        for item in items[name, default: [:]].values {
            let tuple = index.attributes.map { value -> Value in
                if case .double(let d) = item[value]!, d == 0 { return .double(0) }
                return item[value]!
            }
            if tuple.contains(where: \.isNull) { continue }
            if !seen.insert(tuple).inserted { return true }
        }
        return false
    }

    /// The conversions, spelled out case by case for the values the suite uses.
    static func convert(_ value: Value, to type: ValueType) -> Value? {
        switch (value, type) {
        case (.null, _): return .null
        case (_, _) where value.type == type: return value
        case (.int(let i), .double): return .double(Double(i))
        case (.int(let i), .string): return .string("\(i)")
        case (.int(let i), .date): return .date(Timestamp(microsecondsSinceEpoch: i))
        case (.int(0), .bool): return .bool(false)
        case (.int(1), .bool): return .bool(true)
        case (.double(let d), .int): return d.rounded() == d && abs(d) < 9e18 ? .int(Int64(d)) : nil
        case (.double(let d), .string): return .string("\(d)")
        case (.bool(let b), .int): return .int(b ? 1 : 0)
        case (.bool(let b), .string): return .string(b ? "true" : "false")
        case (.date(let t), .int): return .int(t.microsecondsSinceEpoch)
        case (.uuid(let u), .string): return .string(u.uuidString)
        case (.string(let s), .int): return Int64(s).map { .int($0) }
        case (.string(let s), .double): return Double(s).map { .double($0) }
        default: return nil
        }
    }

    /// Checks that `store` holds exactly the oracle's schema and items.
    func check(_ store: any DataStore, _ c: ConformanceContext, _ what: String) throws {
        c.expectEqual(store.schema.entities.map(\.name).sorted(), schema.entities.map(\.name).sorted(),
                      "\(what): entities")
        for entity in schema.entities {
            c.expectEqual(store.schema.entity(named: entity.name), entity, "\(what): schema of \(entity.name)")
            let stored = try store.read { try $0.fetch(FetchRequest(entity.name)) }
            let expected = items[entity.name, default: [:]]
            c.expectEqual(stored.count, expected.count, "\(what): number of \(entity.name) items")
            for record in stored {
                let key = record[entity.primaryKey]
                guard let want = expected[key] else {
                    c.expect(false, "\(what): \(entity.name)[\(key)] should not exist")
                    continue
                }
                for attribute in entity.attributes where record[attribute.name] != want[attribute.name] {
                    c.expect(false, "\(what): \(entity.name)[\(key)].\(attribute.name) is \(record[attribute.name]), "
                        + "expected \(want[attribute.name] ?? .null)")
                }
            }
            // Every index answers like a scan of the oracle's items.
            for index in entity.indexes {
                let attribute = index.attributes[0]
                // The first six distinct values in canonical order (ties by their text), never a
                // set's order: the same probes on every run and backend.
                let values = Set(expected.values.compactMap { $0[attribute] }).sorted {
                    let order = Value.compareCanonical($0, $1)
                    return order != 0 ? order < 0 : "\($0)" < "\($1)"
                }
                for probe in values.prefix(6) {
                    let filter: Filter = probe.isNull ? .isNull(attribute) : .compare(attribute, .equal, probe)
                    let found = try store.read { try $0.count(FetchRequest(entity.name, filter: filter)) }
                    let want = expected.values.filter {
                        probe.isNull ? $0[attribute]!.isNull : Value.compareCanonical($0[attribute]!, probe) == 0
                    }.count
                    c.expectEqual(found, want, "\(what): index \(entity.name).\(index.name) finds \(probe)")
                }
            }
        }
    }
}

/// A to-one reference that points at no item: what a store written outside the package (a
/// `DELETE` in the `sqlite3` shell with foreign keys off) or a damaged file can hold.
public struct DanglingReference: Sendable, Hashable, CustomStringConvertible {
    /// The entity of the item that holds the reference.
    public var entity: String
    /// That item's primary key.
    public var key: Value
    /// The to-one relationship (and attribute) that holds it.
    public var relationship: String
    /// The entity it should point into.
    public var destination: String
    /// The key it holds, which no item of `destination` has.
    public var target: Value

    public var description: String {
        "'\(entity)' \(key) refers through '\(relationship)' to '\(destination)' \(target), which does not exist"
    }
}

/// What ``ReadAccessor/checkReferences(listing:)`` found.
public struct ReferenceCheckReport: Sendable, Hashable {
    /// How many references were checked.
    public var checked = 0
    /// How many point at nothing.
    public var danglingCount = 0
    /// The first of them, in entity and key order.
    public var dangling: [DanglingReference] = []

    /// One line per dangling reference listed, and how many more there are.
    public var summary: String {
        let more = danglingCount - dangling.count
        return dangling.map(\.description).joined(separator: "; ") + (more > 0 ? "; and \(more) more" : "")
    }
}

extension ReadAccessor {
    /// Checks every to-one reference of the store: each must point at an existing item. Reads
    /// each referencing entity once, in pages, and looks the targets of a page up in one query
    /// per entity they point into.
    /// - Parameter limit: how many dangling references to list (all are counted).
    public func checkReferences(listing limit: Int = 20) throws -> ReferenceCheckReport {
        var report = ReferenceCheckReport()
        let pageSize = Self.keysPerQuery
        for entity in schema.entities {
            guard let references = catalog.graph.references[entity.name] else { continue }
            var after: PrimaryKey?
            var page: [Record] = []
            repeat {
                try reader.scan(entity, after: after, limit: pageSize, into: &page)
                for reference in references {
                    let destination = try self.entity(reference.destination)
                    let targets = Set(page.map { $0[reference.attribute] }.filter { !$0.isNull })
                    let found = try existingKeys(destination, among: Array(targets))
                    for record in page where !record[reference.attribute].isNull {
                        report.checked += 1
                        let target = record[reference.attribute]
                        guard !found.contains(target) else { continue }
                        report.danglingCount += 1
                        if report.dangling.count < limit {
                            report.dangling.append(DanglingReference(
                                entity: entity.name, key: entity.primaryKeyValue(of: record),
                                relationship: reference.attribute, destination: destination.name, target: target))
                        }
                    }
                }
                after = try page.last.map { try PrimaryKey(entity.primaryKeyValue(of: $0)) }
            } while page.count == pageSize
        }
        return report
    }

    /// Which of `values` are keys of `entity`, asked ``keysPerQuery`` at a time.
    private func existingKeys(_ entity: EntitySchema, among values: [Value]) throws -> Set<Value> {
        var found: Set<Value> = []
        var start = 0
        while start < values.count {
            let chunk = Array(values[start..<min(start + Self.keysPerQuery, values.count)])
            found.formUnion(try reader.existingKeys(entity, among: chunk))
            start += chunk.count
        }
        return found
    }
}

import DataStoreAPI

/// A schema drawn as text another tool renders: Mermaid's `erDiagram` (GitHub and most Markdown
/// viewers draw it) or Graphviz's `dot`. Each entity with its attributes (key marked `PK`, to-one
/// references `FK`), each relationship once, with its cardinality and name.
public enum SchemaDiagram {
    public enum Format: String, Sendable, CaseIterable {
        case mermaid
        case dot
    }

    public static func render(_ schema: Schema, as format: Format) -> String {
        switch format {
        case .mermaid: mermaid(schema)
        case .dot: dot(schema)
        }
    }

    /// The relationships to draw: every to-one, and every to-many whose inverse is to-many
    /// (many-to-many, drawn once) — a one-to-many is drawn as its to-one.
    static func edges(_ schema: Schema) -> [(from: String, to: String, name: String, kind: String)] {
        var edges: [(String, String, String, String)] = []
        let joins = Set(schema.entities.flatMap { entity in
            entity.relationships.filter { $0.cardinality == .toMany }.map { Schema.joinEntityName(entity.name, $0) }
        })
        for entity in schema.entities where !joins.contains(entity.name) {
            for relationship in entity.relationships {
                let inverse = relationship.inverse.flatMap { name in
                    schema.entity(named: relationship.destination)?.relationships.first { $0.name == name }
                }
                switch (relationship.cardinality, inverse?.cardinality) {
                case (.toOne, .toMany?):
                    let ordered = inverse?.isOrdered == true ? " (ordered)" : ""
                    edges.append((relationship.destination, entity.name, (inverse?.name ?? relationship.name) + ordered,
                                  relationship.isOptional ? "one-to-many" : "one-to-many, required"))
                case (.toOne, _):
                    edges.append((entity.name, relationship.destination, relationship.name,
                                  relationship.isOptional ? "to-one" : "to-one, required"))
                case (.toMany, .toMany?):
                    if (entity.name, relationship.name) <= (relationship.destination, inverse?.name ?? "") {
                        let ordered = [relationship, inverse].compactMap { $0 }.filter(\.isOrdered).map(\.name)
                        edges.append((entity.name, relationship.destination, relationship.name
                            + (ordered.isEmpty ? "" : " (\(ordered.joined(separator: " and ")) ordered)"), "many-to-many"))
                    }
                case (.toMany, _):
                    continue
                }
            }
        }
        return edges
    }

    static func mermaid(_ schema: Schema) -> String {
        var lines = ["erDiagram"]
        let joins = joinNames(schema)
        for entity in schema.entities where !joins.contains(entity.name) {
            let references = Set(entity.relationships.filter { $0.cardinality == .toOne }.map(\.name))
            lines.append("    \(entity.name) {")
            for attribute in entity.attributes {
                let mark = attribute.name == entity.primaryKey ? " PK" : references.contains(attribute.name) ? " FK" : ""
                lines.append("        \(attribute.type.rawValue) \(attribute.name)\(mark)"
                    + (attribute.isOptional ? " \"optional\"" : ""))
            }
            lines.append("    }")
        }
        for edge in edges(schema) {
            let shape: String
            switch edge.kind {
            case "one-to-many": shape = "|o--o{"
            case "one-to-many, required": shape = "||--o{"
            case "many-to-many": shape = "}o--o{"
            case "to-one, required": shape = "}o--||"
            default: shape = "}o--o|"
            }
            // Mermaid takes a label with spaces in quotes.
            let label = edge.name.contains(" ") ? "\"\(edge.name)\"" : edge.name
            lines.append("    \(edge.from) \(shape) \(edge.to) : \(label)")
        }
        return lines.joined(separator: "\n")
    }

    static func dot(_ schema: Schema) -> String {
        var lines = ["digraph schema {", "    node [shape=record, fontname=\"Helvetica\"];"]
        let joins = joinNames(schema)
        for entity in schema.entities where !joins.contains(entity.name) {
            let fields = entity.attributes.map { attribute in
                (attribute.name == entity.primaryKey ? "\\<PK\\> " : "") + "\(attribute.name): \(attribute.type.rawValue)"
                    + (attribute.isOptional ? "?" : "")
            }
            lines.append("    \(entity.name) [label=\"{\(entity.name)|\(fields.joined(separator: "\\l"))\\l}\"];")
        }
        for edge in edges(schema) {
            let heads: String
            switch edge.kind {
            case "many-to-many": heads = "dir=both, arrowhead=crow, arrowtail=crow"
            case "one-to-many", "one-to-many, required": heads = "arrowhead=crow"
            default: heads = "arrowhead=tee"
            }
            lines.append("    \(edge.from) -> \(edge.to) [label=\"\(edge.name)\", \(heads)];")
        }
        lines.append("}")
        return lines.joined(separator: "\n")
    }

    static func joinNames(_ schema: Schema) -> Set<String> {
        Set(schema.entities.flatMap { entity in
            entity.relationships.filter { relationship in
                relationship.cardinality == .toMany
                    && schema.entity(named: relationship.destination)?.relationships
                        .first { $0.name == relationship.inverse }?.cardinality == .toMany
            }.map { Schema.joinEntityName(entity.name, $0) }
        })
    }
}

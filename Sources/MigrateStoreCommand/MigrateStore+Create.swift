import ArgumentParser
@_spi(Backend) import DataStoreAPI
import Foundation
import StoreMigration

extension MigrateStore {
    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an empty store from a schema file, or with the schema of another store.",
            discussion: """
                A schema file is the JSON that `migrate-store inspect STORE --schema` prints (the form every \
                store keeps its schema in; docs/file-formats.md describes it): a store made with it takes \
                `import`, `sync` and `copy --resume` as one made by an app would.
                """)

        @Argument(help: "The store to create, KIND:PATH.")
        var store: String

        @Option(help: ArgumentHelp("The schema, as JSON.", valueName: "schema.json"))
        var schema: String?

        @Option(name: .customLong("schema-of"), help: ArgumentHelp(
            "Take the schema of this store (it is only read).", valueName: "KIND:PATH"))
        var schemaOf: String?

        func validate() throws {
            if (schema == nil) == (schemaOf == nil) {
                throw ValidationError("give the schema with --schema FILE or --schema-of STORE (one of the two)")
            }
        }

        func run() throws {
            let location = try CommandFailure.catching { try StoreLocation(parsing: store) }
            try CommandFailure.catching {
                let schema: Schema
                if let path = self.schema {
                    guard let data = FileManager.default.contents(atPath: path) else {
                        throw StoreError(.notFound, "the schema file \(path) does not exist or cannot be read")
                    }
                    schema = try JSONInput.decode(Schema.self, from: data, what: "the schema file \(path)")
                } else {
                    let other = try StoreLocation(parsing: schemaOf ?? "")
                    let source = try other.openSource(alreadyChecked: false)
                    schema = source.schema
                    try source.close()
                }
                if location.exists {
                    throw StoreError(.invalidArgument, "\(location) already exists; create makes a new store")
                }
                try Migrator.checkDirectory(of: location)
                let created = try location.open(schema: schema)
                try created.close()
                print("created \(location): schema version \(schema.version), entities "
                    + schema.entities.map(\.name).joined(separator: ", "))
            }
        }
    }
}

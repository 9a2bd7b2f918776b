@_spi(Backend) import DataStoreAPI
import Foundation

/// Imports an API's JSON (an array of objects, or JSON Lines of objects) into an entity with
/// the semantics of the Sync library: JSON keys are mapped onto attributes and relationships,
/// the primary key decides between insert and update, nested objects and arrays are synced into
/// the related entities to any depth, and items the JSON no longer holds are deleted, each of
/// the three operations optional.
public enum JSONImport {
    /// The operations an import may perform.
    public enum Operation: String, Sendable, Codable, CaseIterable {
        case insert, update, delete
    }

    /// How numbers given for dates are read.
    public enum EpochUnit: String, Sendable, Codable {
        /// Seconds since 1970.
        case seconds
        /// Milliseconds since 1970.
        case milliseconds
        /// Milliseconds for a number of magnitude 100,000,000,000 or more (a date past the year
        /// 5138 in seconds), seconds below: what Sync does with the two forms APIs send.
        case automatic
    }

    /// How an import maps and writes the JSON.
    public struct Options: Sendable {
        /// JSON key -> attribute or relationship name, for the keys the default mapping does not
        /// find: `"key"` for the imported entity, `"Entity.key"` for any entity (Sync's remote keys).
        public var mapping: [String: String]
        /// Map `snake_case` keys onto `camelCase` attributes (on by default).
        public var snakeCaseToCamelCase: Bool
        /// The operations to perform (all by default). Without `delete` (`--keep-missing`),
        /// nothing is deleted or unlinked: items absent from the JSON stay as they are.
        public var operations: Set<Operation>
        /// How numbers given for dates are read.
        public var epochUnit: EpochUnit
        /// Objects per write transaction.
        public var batchSize: PositiveInt
        /// Do everything in one transaction that is rolled back at the end: the report says what
        /// the import would insert, update, delete, unlink and reject, and the store is left as it was.
        public var dryRun: Bool
        /// The items of the imported entity the import is about (Sync's predicate): only those
        /// that match and that the JSON does not hold are deleted. `nil` for all of them.
        public var scope: Filter?
        /// How messages name the store (its location, as `migrate-store` gives it), `nil` when
        /// it is not known. Not part of the run: the same import into the same store goes on
        /// from its checkpoint whatever name it is given.
        public var storeName: String?

        /// What makes two runs the same import, besides the input and the entity.
        var fingerprint: String {
            "\(mapping.sorted { $0.key < $1.key }) \(snakeCaseToCamelCase) \(operations.map(\.rawValue).sorted()) "
                + "\(epochUnit) \(batchSize) \(scope.map { "\($0)" } ?? "all")"
        }

        /// Options; by default snake_case keys map onto camelCase attributes, every operation runs
        /// and numbers for dates are seconds or milliseconds by their size.
        public init(mapping: [String: String] = [:], snakeCaseToCamelCase: Bool = true,
                    operations: Set<Operation> = Set(Operation.allCases), epochUnit: EpochUnit = .automatic,
                    batchSize: PositiveInt = 1_000, dryRun: Bool = false, scope: Filter? = nil) {
            self.dryRun = dryRun
            self.mapping = mapping
            self.snakeCaseToCamelCase = snakeCaseToCamelCase
            self.operations = operations
            self.epochUnit = epochUnit
            self.batchSize = batchSize
            self.scope = scope
        }
    }

    /// An object that was not imported, and why.
    public struct Reject: Sendable, Codable, Hashable {
        /// Its position in the input, from 1 (the line, for JSON Lines).
        public var position: Int
        /// Why it was not imported.
        public var reason: String
    }

    /// What an import did (or would do) to the items of one entity.
    public struct EntityCounts: Sendable, Codable, Hashable {
        /// Items inserted.
        public var inserted = 0
        /// Items updated.
        public var updated = 0
        /// Objects equal to their stored items, not written.
        public var unchanged = 0
        /// Items deleted: those of the imported entity the JSON does not hold, and those a
        /// parent's nested array no longer lists where the relationship removes them (their
        /// delete rules then cascade as usual).
        public var deleted = 0
        /// Items a parent's nested array no longer lists, taken out of the relationship.
        public var unlinked = 0
        /// Items related to a parent that did not list them before (many-to-many pairs added).
        public var linked = 0
        /// Of ``updated``, the updates of items that an earlier object of the same input had
        /// already written (inserted or updated): an item that several objects give, such as a
        /// company nested in each of its users, is counted once per object that changes it.
        /// Counted within one run: a run that goes on from a checkpoint counts from there.
        public var updatedAgain = 0

        /// Counts; all zero by default.
        public init(inserted: Int = 0, updated: Int = 0, unchanged: Int = 0, deleted: Int = 0, unlinked: Int = 0,
                    linked: Int = 0) {
            (self.inserted, self.updated, self.unchanged) = (inserted, updated, unchanged)
            (self.deleted, self.unlinked, self.linked) = (deleted, unlinked, linked)
        }

        /// Whether nothing was done.
        public var isEmpty: Bool { self == EntityCounts() }

        private enum CodingKeys: String, CodingKey {
            case inserted, updated, unchanged, deleted, unlinked, linked, updatedAgain
        }

        /// The most a count read back may be: more items than any store holds is a damaged
        /// checkpoint, not a number to add to.
        static let maxCount = 1 << 48

        /// Decodes counts; one that is missing (a checkpoint written before it was counted) is 0.
        /// - Throws: `DecodingError.dataCorrupted` for a count below 0 or past ``maxCount``.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            func count(_ key: CodingKeys) throws -> Int {
                let count = try container.decodeIfPresent(Int.self, forKey: key) ?? 0
                guard (0...Self.maxCount).contains(count) else {
                    throw DecodingError.dataCorruptedError(forKey: key, in: container,
                                                           debugDescription: "a count of \(count) items")
                }
                return count
            }
            (inserted, updated, unchanged) = (try count(.inserted), try count(.updated), try count(.unchanged))
            (deleted, unlinked, linked) = (try count(.deleted), try count(.unlinked), try count(.linked))
            updatedAgain = try count(.updatedAgain)
        }

        mutating func add(_ other: EntityCounts) {
            updatedAgain += other.updatedAgain
            inserted += other.inserted
            updated += other.updated
            unchanged += other.unchanged
            deleted += other.deleted
            unlinked += other.unlinked
            linked += other.linked
        }
    }

    /// What an import did (or, in a dry run, would do).
    public struct Report: Sendable, Codable, Hashable {
        /// Objects in the input.
        public var objects = 0
        /// Items of the imported entity inserted.
        public var inserted = 0
        /// Items of the imported entity updated.
        public var updated = 0
        /// Of ``updated``, updates of items an earlier object of the input had written
        /// (``EntityCounts/updatedAgain``).
        public var updatedAgain = 0
        /// Objects of the imported entity equal to their stored items, not written.
        public var unchanged = 0
        /// Items of the imported entity deleted because the input does not hold them.
        public var deleted = 0
        /// What was done to each entity, the imported one and those of nested objects, by name.
        public var entities: [String: EntityCounts] = [:]
        /// Objects not imported, in input order.
        public var rejected: [Reject] = []
        /// Objects imported without a link they give, because the item it names is neither in
        /// the store nor in the input (an export of one entity by keys, imported into a store
        /// without the entity it refers to), in input order: the reason names the link. Never
        /// counted as rejected: the object is in the store.
        public var missingLinks: [Reject] = []
        /// Items of the imported entity that the input leaves out and a delete rule (deny) kept,
        /// each as "KEY: the rule's reason", in key order: the rest of the import is done.
        public var keptByDeleteRules: [String] = []
        /// Why the delete pass did not run, when some values of the input name no item by its
        /// key (so any stored item may be one they meant); `nil` when it ran or was not asked.
        public var deletesSkipped: String?
        /// The accepted objects an interrupted run of the same input had already imported, when
        /// this run went on from its checkpoint.
        public var resumedAfter: Int?
    }

    /// Thrown when `shouldStop` said to stop after a batch: the checkpoint is stored, and the
    /// same import run again goes on from it.
    public struct Interrupted: Error, Sendable {
        /// What the import did before it stopped.
        public var report: Report
    }

    /// Where an import stands: stored in the store, in the same transaction as each batch.
    struct Checkpoint: Codable {
        /// The input and the options, which must be the same for a run to go on from here.
        var run: String
        /// Accepted objects written.
        var done: Int
        var entities: [String: EntityCounts]
        /// Objects the store refused, by position, with the reason.
        var refused: [Int: String]
        /// References to items further on in the input, set once everything is written.
        var pending: [ImportGraphWriter.PendingReference]
        /// Objects imported without a link whose target nothing holds, by position.
        var missing: [Int: String]? = nil
        /// Items the input leaves out that a delete rule kept, by key, with the rule's reason.
        var kept: [String: String]? = nil
    }

    static let checkpointKey = "datastore.import.checkpoint"
    /// The checkpoint, read and written as every reserved record is (a damaged one is `corrupt`).
    static let checkpointRecord = ReservedRecord<Checkpoint>(key: checkpointKey, what: "import checkpoint")

    /// Imports `path` into `entityName` of `store`.
    ///
    /// The input is read twice as a stream, one object at a time: first to check that it is
    /// JSON (input that is not, or not an array or lines of objects, writes nothing), then to
    /// write it. Objects that cannot be mapped (no primary key, a value of the wrong type at any
    /// depth, a required attribute missing from a new item, a key given twice, a reference to an
    /// item that does not exist) are rejected whole with their reason and the rest imported, in
    /// write transactions of `batchSize` objects, then the deletes. Memory holds one batch and
    /// the keys of the imported entity's objects, whatever the size of the input.
    /// - Parameter rejects: where to write the rejected objects as JSON Lines, if anywhere.
    public static func run(_ path: String, into store: any DataStore, entity entityName: String,
                           options: Options = Options(), rejects rejectsPath: String? = nil,
                           shouldStop: () -> Bool = { false },
                           progress: (Int) -> Void = { _ in }) throws -> Report {
        try run(path, into: store, entity: entityName, options: options, rejects: rejectsPath, shouldStop: shouldStop,
                reporting: { done, _ in progress(done) })
    }

    /// ``run(_:into:entity:options:rejects:shouldStop:progress:)``, reporting after each batch
    /// the objects done and the objects of the input (counted when it was checked).
    public static func run(_ path: String, into store: any DataStore, entity entityName: String,
                           options: Options = Options(), rejects rejectsPath: String? = nil,
                           shouldStop: () -> Bool = { false },
                           reporting progress: (_ done: Int, _ total: Int) -> Void) throws -> Report {
        guard let entity = store.schema.entity(named: entityName) else {
            throw StoreError(.unknownEntity, "the store has no entity '\(entityName)' (it has "
                + store.schema.entities.map(\.name).joined(separator: ", ") + ")")
        }
        // By key: with several bad entries, the one named is the same in every run.
        for (key, name) in options.mapping.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: ".", maxSplits: 1)
            let target = parts.count == 2 ? store.schema.entity(named: String(parts[0])) : entity
            guard let target else {
                throw StoreError(.unknownEntity, "the mapping names entity '\(parts[0])' in '\(key)', which the "
                    + "store does not have")
            }
            guard target.attribute(named: name) != nil || target.relationship(named: name) != nil else {
                throw StoreError(.unknownAttribute, "the mapping sends '\(key)' to '\(name)', which '\(target.name)' "
                    + "does not have")
            }
        }
        if let scope = options.scope {
            // A scope that names what the entity does not have fails now, before anything is read.
            _ = try store.read { try $0.count(FetchRequest(entity.name, filter: scope, limit: 1)) }
        }
        let input = try ImportInput(path)
        let (digest, objects) = try input.validate()
        let progress = { (done: Int) in progress(done, objects) }
        let run = "\(digest) \(entity.name) \(options.fingerprint)"
        let sync = ImportRun(input: input, entity: entity, schema: store.schema, options: options, run: run)
        if options.dryRun {
            // The real run into a child store that is never merged: the same batches, refusals
            // and delete rules, and nothing written to the store (its overlay holds the writes in
            // memory until it is dropped).
            let child = try store.makeChild()
            defer { try? child.close() }
            return try sync.write(into: child, shouldStop: shouldStop, progress: progress).report
        }
        let (report, rejected) = try sync.write(into: store, shouldStop: shouldStop, progress: progress)
        if let rejectsPath {
            let writer = try JSONLStreamWriter.lines(at: rejectsPath)
            do {
                for (reject, object) in rejected {
                    var line = Array(#"{"position":\#(reject.position),"reason":"#.utf8)
                    JSONLineCodec.appendString(reject.reason, to: &line)
                    line += Array(#","object":"#.utf8)
                    object.append(to: &line)
                    line.append(0x7D)
                    try writer.write(line: line)
                }
                try writer.finish()
            } catch {
                writer.abandon()
                throw error
            }
        }
        return report
    }

    struct ImportRejection: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}

extension JSON {
    /// Writes the value back as JSON.
    func append(to out: inout [UInt8]) {
        switch self {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .number(let n): out += Array(n.utf8)
        case .string(let s): JSONLineCodec.appendString(s, to: &out)
        case .array(let items):
            out.append(0x5B)
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(0x2C) }
                item.append(to: &out)
            }
            out.append(0x5D)
        case .object(let fields):
            out.append(0x7B)
            for (i, field) in fields.enumerated() {
                if i > 0 { out.append(0x2C) }
                JSONLineCodec.appendString(field.key, to: &out)
                out.append(0x3A)
                field.value.append(to: &out)
            }
            out.append(0x7D)
        }
    }
}

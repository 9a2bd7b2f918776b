@_spi(Backend) import DataStoreAPI
internal import CZlib
import Foundation

/// Imports an API's JSON (an array of objects, or JSON Lines of objects) into one entity with
/// the semantics of the Sync library: JSON keys are mapped onto attributes, the primary key
/// decides between insert and update, and items the JSON no longer holds are deleted, each of
/// the three operations optional.
public enum JSONImport {
    /// The operations an import may perform.
    public enum Operation: String, Sendable, Codable, CaseIterable {
        case insert, update, delete
    }

    /// How numbers given for dates are read.
    public enum EpochUnit: String, Sendable, Codable {
        case seconds, milliseconds
    }

    /// How an import maps and writes the JSON.
    public struct Options: Sendable {
        /// JSON key -> attribute name, for the keys the default mapping does not find.
        public var mapping: [String: String]
        /// Map `snake_case` keys onto `camelCase` attributes (on by default).
        public var snakeCaseToCamelCase: Bool
        /// The operations to perform (all by default).
        public var operations: Set<Operation>
        /// How numbers given for dates are read.
        public var epochUnit: EpochUnit
        /// Objects per write transaction.
        public var batchSize: Int
        /// Do everything in one transaction that is rolled back at the end: the report says what
        /// the import would insert, update, delete and reject, and the store is left as it was.
        public var dryRun: Bool

        /// What makes two runs the same import, besides the input and the entity.
        var fingerprint: String {
            "\(mapping.sorted { $0.key < $1.key }) \(snakeCaseToCamelCase) \(operations.map(\.rawValue).sorted()) "
                + "\(epochUnit) \(batchSize)"
        }

        /// Options; by default snake_case keys map onto camelCase attributes and every operation runs.
        public init(mapping: [String: String] = [:], snakeCaseToCamelCase: Bool = true,
                    operations: Set<Operation> = Set(Operation.allCases), epochUnit: EpochUnit = .seconds,
                    batchSize: Int = 1_000, dryRun: Bool = false) {
            self.dryRun = dryRun
            self.mapping = mapping
            self.snakeCaseToCamelCase = snakeCaseToCamelCase
            self.operations = operations
            self.epochUnit = epochUnit
            self.batchSize = batchSize
        }
    }

    /// An object that was not imported, and why.
    public struct Reject: Sendable, Codable, Hashable {
        /// Its position in the input, from 1 (the line, for JSON Lines).
        public var position: Int
        /// Why it was not imported.
        public var reason: String
    }

    /// What an import did (or, in a dry run, would do).
    public struct Report: Sendable, Codable, Hashable {
        /// Objects in the input.
        public var objects = 0
        /// Items inserted.
        public var inserted = 0
        /// Items updated.
        public var updated = 0
        /// Objects equal to their stored items, not written.
        public var unchanged = 0
        /// Items deleted because the input does not hold them.
        public var deleted = 0
        /// Objects not imported, in input order.
        public var rejected: [Reject] = []
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
        var inserted: Int
        var updated: Int
        var unchanged: Int
        var deleted: Int
        /// Objects the store refused, by position, with the reason.
        var refused: [Int: String]
    }

    static let checkpointKey = "datastore.import.checkpoint"

    /// Imports `path` into `entityName` of `store`.
    ///
    /// The whole input is parsed and every object mapped before anything is written: input
    /// that is not JSON, or not an array or lines of objects, writes nothing. Objects that cannot
    /// be mapped (no primary key, a value of the wrong type, a required attribute missing from a
    /// new item, a key given twice) are rejected with their reason and the rest imported, in
    /// write transactions of `batchSize` objects, then the deletes.
    /// - Parameter rejects: where to write the rejected objects as JSON Lines, if anywhere.
    public static func run(_ path: String, into store: any DataStore, entity entityName: String,
                           options: Options = Options(), rejects rejectsPath: String? = nil,
                           shouldStop: () -> Bool = { false },
                           progress: (Int) -> Void = { _ in }) throws -> Report {
        guard let entity = store.schema.entity(named: entityName) else {
            throw StoreError(.unknownEntity, "the store has no entity '\(entityName)' (it has "
                + store.schema.entities.map(\.name).joined(separator: ", ") + ")")
        }
        for (key, attribute) in options.mapping where entity.attributes.first(where: { $0.name == attribute }) == nil {
            throw StoreError(.unknownAttribute, "the mapping sends '\(key)' to '\(attribute)', which '\(entityName)' "
                + "does not have")
        }
        let (objects, digest) = try parse(path)
        let run = "\(digest) \(entity.name) \(options.fingerprint)"
        var rejectedObjects: [(Reject, JSON)] = []
        var accepted: [(position: Int, key: Value, values: [String: Value], object: JSON)] = []
        var seen = Set<Value>()
        for (position, object) in objects {
            do {
                // The key first: an object rejected for another reason still names an item that
                // the input holds, which the delete pass must keep.
                let key = try primaryKey(of: object, entity, options)
                guard seen.insert(key).inserted else {
                    throw ImportRejection("primary key \(key) was given by an earlier object")
                }
                accepted.append((position, key, try map(object, into: entity, options), object))
            } catch let rejection as ImportRejection {
                rejectedObjects.append((Reject(position: position, reason: rejection.reason), object))
            }
        }
        if options.dryRun {
            // Every write in one transaction, which the thrown report rolls back.
            do {
                try store.writeSync { writer in
                    let transaction = ImportTransactions.dryRun(writer)
                    throw DryRunFinished(report: try write(accepted, rejectedObjects, seen, entity, options, run,
                                                           transaction, store, shouldStop, progress).report)
                }
            } catch let finished as DryRunFinished {
                return finished.report
            }
        }
        let (report, rejected) = try write(accepted, rejectedObjects, seen, entity, options, run,
                                           .each(store), store, shouldStop, progress)
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

    private struct DryRunFinished: Error {
        var report: Report
    }

    /// The mapped objects written in batches, then the deletes; returns the report and the
    /// rejected objects with their reasons, in input order.
    private static func write(_ accepted: [(position: Int, key: Value, values: [String: Value], object: JSON)],
                              _ rejected: [(Reject, JSON)], _ seen: Set<Value>, _ entity: EntitySchema,
                              _ options: Options, _ run: String, _ transactions: ImportTransactions,
                              _ store: any DataStore, _ shouldStop: () -> Bool,
                              _ progress: (Int) -> Void) throws -> (report: Report, rejected: [(Reject, JSON)]) {
        var rejectedObjects = rejected
        var report = Report()
        report.objects = accepted.count + rejected.count
        // An interrupted run of the same input and options goes on from its checkpoint.
        var mark = Checkpoint(run: run, done: 0, inserted: 0, updated: 0, unchanged: 0, deleted: 0, refused: [:])
        if !transactions.isDryRun, let bytes = try store.read({ try $0.metadata(forKey: checkpointKey) }),
            let stored = try? JSONDecoder().decode(Checkpoint.self, from: Data(bytes)), stored.run == run
        {
            mark = stored
            report.resumedAfter = stored.done
        }
        func save(_ writer: WriteAccessor, _ mark: Checkpoint?) throws {
            guard !transactions.isDryRun else { return }
            let bytes = try mark.map { mark -> [UInt8] in
                do {
                    return Array(try JSONEncoder().encode(mark))
                } catch {
                    throw StoreError(.invalidValue, "the import checkpoint cannot be encoded: \(error)")
                }
            }
            try writer.setReservedMetadata(bytes, forKey: checkpointKey)
        }
        func record(_ mark: Checkpoint) {
            report.inserted = mark.inserted
            report.updated = mark.updated
            report.unchanged = mark.unchanged
            report.deleted = mark.deleted
        }
        record(mark)
        // Writes, in batches, each with the checkpoint; a value the store refuses rejects its
        // object and the rest of the batch is written.
        var start = min(mark.done, accepted.count)
        var wrote = false
        while start < accepted.count {
            if wrote, shouldStop() { throw Interrupted(report: report) }
            wrote = true
            let batch = accepted[start..<min(accepted.count, start + max(1, options.batchSize))]
            let outcome = try transactions.write { writer -> (Report, [(Int, String)]) in
                var counts = Report()
                var refused: [(Int, String)] = []
                for (offset, item) in zip(batch.indices, batch) {
                    let existing = try writer.get(entity.name, key: item.key)
                    do {
                        if var record = existing {
                            guard options.operations.contains(.update) else { continue }
                            for (name, value) in item.values { record[name] = value }
                            let normalized = try entity.normalize(record)
                            if normalized == existing {
                                counts.unchanged += 1
                                continue
                            }
                            try writer.save(normalized, into: entity.name)
                            counts.updated += 1
                        } else {
                            guard options.operations.contains(.insert) else { continue }
                            var record = Record()
                            for (name, value) in item.values { record[name] = value }
                            try writer.insert(try entity.normalize(record), into: entity.name)
                            counts.inserted += 1
                        }
                    } catch let error as StoreError where ![.io, .storeFull, .corrupt, .closed].contains(error.code) {
                        // The store refuses this object's values (a missing required attribute, a
                        // unique index): the object is rejected, the rest of the batch goes on.
                        refused.append((offset, error.message))
                    }
                }
                var next = mark
                next.done = batch.endIndex
                next.inserted += counts.inserted
                next.updated += counts.updated
                next.unchanged += counts.unchanged
                for (offset, reason) in refused { next.refused[accepted[offset].position] = reason }
                try save(writer, next)
                return (counts, refused)
            }
            mark.done = batch.endIndex
            mark.inserted += outcome.0.inserted
            mark.updated += outcome.0.updated
            mark.unchanged += outcome.0.unchanged
            for (offset, reason) in outcome.1 { mark.refused[accepted[offset].position] = reason }
            record(mark)
            start += batch.count
            progress(start)
        }
        // The objects the store refused, in this run or the one it goes on from.
        for item in accepted {
            if let reason = mark.refused[item.position] {
                rejectedObjects.append((Reject(position: item.position, reason: reason), item.object))
            }
        }
        if options.operations.contains(.delete) {
            var doomed: [Value] = []
            try transactions.read { reader in
                try JSONLines.forEachPage(of: entity, in: reader, pageSize: 1_000) { page in
                    for record in page where !seen.contains(record[entity.primaryKey]) {
                        doomed.append(record[entity.primaryKey])
                    }
                }
            }
            var index = 0
            while index < doomed.count {
                let batch = doomed[index..<min(doomed.count, index + max(1, options.batchSize))]
                mark.deleted += try transactions.write { writer in
                    let deleted = try batch.reduce(0) { $0 + (try writer.delete(entity.name, key: $1) ? 1 : 0) }
                    var next = mark
                    next.deleted += deleted
                    try save(writer, next)
                    return deleted
                }
                record(mark)
                index += batch.count
                if index < doomed.count, shouldStop() { throw Interrupted(report: report) }
            }
        }
        try transactions.write { try save($0, nil) }
        rejectedObjects.sort { $0.0.position < $1.0.position }
        report.rejected = rejectedObjects.map(\.0)
        return (report, rejectedObjects)
    }

    struct ImportRejection: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// The objects of the input with their positions (array index or line number, from 1).
    static func parse(_ path: String) throws -> (objects: [(position: Int, JSON)], digest: String) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StoreError(.notFound, "\(path) does not exist or cannot be read")
        }
        let bytes = Array(data)
        return (try parse(bytes, path), "\(bytes.count):\(crc32(of: bytes))")
    }

    /// zlib's CRC-32 of `bytes`.
    static func crc32(of bytes: [UInt8]) -> UInt {
        bytes.withUnsafeBufferPointer { buffer in
            var crc = CZlib.crc32(0, nil, 0)
            var offset = 0
            while offset < buffer.count {
                let length = min(buffer.count - offset, 1 << 30)
                crc = CZlib.crc32(crc, buffer.baseAddress! + offset, UInt32(length))
                offset += length
            }
            return UInt(crc)
        }
    }

    static func parse(_ bytes: [UInt8], _ path: String) throws -> [(position: Int, JSON)] {
        let firstByte = bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        if firstByte == UInt8(ascii: "[") {
            var parser = JSONParser(bytes)
            let document: JSON
            do {
                document = try parser.parseDocument()
            } catch let error as JSONParser.Failure {
                throw StoreError(.invalidValue, "\(path) is not valid JSON: \(error.message) at byte \(error.offset + 1); "
                    + "nothing was imported")
            }
            guard case .array(let items) = document else {
                throw StoreError(.invalidValue, "\(path) is not a JSON array of objects; nothing was imported")
            }
            return items.enumerated().map { ($0.offset + 1, $0.element) }
        }
        // JSON Lines: one object per line; blank lines are skipped.
        var result: [(Int, JSON)] = []
        for (number, line) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            guard line.contains(where: { ![0x20, 0x09, 0x0D].contains($0) }) else { continue }
            var parser = JSONParser(Array(line))
            do {
                result.append((number + 1, try parser.parseDocument()))
            } catch let error as JSONParser.Failure {
                throw StoreError(.invalidValue, "\(path): line \(number + 1) is not valid JSON: \(error.message); "
                    + "nothing was imported")
            }
        }
        return result
    }

    /// The object's primary key.
    static func primaryKey(of object: JSON, _ entity: EntitySchema, _ options: Options) throws -> Value {
        guard case .object(let fields) = object else { throw ImportRejection("not a JSON object") }
        for (key, json) in fields where attributeName(key, entity, options) == entity.primaryKey {
            guard let value = convert(json, to: entity.primaryKeyAttribute.type, options), !value.isNull else {
                throw ImportRejection("primary key '\(key)' holds \(json.summary), which is not a "
                    + "\(entity.primaryKeyAttribute.type)")
            }
            return value
        }
        throw ImportRejection("no primary key '\(entity.primaryKey)'")
    }

    /// The attribute values an object gives, by attribute name.
    static func map(_ object: JSON, into entity: EntitySchema, _ options: Options) throws -> [String: Value] {
        guard case .object(let fields) = object else { throw ImportRejection("not a JSON object") }
        var values: [String: Value] = [:]
        for (key, json) in fields {
            guard let name = attributeName(key, entity, options),
                let attribute = entity.attributes.first(where: { $0.name == name })
            else { continue }
            guard values[name] == nil else { throw ImportRejection("attribute '\(name)' is given twice") }
            guard let value = convert(json, to: attribute.type, options) else {
                throw ImportRejection("'\(key)' holds \(json.summary), which is not a \(attribute.type)")
            }
            values[name] = value
        }
        return values
    }

    /// The attribute a JSON key maps onto: the explicit mapping, the same name, or the
    /// camelCase form of a snake_case key.
    static func attributeName(_ key: String, _ entity: EntitySchema, _ options: Options) -> String? {
        if let mapped = options.mapping[key] { return mapped }
        if entity.attributes.contains(where: { $0.name == key }) { return key }
        guard options.snakeCaseToCamelCase, key.contains("_") else { return nil }
        let parts = key.split(separator: "_", omittingEmptySubsequences: true)
        guard let first = parts.first else { return nil }
        let camel = String(first) + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
        return entity.attributes.contains(where: { $0.name == camel }) ? camel : nil
    }

    static func convert(_ json: JSON, to type: ValueType, _ options: Options) -> Value? {
        switch (json, type) {
        case (.number(let text), .date):
            guard let number = Double(text), number.isFinite else { return nil }
            let micros = (options.epochUnit == .seconds ? number * 1_000_000 : number * 1_000).rounded()
            guard let exact = Int64(exactly: micros) else { return nil }
            return .date(Timestamp(microsecondsSinceEpoch: exact))
        case (.number(let text), .double):
            guard let d = Double(text), d.isFinite else { return nil }
            return .double(d)
        case (.number(let text), .int):
            if let i = Int64(text) { return .int(i) }
            // An integral number written with a fraction or exponent (3.0, 1e3).
            guard let d = Double(text), d.rounded() == d, let i = Int64(exactly: d) else { return nil }
            return .int(i)
        default:
            return JSONLineCodec.value(json, as: type)
        }
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

/// Where an import's transactions go: one write transaction each, or all into the one
/// transaction of a dry run, which is rolled back.
enum ImportTransactions {
    case each(any DataStore)
    case dryRun(WriteAccessor)

    var isDryRun: Bool {
        if case .dryRun = self { return true }
        return false
    }

    func write<T>(_ body: (WriteAccessor) throws -> T) throws -> T {
        switch self {
        case .each(let store): try store.writeSync(body)
        case .dryRun(let writer): try body(writer)
        }
    }

    func read<T>(_ body: (ReadAccessor) throws -> T) throws -> T {
        switch self {
        case .each(let store): try store.read(body)
        case .dryRun(let writer): try body(writer)
        }
    }
}

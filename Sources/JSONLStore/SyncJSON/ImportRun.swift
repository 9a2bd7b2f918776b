@_spi(Backend) import DataStoreAPI
import Foundation

/// One import's writing pass: the input streamed in batches of mapped objects, each batch one
/// write transaction that stores the checkpoint; then the references to items further on in the
/// input; then the deletes.
struct ImportRun {
    let input: ImportInput
    let entity: EntitySchema
    let schema: Schema
    let options: JSONImport.Options
    let run: String

    typealias Rejected = (JSONImport.Reject, JSON)

    /// A mapped object of the imported entity, with its input.
    private struct Accepted {
        var position: Int
        var object: ImportObject
        var json: JSON
    }

    /// Whether a store error refuses one object's values (a missing required attribute, a
    /// unique index, a dangling reference at commit), so that the object is rejected and the
    /// rest goes on; other errors (I/O, a full disk, damage) end the import.
    static func refusesObject(_ error: any Error) -> String? {
        if let rejection = error as? JSONImport.ImportRejection { return rejection.reason }
        guard let error = error as? StoreError, ![.io, .storeFull, .corrupt, .closed].contains(error.code) else {
            return nil
        }
        return error.message
    }

    /// Writes the input into `store`: the store an import writes, or for a dry run a child store
    /// of it that is never merged, so that a dry run is the real run, batches, refusals and
    /// delete rules included, with nothing kept.
    func write(into store: any DataStore, shouldStop: () -> Bool,
               progress: (Int) -> Void) throws -> (report: JSONImport.Report, rejected: [Rejected]) {
        var report = JSONImport.Report()
        // An interrupted run of the same input and options goes on from its checkpoint.
        var mark = JSONImport.Checkpoint(run: run, done: 0, entities: [:], refused: [:], pending: [])
        // A damaged checkpoint is damage (the one rule of the reserved records), never "no
        // checkpoint": starting over would redo batches whose deletes and links already ran.
        if let stored = try JSONImport.checkpointRecord.read(from: store, named: options.storeName), stored.run == run {
            mark = stored
            report.resumedAfter = stored.done
        }
        func save(_ writer: WriteAccessor, _ mark: JSONImport.Checkpoint?) throws {
            try JSONImport.checkpointRecord.write(mark, into: writer)
        }

        var rejected: [Rejected] = []
        var seen = Set<Value>()
        /// Values that name no item by its key (not an object, no key, a key of the wrong
        /// type): the item each of them meant is unknown, so the delete pass cannot run.
        var unkeyed: [JSONImport.Reject] = []
        var acceptedCount = 0
        var batch: [Accepted] = []
        var wrote = false
        /// The keys of the items written so far, kept from batch to batch.
        var written: [String: Set<Value>] = [:]
        let names = ImportNames(mapping: options.mapping, snakeCase: options.snakeCaseToCamelCase,
                                rootEntity: entity.name)

        /// Writes the objects of `items` in one transaction with the checkpoint; an object the
        /// store refuses rolls the transaction back and the objects are written again one
        /// transaction each, so that the refused one is left out whole (nested objects included).
        func write(_ items: [Accepted], alone: Bool) throws {
            let outcome = try store.writeSync { writer -> ([String: JSONImport.EntityCounts],
                                                           [ImportGraphWriter.PendingReference],
                                                           [String: Set<Value>]) in
                var graph = ImportGraphWriter(writer, options)
                graph.written = written
                for item in items {
                    graph.position = item.position
                    if alone {
                        try graph.write(item.object)
                    } else {
                        do {
                            try graph.write(item.object)
                        } catch {
                            guard Self.refusesObject(error) != nil else { throw error }
                            throw BatchRefused()
                        }
                    }
                }
                var next = mark
                next.done += items.count
                for (name, counts) in graph.counts { next.entities[name, default: .init()].add(counts) }
                next.pending += graph.pending
                try save(writer, next)
                return (graph.counts, graph.pending, graph.written)
            }
            written = outcome.2
            mark.done += items.count
            for (name, counts) in outcome.0 { mark.entities[name, default: .init()].add(counts) }
            mark.pending += outcome.1
        }

        func flush() throws {
            guard !batch.isEmpty else { return }
            if wrote, shouldStop() { throw JSONImport.Interrupted(report: summarize(report, mark)) }
            wrote = true
            do {
                try write(batch, alone: false)
            } catch is BatchRefused {
                try writeAlone(batch)
            } catch let error where Self.refusesObject(error) != nil {
                // Refused at commit (a reference the commit check finds dangling).
                try writeAlone(batch)
            }
            progress(mark.done)
            batch.removeAll(keepingCapacity: true)
        }

        func writeAlone(_ items: [Accepted]) throws {
            for item in items {
                do {
                    try write([item], alone: true)
                } catch {
                    guard let reason = Self.refusesObject(error) else { throw error }
                    // The object is left out; its position is done, with the reason.
                    try store.writeSync { writer in
                        var next = mark
                        next.done += 1
                        next.refused[item.position] = reason
                        try save(writer, next)
                    }
                    mark.done += 1
                    mark.refused[item.position] = reason
                }
            }
        }

        try input.forEachObject { position, json in
            report.objects += 1
            let object: ImportObject
            do {
                // The key first: an object rejected for another reason still names an item that
                // the input holds, which the delete pass must keep.
                let key: Value
                do {
                    guard case .object(let fields) = json else { throw JSONImport.ImportRejection("not a JSON object") }
                    key = try ImportObject.primaryKey(fields, entity, names, options, "")
                } catch let rejection as JSONImport.ImportRejection {
                    unkeyed.append(JSONImport.Reject(position: position, reason: rejection.reason))
                    throw rejection
                }
                guard seen.insert(key).inserted else {
                    throw JSONImport.ImportRejection("primary key \(key) was given by an earlier object")
                }
                object = try ImportObject.map(json, into: entity, schema: schema, names: names, options: options)
            } catch let rejection as JSONImport.ImportRejection {
                rejected.append((JSONImport.Reject(position: position, reason: rejection.reason), json))
                return
            }
            acceptedCount += 1
            // Objects an interrupted run of the same input wrote are not written again.
            guard acceptedCount > mark.done else { return }
            batch.append(Accepted(position: position, object: object, json: json))
            if batch.count >= options.batchSize.value { try flush() }
        }
        try flush()

        // References to items further on in the input, now that everything is written.
        if !mark.pending.isEmpty {
            // A block may run again (a PostgreSQL conflict): it changes nothing outside itself,
            // and the checkpoint it stored is taken once it committed.
            mark = try store.writeSync { writer in
                var graph = ImportGraphWriter(writer, options)
                let missing = try graph.resolve(mark.pending)
                var next = mark
                next.pending = []
                for reference in missing {
                    let destination = schema.entity(named: reference.entity)?
                        .relationship(named: reference.relationship)?.destination ?? "an item"
                    let reason = "'\(reference.entity).\(reference.relationship)' names \(destination) "
                        + "\(reference.target), which neither the store nor the input holds"
                    var missing = next.missing ?? [:]
                    missing[reference.position] = missing[reference.position].map { $0 + "; " + reason } ?? reason
                    next.missing = missing
                }
                try save(writer, next)
                return next
            }
        }

        // An input none of whose values names an item (`null`, an object that wraps the array,
        // every object without its key) is the wrong input, never "the entity now holds
        // nothing": only an explicit empty array deletes every item.
        if options.operations.contains(.delete), report.objects > 0, seen.isEmpty {
            let first = rejected.first.map { " (value \($0.0.position): \($0.0.reason))" } ?? ""
            let values = report.objects == 1 ? "the one value of \(input.path) does not name"
                : "none of the \(report.objects) values of \(input.path) names"
            throw StoreError(.invalidValue, "\(values) a \(entity.name) by its key\(first); nothing was imported or "
                + "deleted. To delete every item of the entity, import an explicit empty array []")
        }
        // Some values name no item: any stored item may be the one such a value meant (a key
        // misspelt in part of the input, `null` in an array), so nothing is deleted; the rest
        // of the import is done, and the report says why the deletes were skipped.
        if options.operations.contains(.delete), let first = unkeyed.first {
            let values = unkeyed.count == 1 ? "1 value names" : "\(unkeyed.count) values name"
            report.deletesSkipped = "\(values) no \(entity.name) by its key, the first at value \(first.position) "
                + "(\(first.reason)), and any item the input leaves out may be one they meant; fix the input, or import "
                + "with --keep-missing to keep those items on purpose"
        }

        // Every value rejected (another entity's file, a mapping that does not fit): the input
        // is not a list of this entity's items, so what it leaves out is not to be deleted.
        if options.operations.contains(.delete), report.deletesSkipped == nil, report.objects > 0, acceptedCount == 0,
           let first = rejected.first {
            report.deletesSkipped = "every one of the \(report.objects) values was rejected, the first at value "
                + "\(first.0.position) (\(first.0.reason)), so the input may not be a list of \(entity.name) items; fix the "
                + "input (or the entity), or import with --keep-missing to keep those items on purpose"
        }

        if options.operations.contains(.delete), report.deletesSkipped == nil {
            var doomed: [Value] = []
            try store.read { reader in
                let request = FetchRequest(entity.name, filter: options.scope ?? .all)
                try reader.forEach(request) { record in
                    if !seen.contains(record[entity.primaryKey]) { doomed.append(record[entity.primaryKey]) }
                }
            }
            /// Deletes `keys` in one transaction with the checkpoint, or says why a delete rule
            /// (deny) refused one of them (the transaction rolled back).
            func delete(_ keys: ArraySlice<Value>) throws -> Result<Int, StoreError> {
                do {
                    let (deleted, alongside) = try store.writeSync { writer -> (Int, [String: Int]) in
                        let deleted = try keys.reduce(0) { $0 + (try writer.delete(entity.name, key: $1) ? 1 : 0) }
                        // What delete rules deleted with them (the imported entity's own items
                        // a self-cascade took included), counted per entity, so that the
                        // report (and a dry run) says it.
                        let alongside = writer.deletedByDeleteRules
                        var next = mark
                        next.entities[entity.name, default: .init()].deleted += deleted
                        for (name, count) in alongside { next.entities[name, default: .init()].deleted += count }
                        try save(writer, next)
                        return (deleted, alongside)
                    }
                    for (name, count) in alongside { mark.entities[name, default: .init()].deleted += count }
                    return .success(deleted)
                } catch let error as StoreError where error.code == .referenceViolation {
                    return .failure(error)
                }
            }
            var index = 0
            while index < doomed.count {
                let slice = doomed[index..<min(doomed.count, index + options.batchSize.value)]
                switch try delete(slice) {
                case .success(let deleted):
                    mark.entities[entity.name, default: .init()].deleted += deleted
                case .failure:
                    // A delete rule keeps an item the input leaves out: the others of the batch
                    // are deleted one by one, and the kept ones reported with the rule's reason.
                    for key in slice {
                        switch try delete([key]) {
                        case .success(let deleted):
                            mark.entities[entity.name, default: .init()].deleted += deleted
                        case .failure(let refusal):
                            mark.kept = (mark.kept ?? [:]).merging(["\(key)": refusal.message]) { $1 }
                        }
                    }
                    try store.writeSync { try save($0, mark) }
                }
                index += slice.count
                if index < doomed.count, shouldStop() {
                    throw JSONImport.Interrupted(report: summarize(report, mark))
                }
            }
        }
        try store.writeSync { try save($0, nil) }

        // The objects the store refused, in this run or the one it goes on from, with their input.
        report.keptByDeleteRules = (mark.kept ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        if !mark.refused.isEmpty {
            try input.forEachObject { position, json in
                if let reason = mark.refused[position] {
                    rejected.append((JSONImport.Reject(position: position, reason: reason), json))
                }
            }
        }
        rejected.sort { $0.0.position < $1.0.position }
        report = summarize(report, mark)
        report.rejected = rejected.map(\.0)
        report.missingLinks = (mark.missing ?? [:]).sorted { $0.key < $1.key }
            .map { JSONImport.Reject(position: $0.key, reason: $0.value) }
        return (report, rejected)
    }

    private struct BatchRefused: Error {}

    /// The report with the checkpoint's counts.
    private func summarize(_ report: JSONImport.Report, _ mark: JSONImport.Checkpoint) -> JSONImport.Report {
        var report = report
        report.entities = mark.entities.filter { !$0.value.isEmpty }
        let root = mark.entities[entity.name] ?? .init()
        report.inserted = root.inserted
        report.updated = root.updated
        report.updatedAgain = root.updatedAgain
        report.unchanged = root.unchanged
        report.deleted = root.deleted
        return report
    }
}

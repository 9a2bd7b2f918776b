import CoreMetrics
import Logging
@_spi(Backend) import DataStoreAPI
import Foundation
import ForeignStores

/// The migration engine: copies, syncs and verifies stores of any kind, as a library call.
///
/// ```swift
/// let report = try Migrator.copy(from: StoreLocation(parsing: "sqlite:app.sqlite"),
///                                to: StoreLocation(parsing: "lmdb:app.lmdb"),
///                                progress: { progress in print(progress.entity, progress.done, progress.total) })
/// ```
///
/// The source is read through one read transaction (one consistent snapshot of every entity)
/// and never written; the app may keep writing to it. The destination is written entity by
/// entity in key order, in batches of one write transaction each, and each batch stores its
/// checkpoint in the same transaction. Until the migration finishes, the destination carries
/// a marker that makes opening it fail with `incompleteMigration`.
public enum Migrator {
    static let checkpointKey = "datastore.migration.checkpoint"
    /// The checkpoint of an unfinished migration, in its destination.
    static let checkpointRecord = ReservedRecord<Checkpoint>(key: checkpointKey, what: "migration checkpoint")

    /// Where an unfinished migration stopped: stored in the destination in the same transaction
    /// as each batch.
    public struct Checkpoint: Codable, Sendable, Hashable {
        /// The entity the last batch wrote.
        public var entity: String
        /// The last primary key of that batch.
        public var lastKey: Value?
        /// The entities finished before it.
        public var finishedEntities: [String]
        /// Whether a plain copy wrote that batch, so that the destination holds nothing of the
        /// entity after `lastKey` (a resume then compares only up to it and copies the rest).
        /// `false` or absent when a resume's comparison wrote it.
        public var copied: Bool?
    }

    /// The checkpoint of an unfinished migration into `store`, if it has one.
    /// - Throws: `corrupt` when the checkpoint is damaged, without a command to run (the store's
    ///   location is not known here: ``checkpoint(of:at:)`` names it).
    @available(*, deprecated, message: "use checkpoint(of:at:), whose errors name the store's location")
    public static func checkpoint(of store: any DataStore) throws -> Checkpoint? {
        try checkpointRecord.read(from: store, named: nil)
    }

    /// The checkpoint of an unfinished migration into `store`, the store at `location`, if it
    /// has one.
    /// - Throws: `corrupt` naming `location` and the record when the checkpoint is damaged, with
    ///   the `migrate-store check` command for that location.
    public static func checkpoint(of store: any DataStore, at location: StoreLocation) throws -> Checkpoint? {
        try checkpoint(of: store, named: location.description)
    }

    /// The checkpoint of an unfinished migration into `store` (named `name` in messages).
    package static func checkpoint(of store: any DataStore, named name: String) throws -> Checkpoint? {
        try checkpointRecord.read(from: store, named: name)
    }

    /// Copies `source` into `destination`: a new store, or with `options.resume` an unfinished
    /// one, which a diff pass against the current snapshot brings up to date.
    /// - Throws: ``StoreError`` for bad input (missing or damaged source, a destination that
    ///   exists, unknown entities) and for failures while writing; ``MigrationInterrupted``
    ///   when `shouldStop` returned true after a batch.
    @discardableResult
    public static func copy(from source: StoreLocation, to destination: StoreLocation,
                            options: MigrationOptions = MigrationOptions(),
                            shouldStop: @escaping () -> Bool = { false },
                            progress: @escaping (MigrationProgress) -> Void = { _ in }) throws -> MigrationReport {
        if !options.dryRun { try checkDirectory(of: destination) }
        if let streamed = try destination.backend as? any StreamedStoreBackend {
            return try copyStreamed(streamed, from: source, to: destination, options, shouldStop, progress)
        }
        let (sourceStore, schema, sourceCheck) = try openSource(source, distinctFrom: destination, options)
        defer { try? sourceStore.close() }
        let run = MigrationRun(operation: .copy, source, destination, options, shouldStop, progress)
        run.report.sourceCheck = sourceCheck
        run.report.resumed = options.resume

        let destinationStore: any DataStore
        if options.resume {
            destinationStore = try openUnfinished(destination, schema: schema)
        } else {
            let replaced = try checkNew(destination, overwrite: options.overwrite)
            if options.dryRun { return try dryRun(run, sourceStore, schema) }
            if replaced { try destination.destroy() }
            destinationStore = try create(destination, schema: schema, marker: source.description,
                                          permissions: FilePermissions(of: source))
        }
        defer { try? destinationStore.close() }

        var snapshotToken: ChangeToken?
        try run.interruptible {
            try sourceStore.read { snapshot in
                snapshotToken = try snapshot.changeToken()
                let mark = options.resume ? try checkpoint(of: destinationStore, named: destination.description) : nil
                for (position, entity) in schema.entities.enumerated() {
                    let plan = ResumePlan(entity: entity, position: position, schema: schema, resume: options.resume,
                                          checkpoint: mark)
                    try run.entity(entity, phase: plan == .copy ? .copy : .sync, snapshot) { entry, checkpoint, tick in
                        switch plan {
                        case .copy:
                            try run.copyEntity(entity, snapshot, destinationStore, after: nil, &entry, checkpoint, tick)
                        case .compare(let through):
                            try run.diff(entity, snapshot, destinationStore, .apply, through: through, &entry,
                                         checkpoint, tick)
                            if let through {
                                try run.copyEntity(entity, snapshot, destinationStore, after: through, &entry,
                                                   checkpoint, tick)
                            }
                        }
                    }
                }
                if options.verify { try run.verify(schema, snapshot, destinationStore) }
            }
        }
        if run.report.differences == 0 {
            try requireReferences(destinationStore, destination)
            try destinationStore.writeSync { writer in
                try checkpointRecord.write(nil, into: writer)
                try writer.setReservedMetadata(nil, forKey: MetadataKeys.incompleteMigration)
                // The destination now equals the source as of the snapshot: `follow` goes on from
                // its token. The destination's own feed starts here (the copy was not recorded).
                if let snapshotToken, options.entities == nil {
                    try writeFollowState(writer, source: source, token: snapshotToken)
                }
                try writer.setChangeFeedSettings(ChangeFeedSettings())
            }
        }
        return run.finish()
    }

    /// Applies only the differences between `source` and an existing `destination`: inserts,
    /// updates and deletes found by a key-ordered merge join (catching up a live source).
    public static func sync(from source: StoreLocation, to destination: StoreLocation,
                            options: MigrationOptions = MigrationOptions(),
                            shouldStop: @escaping () -> Bool = { false },
                            progress: @escaping (MigrationProgress) -> Void = { _ in }) throws -> MigrationReport {
        try compareStores(operation: .sync, source, destination, options, shouldStop, progress)
    }

    /// Compares every item of every entity; the report counts the differences. With
    /// `options.checksum`, each side is read once and hashed in key ranges, and only the ranges
    /// whose digests differ are compared item by item (``RangeChecksum``): the same differences,
    /// found without comparing every record.
    public static func verify(from source: StoreLocation, to destination: StoreLocation,
                              options: MigrationOptions = MigrationOptions(),
                              shouldStop: @escaping () -> Bool = { false },
                              progress: @escaping (MigrationProgress) -> Void = { _ in }) throws -> MigrationReport {
        try compareStores(operation: .verify, source, destination, options, shouldStop, progress)
    }

    private static func compareStores(operation: MigrationReport.Operation, _ source: StoreLocation, _ destination: StoreLocation,
                                      _ options: MigrationOptions, _ shouldStop: @escaping () -> Bool,
                                      _ progress: @escaping (MigrationProgress) -> Void) throws -> MigrationReport {
        if operation == .sync, let streamed = try destination.backend as? any StreamedStoreBackend {
            return try syncStreamed(streamed, from: source, to: destination, options, shouldStop, progress)
        }
        let (sourceStore, schema, sourceCheck) = try openSource(source, distinctFrom: destination, options)
        defer { try? sourceStore.close() }
        let destinationStore = try withResumeCommand(destination) {
            operation == .verify ? try destination.openSource()
                : try MigrationGate.$defersReferenceChecks.withValue(true) { try destination.open(schema: nil) }
        }
        defer { try? destinationStore.close() }
        try requireEntities(of: schema, in: destinationStore.schema, destination, selected: options.entities)
        if options.entities == nil { try requireNoOtherEntities(in: destinationStore.schema, than: schema, source) }
        let run = MigrationRun(operation: operation, source, destination, options, shouldStop, progress)
        run.report.sourceCheck = sourceCheck
        try run.interruptible {
            try sourceStore.read { snapshot in
                if operation == .verify && options.checksum {
                    try run.verifyByChecksum(schema, snapshot, destinationStore)
                } else if operation == .verify {
                    try run.verify(schema, snapshot, destinationStore)
                } else {
                    let token = try snapshot.changeToken()
                    for entity in schema.entities {
                        try run.entity(entity, phase: .sync, snapshot) { entry, _, tick in
                            try run.diff(entity, snapshot, destinationStore, .apply, &entry, { _, _, _ in }, tick)
                        }
                    }
                    // A sync of every entity leaves the destination equal to the snapshot: `follow`
                    // goes on from its token.
                    if options.entities == nil {
                        try requireReferences(destinationStore, destination)
                        try destinationStore.writeSync { try writeFollowState($0, source: source, token: token) }
                    }
                }
            }
        }
        return run.finish()
    }

    /// Runs `body`, in which stores that a migration has not finished open (only the migration
    /// engine and `migrate-store` open them: apps get `incompleteMigration`).
    package static func acceptingUnfinished<T>(_ body: () throws -> T) rethrows -> T {
        try MigrationGate.$opensUnfinished.withValue(true, operation: body)
    }

    /// Runs `body`, which opens a destination the migration engine fills: it opens unfinished,
    /// and its writes copy items as they are, without delete rules or reference checks (an
    /// entity's items may arrive before the items they refer to); the engine checks the
    /// references once the destination is complete (``requireReferences(_:_:)``).
    package static func fillingDestination<T>(_ body: () throws -> T) rethrows -> T {
        try MigrationGate.$defersReferenceChecks.withValue(true) { try acceptingUnfinished(body) }
    }

    /// Throws `referenceViolation` naming the dangling references of a destination the engine
    /// filled, if it holds any.
    static func requireReferences(_ store: any DataStore, _ location: StoreLocation) throws {
        guard store.schema.entities.contains(where: { !$0.relationships.isEmpty }) else { return }
        let report = try store.read { try $0.checkReferences(listing: 5) }
        guard report.danglingCount == 0 else {
            throw StoreError(.referenceViolation, "\(location) would hold \(report.danglingCount) dangling "
                + "reference\(report.danglingCount == 1 ? "" : "s"), so it is left unfinished: \(report.summary). "
                + "The source holds them too: 'migrate-store check' on it names them")
        }
    }

    /// Runs `body`, which opens `destination`; an `incompleteMigration` refusal gets the full
    /// command that finishes the migration.
    static func withResumeCommand<T>(_ destination: StoreLocation, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as StoreError where error.code == .incompleteMigration {
            throw unfinished(destination, cause: error.cause)
        }
    }

    /// The refusal of the destination of an unfinished migration, naming its source (from the
    /// marker the copy keeps in it) and the command, quoted for pasting, that finishes it.
    static func unfinished(_ destination: StoreLocation, detail: String = "",
                           cause: StoreError.Cause? = nil) -> StoreError {
        let store = try? acceptingUnfinished { try destination.openSource() }
        defer { try? store?.close() }
        // Only to name the source in the message: a marker that cannot be read says SOURCE.
        let source = store.flatMap { try? unfinishedMarker(in: $0, of: destination) } ?? "SOURCE"
        return StoreError(.incompleteMigration, "\(destination) is the destination of an unfinished migration "
            + "from \(source)\(detail); finish it with: " + ShellCommand.resume(from: source, to: destination.description),
            cause: cause)
    }

    /// Checks the source (unless the options say not to) and opens it read-only; returns the
    /// store, the schema of the entities to migrate and the check's report.
    static func openSource(_ source: StoreLocation, distinctFrom destination: StoreLocation,
                                   _ options: MigrationOptions) throws
        -> (store: any DataStore, schema: Schema, check: StoreCheckReport?) {
        try source.requireDistinct(from: destination)
        // A plain SQLite file (a Realm file) is read for the chosen tables (classes) only, before
        // any is checked: a Realm file of more classes than a store holds is copied in parts.
        var source = source
        if source.kind == .plainSQLite || source.kind == .realm, let entities = options.entities {
            var foreign = try ForeignSource(parsing: source.path)
            foreign.tables = entities
            source = StoreLocation(kind: source.kind, path: foreign.description)
        }
        let check = options.checkSource ? try source.check() : nil
        let store = try source.openSource(alreadyChecked: check != nil)
        do {
            return (store, try selectedSchema(store.schema, options.entities), check)
        } catch {
            try? store.close()
            throw error
        }
    }

    static func selectedSchema(_ schema: Schema, _ names: [String]?) throws -> Schema {
        guard let names else { return schema }
        for name in names where schema.entity(named: name) == nil {
            throw StoreError(.unknownEntity, "the source has no entity '\(name)' (it has "
                + schema.entities.map(\.name).joined(separator: ", ") + ")")
        }
        // A relationship to an entity left out is left out too (its attribute stays, as a plain
        // value); the join entity of a many-to-many between two selected entities comes along.
        var entities = schema.entities.filter { names.contains($0.name) }
        for position in entities.indices {
            entities[position].relationships.removeAll { relationship in
                !names.contains(relationship.destination)
            }
        }
        return try Schema(version: schema.version, entities: entities).resolved()
    }

    /// Where a copy into `destination` stands, for a tool that must say what to run next.
    public enum CopyState: Sendable, Hashable {
        /// Nothing is there: a copy starts from the beginning.
        case missing
        /// An unfinished copy is there: `--resume` (``MigrationOptions/resume``) finishes it.
        case unfinished
        /// A complete store is there.
        case complete
    }

    /// Where a copy into `destination` stands; a destination that cannot be opened counts as
    /// unfinished (a resume then says what is wrong with it).
    /// - Throws: `corrupt` naming the store and the record when the store opens but its
    ///   unfinished-copy marker cannot be read: whether the copy finished is then unknown, which
    ///   is never "complete".
    public static func copyState(of destination: StoreLocation) throws -> CopyState {
        if let streamed = (try? destination.backend) as? any StreamedStoreBackend,
           streamed.hasUnfinishedStream(at: destination.path) {
            return .unfinished
        }
        guard destination.exists else { return .missing }
        guard let store = try? acceptingUnfinished({ try destination.open(schema: nil) }) else { return .unfinished }
        defer { try? store.close() }
        return try unfinishedMarker(in: store, of: destination) == nil ? .complete : .unfinished
    }

    /// The unfinished-copy marker of `store` (the source's location, as the copy that made it
    /// wrote it), or `nil` for a store no copy left unfinished.
    /// - Throws: `corrupt` naming `location` and the record when it cannot be read: the one
    ///   record that says "not finished" is never taken as absent.
    package static func unfinishedMarker(in store: any DataStore, of location: StoreLocation) throws -> String? {
        do {
            return try store.read { try $0.metadata(forKey: MetadataKeys.incompleteMigration) }
                .map { String(decoding: $0, as: UTF8.self) }
        } catch {
            throw StoreError(.corrupt, "\(location): its unfinished-copy marker (reserved record "
                + "'\(MetadataKeys.incompleteMigration)') cannot be read, so whether the copy into it finished is "
                + "unknown (\(error)); nothing was done (check the store with: "
                + ShellCommand.migrateStore("check", location.description) + ")")
        }
    }

    /// Refuses, before anything is read, a destination in a file system directory that does not
    /// exist or that this process cannot write (its staging files go there): with the directory
    /// named, rather than the staging file's open error once the source was checked.
    /// - Throws: `notFound` or `readOnly`.
    public static func checkDirectory(of destination: StoreLocation) throws {
        guard try destination.backend.fileExtension != nil else { return }
        try requireWritableDirectory(of: destination.path, "cannot create \(destination)")
    }

    /// Throws, naming `what` ("cannot create lmdb:x.lmdb"), when the directory `path` goes in
    /// does not exist (`notFound`) or this user cannot write it (`readOnly`).
    public static func requireWritableDirectory(of path: String, _ what: String) throws {
        let directory = PathNames.directory(of: path)
        let shown = directory.isEmpty ? "the current directory" : "the directory \(directory)"
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.isEmpty ? "." : directory, isDirectory: &isDirectory) else {
            throw StoreError(.notFound, "\(what): \(shown) does not exist")
        }
        guard isDirectory.boolValue else {
            throw StoreError(.invalidArgument, "\(what): \(directory) is a file, not a directory")
        }
        guard access(directory.isEmpty ? "." : directory, W_OK | X_OK) == 0 else {
            throw StoreError(.readOnly, "\(what): \(shown) is read-only to this user "
                + "(\(String(cString: strerror(errno))))")
        }
    }

    /// Refuses a destination that exists, unless `overwrite` and it may be replaced.
    /// - Returns: whether it exists (and is to be replaced): asked once, as on PostgreSQL each
    ///   asking is a connection.
    private static func checkNew(_ destination: StoreLocation, overwrite: Bool) throws -> Bool {
        guard destination.exists else { return false }
        if overwrite {
            try destination.requireReplaceable()
            return true
        }
        let unfinished = try (try? acceptingUnfinished { try destination.open(schema: nil) }).map { store in
            defer { try? store.close() }
            return try unfinishedMarker(in: store, of: destination) != nil
        } ?? false
        throw StoreError(.invalidArgument, "destination \(destination) already exists; "
            + (unfinished ? "it is an unfinished migration: finish it with --resume or replace it with --overwrite"
                : "replace it with --overwrite"))
    }

    /// Creates the destination at a staging location, marks it unfinished, then moves it into
    /// place, so that no crash can leave a destination that opens as a complete, empty store.
    /// Its files take `permissions` before anything is written into them.
    static func create(_ destination: StoreLocation, schema: Schema, marker: String,
                       permissions: FilePermissions?, durability: Durability = .normal,
                       preparing: (WriteAccessor) throws -> Void = { _ in }) throws -> any DataStore {
        var staging = destination
        staging.path = try destination.backend.stagingPath(for: destination.path)
        if staging.exists {
            try staging.requireReplaceable(staging: true)
            try staging.destroy()
        }
        let store = try fillingDestination { try staging.open(schema: schema, durability: durability) }
        do {
            try permissions?.apply(to: staging.path)
        } catch {
            try? store.close()
            throw error
        }
        try store.writeSync { writer in
            try writer.setReservedMetadata(Array(marker.utf8), forKey: MetadataKeys.incompleteMigration)
            // The copy's batches are not recorded in the destination's feed, which starts when
            // the copy finishes.
            try writer.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false))
            try preparing(writer)
        }
        try store.close()
        try staging.move(to: destination)
        return try fillingDestination { try destination.open(schema: schema, durability: durability) }
    }

    private static func openUnfinished(_ destination: StoreLocation, schema: Schema) throws -> any DataStore {
        guard destination.exists else {
            throw StoreError(.notFound, "nothing to resume: \(destination) does not exist")
        }
        let store = try fillingDestination { try destination.open(schema: nil, durability: .normal) }
        do {
            guard try unfinishedMarker(in: store, of: destination) != nil else {
                throw StoreError(.invalidArgument, "nothing to resume: \(destination) is a complete store")
            }
            guard store.schema == schema else {
                throw StoreError(.schemaMismatch, "\(destination) was migrated with another schema or entity list")
            }
            return store
        } catch {
            try? store.close()
            throw error
        }
    }
}

/// What a copy does with one entity. A fresh copy, and a resume for an entity no batch has
/// reached yet, copies it plainly (the destination holds none of it). A resume compares an entity
/// it finished, or the one it was in, with the snapshot. In the one it was in, when a plain copy
/// wrote the last checkpoint, it compares only up to the checkpoint's key, since nothing after
/// it was written, and copies the rest.
enum ResumePlan: Equatable {
    case copy
    /// Compare through this key (all when `nil`); copy what follows it.
    case compare(through: Value?)

    init(entity: EntitySchema, position: Int, schema: Schema, resume: Bool, checkpoint: Migrator.Checkpoint?) {
        guard resume else {
            self = .copy
            return
        }
        // No checkpoint: no batch was written.
        guard let checkpoint else {
            self = .copy
            return
        }
        if checkpoint.finishedEntities.contains(entity.name) {
            self = .compare(through: nil)
        } else if checkpoint.entity == entity.name {
            self = checkpoint.copied == true && checkpoint.lastKey != nil ? .compare(through: checkpoint.lastKey)
                : .compare(through: nil)
        } else if let current = schema.entities.firstIndex(where: { $0.name == checkpoint.entity }), position > current {
            self = .copy
        } else {
            self = .compare(through: nil)
        }
    }
}

/// The mutable state of one migration run: its report, options and callbacks.
final class MigrationRun {
    var report: MigrationReport
    let options: MigrationOptions
    /// Items per write transaction of the copy (``MigrationOptions/copyBatchSize(into:)``).
    let copyBatchSize: PositiveInt
    let shouldStop: () -> Bool
    let progress: (MigrationProgress) -> Void
    private let started = Date()
    private var finishedEntities: [String] = []

    init(operation: MigrationReport.Operation, _ source: StoreLocation, _ destination: StoreLocation, _ options: MigrationOptions,
         _ shouldStop: @escaping () -> Bool, _ progress: @escaping (MigrationProgress) -> Void) {
        report = MigrationReport(operation: operation, source: source.description, destination: destination.description)
        self.options = options
        copyBatchSize = options.copyBatchSize(into: try? destination.backend)
        self.shouldStop = shouldStop
        let instruments = MigrationInstruments(options.instrumentation, report: report)
        self.instruments = instruments
        self.progress = instruments.map { instruments in { instruments.record($0); progress($0) } } ?? progress
    }

    private let instruments: MigrationInstruments?

    func finish() -> MigrationReport {
        report.seconds = Date().timeIntervalSince(started)
        instruments?.finished(report)
        return report
    }

    /// Turns a stop request into ``MigrationInterrupted`` carrying the report so far.
    func interruptible(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch is StopRequested {
            throw MigrationInterrupted(report: finish())
        }
    }

    /// Writes the checkpoint after a batch: its last key, and whether a plain copy wrote it.
    typealias CheckpointWriter = (WriteAccessor, Value?, Bool) throws -> Void

    /// Runs one entity's pass with its report entry, checkpoint writer and progress ticker.
    func entity(_ entity: EntitySchema, phase: MigrationProgress.Phase, _ snapshot: ReadAccessor,
                _ body: (inout EntityReport, @escaping CheckpointWriter, @escaping (Int) -> Void) throws -> Void) throws {
        let start = Date()
        var entry = EntityReport(entity: entity.name)
        let total = try snapshot.count(FetchRequest(entity.name))
        let finished = finishedEntities
        let checkpoint: CheckpointWriter = { writer, key, copied in
            let mark = Migrator.Checkpoint(entity: entity.name, lastKey: key, finishedEntities: finished, copied: copied)
            try Migrator.checkpointRecord.write(mark, into: writer)
        }
        let tick = { [progress] (done: Int) in
            progress(MigrationProgress(phase: phase, entity: entity.name, done: done, total: total,
                                       itemsPerSecond: Double(done) / max(Date().timeIntervalSince(start), 1e-6)))
        }
        do {
            try body(&entry, checkpoint, tick)
        } catch let stop as StopRequested {
            // A stopped run's summary counts what the entity in progress wrote before the stop.
            entry.seconds = Date().timeIntervalSince(start)
            report.entities.append(entry)
            throw stop
        }
        entry.seconds = Date().timeIntervalSince(start)
        report.entities.append(entry)
        finishedEntities.append(entity.name)
    }

    /// Copies an entity, or its items after `start`, into a destination that holds none of them,
    /// by the paged copy (``PagedCopy``), each page with its checkpoint.
    func copyEntity(_ entity: EntitySchema, _ snapshot: ReadAccessor, _ destination: any DataStore, after start: Value?,
                    _ entry: inout EntityReport, _ checkpoint: @escaping CheckpointWriter, _ tick: (Int) -> Void) throws {
        var pages = PagedCopy(destination: destination, batchSize: copyBatchSize, shouldStop: shouldStop)
        pages.measurePages(batchChosen: options.chosenBatchSize != nil)
        let done = entry.itemsRead
        var committed = 0
        defer {
            // Every committed page counts, also when the copy stops after one.
            entry.itemsRead += committed
            entry.itemsWritten += committed
        }
        _ = try pages.copy(entity, after: start, reading: { try $0(snapshot) },
                           checkpoint: { writer, last in try checkpoint(writer, last, true) },
                           committed: { committed = $0; tick(done + $0) })
    }

    func diff(_ entity: EntitySchema, _ snapshot: ReadAccessor, _ destination: any DataStore, _ mode: StoreDiff.Mode,
              through: Value? = nil, _ entry: inout EntityReport, _ checkpoint: @escaping CheckpointWriter,
              _ tick: @escaping (Int) -> Void) throws {
        try StoreDiff(entity: entity, source: snapshot, destination: destination, batchSize: options.batchSize,
                      mode: mode, through: through,
                      checkpoint: { try checkpoint($0, $1, false) }, progress: tick, shouldStop: shouldStop)
            .run(&entry, samples: &report.sampleDifferences)
    }

    /// Compares every entity of the snapshot with the destination, item by item.
    func verify(_ schema: Schema, _ snapshot: ReadAccessor, _ destination: any DataStore) throws {
        for entity in schema.entities {
            let start = Date()
            var entry = EntityReport(entity: entity.name)
            let total = try snapshot.count(FetchRequest(entity.name))
            try diff(entity, snapshot, destination, .compare, &entry, { _, _, _ in }, { [progress] done in
                progress(MigrationProgress(phase: .verify, entity: entity.name, done: done, total: total,
                                           itemsPerSecond: Double(done) / max(Date().timeIntervalSince(start), 1e-6)))
            })
            if let index = report.entities.firstIndex(where: { $0.entity == entity.name }) {
                report.entities[index].itemsVerified = entry.itemsVerified
                report.entities[index].differences = entry.differences
                report.entities[index].seconds += Date().timeIntervalSince(start)
            } else {
                entry.seconds = Date().timeIntervalSince(start)
                report.entities.append(entry)
            }
        }
        report.verified = true
    }
}

extension Migrator {
    /// Throws `schemaMismatch` unless `destinationSchema` holds every entity of `schema` as it is
    /// there, naming the first entity that is missing or differs, and how.
    /// Refuses a comparison of whole stores when the destination has entities the source does
    /// not: they cannot be equal, and a source whose stored schema lists fewer entities (or none:
    /// a damaged schema) must not be called equal to a store that holds them.
    /// - Throws: `schemaMismatch` naming them.
    static func requireNoOtherEntities(in destinationSchema: Schema, than schema: Schema,
                                       _ source: StoreLocation) throws(StoreError) {
        let others = destinationSchema.entities.map(\.name).filter { schema.entity(named: $0) == nil }
        guard !others.isEmpty else { return }
        throw StoreError(.schemaMismatch, "the destination has entities that \(source) does not: "
            + others.map { "'\($0)'" }.joined(separator: ", ") + " (the source's schema lists "
            + (schema.entities.isEmpty ? "none; check it with: migrate-store check \(source))"
                : schema.entities.map(\.name).joined(separator: ", ") + "; compare some with --entities)"))
    }

    ///
    /// With `selected` (the `--entities` of a run), each chosen entity is compared with the
    /// destination's as the run sees both: without the relationships to entities left out
    /// (``selectedSchema(_:_:)`` on each side), so two equal stores compare equal.
    static func requireEntities(of schema: Schema, in destinationSchema: Schema,
                                _ destination: StoreLocation, selected: [String]? = nil) throws(StoreError) {
        var destinationSchema = destinationSchema
        if let selected {
            let present = selected.filter { destinationSchema.entity(named: $0) != nil }
            do {
                destinationSchema = try selectedSchema(destinationSchema, present)
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(.schemaMismatch, "\(destination)'s schema cannot be narrowed to \(selected): \(error)")
            }
        }
        for entity in schema.entities where destinationSchema.entity(named: entity.name) != entity {
            guard let theirs = destinationSchema.entity(named: entity.name) else {
                throw StoreError(.schemaMismatch, "\(destination) has no entity '\(entity.name)' (it has "
                    + destinationSchema.entities.map(\.name).joined(separator: ", ") + ")")
            }
            let differences = SchemaDifference.between(stored: Schema(version: 1, entities: [theirs]),
                                                       requested: Schema(version: 1, entities: [entity]))
            throw StoreError(.schemaMismatch, "the entity '\(entity.name)' of \(destination) differs from the "
                + "source's: " + (differences.isEmpty ? orderDifference(theirs, entity)
                    : "from it to the source's, " + differences.map(\.summary).joined(separator: "; ")))
        }
    }
}

extension Migrator {
    /// What differs between two entities that hold the same attributes, indexes and
    /// relationships in another order, as "its relationships are in the order a, b; the
    /// source's b, a". The order is part of a schema (it fixes the record layout and the indexes
    /// a store builds), so two such entities are not the same.
    static func orderDifference(_ theirs: EntitySchema, _ ours: EntitySchema) -> String {
        var parts: [String] = []
        func compare(_ what: String, _ a: [String], _ b: [String]) {
            guard a != b else { return }
            parts.append("its \(what) are in the order \(a.joined(separator: ", ")); the source's "
                + b.joined(separator: ", "))
        }
        compare("attributes", theirs.attributes.map(\.name), ours.attributes.map(\.name))
        compare("indexes", theirs.indexes.map(\.name), ours.indexes.map(\.name))
        compare("relationships", theirs.relationships.map(\.name), ours.relationships.map(\.name))
        return parts.isEmpty ? "they differ in a detail the schema difference does not name"
            : parts.joined(separator: "; ")
    }
}

/// A migration's log lines and metrics (``MigrationOptions/instrumentation``): its start, each
/// phase of each entity, its end; the items done, and the pace.
final class MigrationInstruments {
    private let logger: Logger
    private let logs: Bool
    private let factory: (any MetricsFactory)?
    private var current: (phase: MigrationProgress.Phase, entity: String)?
    private var doneInPhase = 0
    private var items: Counter?
    private var pace: Gauge?

    init?(_ instrumentation: Instrumentation, report: MigrationReport) {
        factory = instrumentation.metricsFactory
        logs = instrumentation.logs
        guard logs || factory != nil else { return nil }
        logger = instrumentation.logger
        logger.info("migration started", metadata: ["operation": "\(report.operation)", "from": "\(report.source)",
                                                    "to": "\(report.destination)"])
    }

    func record(_ progress: MigrationProgress) {
        if current?.phase != progress.phase || current?.entity != progress.entity {
            current = (progress.phase, progress.entity)
            doneInPhase = 0
            if logs {
                logger.info("migration phase", metadata: ["phase": "\(progress.phase.rawValue)",
                                                          "entity": "\(progress.entity)", "items": "\(progress.total)"])
            }
            if let factory {
                let dimensions = [("phase", progress.phase.rawValue)]
                items = Counter(label: "datastore_migration_items_total", dimensions: dimensions, factory: factory)
                pace = Gauge(label: "datastore_migration_items_per_second", dimensions: dimensions, factory: factory)
            }
        }
        if progress.done > doneInPhase {
            items?.increment(by: progress.done - doneInPhase)
            doneInPhase = progress.done
        }
        pace?.record(progress.itemsPerSecond)
    }

    func finished(_ report: MigrationReport) {
        guard logs else { return }
        logger.info("migration finished", metadata: [
            "operation": "\(report.operation)", "seconds": "\(report.seconds)", "differences": "\(report.differences)",
        ])
    }
}


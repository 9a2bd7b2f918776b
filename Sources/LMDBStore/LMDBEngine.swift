internal import CLMDB
@_spi(Backend) import DataStoreAPI
import Foundation
import Logging

/// The LMDB backend: a named database per entity (order-preserving key → compact, versioned
/// record), one per index, and `_ds_meta` for the format version and schema.
@_spi(Backend) public final class LMDBEngine: StorageEngine, CommitCounting, CommitNotifying {
    /// The format this code writes. Format 1 wrote index keys without the separator that
    /// ``LMDBIndexKeys`` puts between tuple and primary key; its indexes are rebuilt on open.
    /// Formats 1 and 2 wrote records without a checksum (``LMDBRecordCoding``); a writable open
    /// checks and seals every record, in the same one transaction as the index rebuild. Formats 1
    /// to 3 wrote the header without its checksum (``StoreHeader``); the same transaction writes
    /// it again with one.
    static let formatVersion = 4
    /// The first format whose header carries its checksum.
    static let headerSealedSince = 4

    public let schema: Schema
    /// The environment directory.
    public let path: String
    let environment: LMDBEnvironment
    /// The format the store was opened at: older than ``formatVersion`` only for a read-only
    /// open, which does not upgrade.
    let storedFormat: Int
    /// What the page walk on open found (``LMDBOptions/checkPages``).
    let pagesChecked: LMDBCheckReport?
    let databases: LMDBDatabases

    /// Opens the store in the directory `path`, creating it (with `schema`) when it does not
    /// exist or is empty.
    ///
    /// - Parameter schema: the schema the store must hold; `nil` opens an existing store.
    /// - Throws: `notFound` (no store there and no schema), `notAStore` (a file, a directory
    ///   holding other things, an LMDB environment that is not a store), `incompatibleFormat`,
    ///   `schemaMismatch`, `readOnly`, `corrupt`.
    public init(path: String, schema requested: Schema?, options: LMDBOptions = LMDBOptions()) throws {
        self.path = path
        let readOnly = options.readOnly
        try Self.checkDirectory(path, create: requested != nil && !readOnly)
        if let check = try Self.fileCheck(path, creating: requested != nil && !readOnly) {
            defer { check.close() }
            _ = try check.checkMeta()
        }
        guard let maxReaders = UInt32(exactly: options.maxReaders.value) else {
            throw StoreError(.invalidArgument, "maxReaders \(options.maxReaders.value) is past what LMDB counts "
                + "(\(UInt32.max))")
        }
        environment = try LMDBEnvironment(path: path, mapSize: options.initialMapSize,
                                          maxReaders: maxReaders, durability: options.durability,
                                          readOnly: readOnly, mapCoversDisk: options.mapCoversDisk)
        pagesChecked = options.checkPages ? try Self.walk(environment) : nil
        let txn = try LMDBRawTransaction(environment: environment, write: !readOnly)
        defer { txn.finish() }
        let existingMeta = try txn.openDatabase("_ds_meta", create: false)
        var stored: Schema?
        var storedFormat = Self.formatVersion
        if let meta = existingMeta {
            let header = try StoreHeader.read(location: path, supportedFormat: Self.formatVersion,
                                              sealedSince: Self.headerSealedSince) { key in
                try txn.withValue(meta, Array(key.utf8)) { Array($0) }
            }
            guard let header else { throw StoreError(.corrupt, "\(path): the store's header is missing") }
            (storedFormat, stored) = header
        } else if try txn.count(environment.mainDatabase(in: txn.txn)) > 0 {
            throw StoreError(.notAStore, "\(path) is an LMDB environment but not a DataStore store (no _ds_meta)")
        }
        if readOnly && stored == nil {
            throw StoreError(.notFound, "\(path) holds no store")
        }
        let (schema, isNew) = try Schema.resolve(stored: stored, requested: requested, location: path)
        self.schema = schema
        let meta = try existingMeta ?? txn.openDatabase("_ds_meta", create: true)
        guard let meta else { throw StoreError(.io, "\(path): cannot create _ds_meta") }
        let opened = try LMDBDatabases.open(schema, environment, txn, meta: meta, create: isNew)
        // A read-only store of format 1 cannot have its indexes rebuilt: queries scan instead.
        databases = readOnly && storedFormat < 2 ? opened.withoutIndexes : opened
        if isNew {
            try StoreHeader.write(schema, format: Self.formatVersion) { try txn.put(meta, Array($0.utf8), $1) }
        }
        try txn.commit()
        let upgrading = storedFormat < Self.formatVersion && !readOnly
        self.storedFormat = upgrading ? Self.formatVersion : storedFormat
        if upgrading {
            try upgrade(from: storedFormat)
        }
    }

    /// The page check of an existing `data.mdb`; `nil` when there is none yet, or when an empty
    /// one is about to be created by a writable open.
    private static func fileCheck(_ path: String, creating: Bool) throws -> LMDBPageCheck? {
        let file = path + "/data.mdb"
        guard FileManager.default.fileExists(atPath: file) else { return nil }
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        if size == 0 && creating { return nil }
        return try LMDBPageCheck(path: path)
    }

    /// Walks every page of the snapshot that a read transaction pins for the walk's duration.
    /// A writer of another process that commits twice between the transaction's start and the
    /// walk's read of the meta pages leaves no meta page naming the snapshot: the walk then takes
    /// a new one, up to 1,000 times.
    static func walk(_ environment: LMDBEnvironment) throws -> LMDBCheckReport {
        let check = try LMDBPageCheck(path: environment.path)
        defer { check.close() }
        for _ in 0..<1_000 {
            let txn = try LMDBRawTransaction(environment: environment, write: false)
            defer { txn.finish() }
            if let report = try check.walk(txnid: UInt64(mdb_txn_id(txn.txn))) {
                return LMDBCheckReport(pageSize: report.pageSize, pages: report.pages, entries: report.entries,
                                       databases: report.databases)
            }
        }
        throw StoreError(.busy, "\(environment.path): a writer committed faster than the page check could read the "
            + "meta page of a snapshot, 1,000 times; check the store when it writes less")
    }

    /// Checks the environment at `path` without letting liblmdb read a page first: the meta
    /// pages and the file's length, then every page of every tree with bounds checks (see
    /// ``LMDBOptions/checkPages``), then every record of the store against its schema. Opens
    /// the environment read-only and writes nothing.
    /// - Throws: `corrupt` naming the file, database, page or item at the first damage found;
    ///   `notAStore`, `notFound`, `readOnly` as an open does.
    static func check(path: String) throws -> LMDBCheckReport {
        let engine = try LMDBEngine(path: path, schema: nil, options: LMDBOptions(readOnly: true, checkPages: true))
        defer { try? engine.close() }
        var report = try engine.pagesChecked ?? walk(engine.environment)
        let txn = try LMDBRawTransaction(environment: engine.environment, write: false)
        defer { txn.finish() }
        try engine.checkDatabasesAgainstSchema(txn)
        let storage = LMDBTransaction(txn: txn, databases: engine.databases)
        var damage: [String] = []
        for entity in engine.schema.entities {
            report.items += try storage.checkRecords(entity, sealed: engine.storedFormat >= 3, damage: &damage)
        }
        if !damage.isEmpty { throw StoreError.damagedRecords(path, damage, checked: report.items) }
        return report
    }

    /// Throws `corrupt` when the environment holds a named database that its stored schema
    /// does not explain: a schema damaged into listing fewer entities would otherwise hide
    /// databases full of items from every read and copy. (A database the schema names and the
    /// environment lacks fails the open already.)
    private func checkDatabasesAgainstSchema(_ txn: LMDBRawTransaction) throws {
        var expected: Set<String> = []
        for entity in schema.entities {
            expected.insert(LMDBDatabases.entityName(entity.name))
            for index in entity.indexes { expected.insert(LMDBDatabases.indexName(entity.name, index.name)) }
        }
        var unexplained: [String] = []
        try txn.forEach(try environment.mainDatabase(in: txn.txn), from: nil) { key, _ in
            let name = String(decoding: key, as: UTF8.self)
            if !name.hasPrefix("_ds_") && !expected.contains(name) { unexplained.append(name) }
            return true
        }
        guard unexplained.isEmpty else {
            throw StoreError(.corrupt, "\(path) is damaged: it holds the database" + (unexplained.count > 1 ? "s " : " ")
                + unexplained.prefix(3).map { "'\($0)'" }.joined(separator: ", ")
                + (unexplained.count > 3 ? " and \(unexplained.count - 3) more" : "")
                + ", which the stored schema does not name")
        }
    }

    /// Rewrites every index in the current format, in one write transaction, reading each
    /// entity in pages (a cursor would not survive the restart that growing the map needs).
    /// Brings a store of an older format to this one in one transaction (a crash leaves the old
    /// format, and the next writable open runs it again): index keys of format 1 rebuilt, the
    /// records of formats 1 and 2 checked and sealed with their checksums, the header of formats 1
    /// to 3 written with its checksum.
    private func upgrade(from storedFormat: Int) throws {
        let txn = try LMDBRawTransaction(environment: environment, write: true)
        defer { txn.finish() }
        let storage = LMDBTransaction(txn: txn, databases: databases)
        for entity in schema.entities where storedFormat < 3 {
            try storage.sealRecords(entity)
        }
        if storedFormat < 2 {
            try rebuildIndexes(storage, txn)
        }
        try StoreHeader.write(schema, format: Self.formatVersion) { try txn.put(databases.meta, Array($0.utf8), $1) }
        try txn.commit()
    }

    private func rebuildIndexes(_ storage: LMDBTransaction, _ txn: LMDBRawTransaction) throws {
        for entity in schema.entities {
            guard let indexes = databases.indexes[entity.name], !indexes.isEmpty else { continue }
            for (_, dbi) in indexes { try txn.drop(dbi) }
            var after: PrimaryKey?
            while true {
                let page = try storage.scan(entity, after: after, limit: 1_000)
                for record in page {
                    let key = try PrimaryKey(record[entity.primaryKey])
                    for index in entity.indexes {
                        guard let dbi = indexes[index.name] else { continue }
                        try txn.put(dbi, LMDBIndexKeys.key(index, record, primaryKey: key.bytes), key.bytes)
                    }
                    after = key
                }
                if page.count < 1_000 { break }
            }
        }
    }

    private static func checkDirectory(_ path: String, create: Bool) throws {
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        if files.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw StoreError(.notAStore, "\(path) is a file, not an LMDB environment directory")
            }
            guard access(path, R_OK | X_OK) == 0 else {
                throw StoreError(.readOnly, "\(path): permission denied: cannot read the environment directory")
            }
            if files.fileExists(atPath: path + "/data.mdb") { return }
            let entries = (try? files.contentsOfDirectory(atPath: path)) ?? []
            if entries.contains(where: { $0 != "lock.mdb" }) {
                throw StoreError(.notAStore, "\(path) is a directory that holds no LMDB environment and is not empty")
            }
            guard create else { throw StoreError(.notFound, "\(path) holds no store") }
            return
        }
        guard create else { throw StoreError(.notFound, "\(path) does not exist") }
        let parent = PathNames.directory(of: path)
        guard parent.isEmpty || files.fileExists(atPath: parent) else {
            throw StoreError(.notFound, "\(path): directory \(parent) does not exist")
        }
        do {
            try files.createDirectory(atPath: path, withIntermediateDirectories: false)
        } catch {
            throw StoreError(.readOnly, "\(path): cannot create the environment directory: \(error.localizedDescription)")
        }
    }

    public func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        let txn = try LMDBRawTransaction(environment: environment, write: false)
        defer { txn.finish() }
        return try body(LMDBTransaction(txn: txn, databases: databases))
    }

    /// LMDB's own transaction id: it moves with every commit of any process.
    public func commitCounter() throws -> UInt64 {
        try environment.lastCommittedTransaction()
    }

    /// Every commit, of any process, ends by writing a meta page of the data file: observers
    /// sleep until the kernel reports a write to it (``FileCommitWatch``).
    public func attach(_ logger: Logger) { environment.logger.withLock { $0 = logger } }

    public func subscribeToCommits(_ wake: @escaping @Sendable () -> Void) -> (any CommitSubscription)? {
        FileCommitWatch.watch(path + "/data.mdb", wake: wake)
    }

    public func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        guard !environment.isReadOnly else {
            throw StoreError(.readOnly, "\(path) is open read-only; it cannot be written")
        }
        let txn = try LMDBRawTransaction(environment: environment, write: true)
        defer { txn.finish() }
        let result = try body(LMDBTransaction(txn: txn, databases: databases))
        try txn.commit()
        return result
    }

    public func close() throws {
        try environment.close()
    }

    /// Opens every database of the schema again, inside `txn`: a restartable write may have
    /// dropped some in an attempt that then rolled back, and liblmdb closes a dropped handle at once.
    private func reopenDatabases(_ txn: LMDBRawTransaction) throws -> LMDBDatabases {
        guard let meta = try txn.openDatabase("_ds_meta", create: false) else {
            throw StoreError(.corrupt, "\(path): _ds_meta is missing")
        }
        return try LMDBDatabases.open(schema, environment, txn, meta: meta, create: false)
    }
}

extension LMDBEngine: RestartableWriting {
    /// A write transaction without a journal: when the map fills, it rolls back, the map
    /// doubles and `body` runs again from the start, so memory does not grow with the
    /// transaction (schema upgrades of any size use it).
    public func restartableWrite<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        guard !environment.isReadOnly else {
            throw StoreError(.readOnly, "\(path) is open read-only; it cannot be written")
        }
        var growths = 0
        while true {
            let txn = try LMDBRawTransaction(environment: environment, write: true, journaled: false)
            defer { txn.finish() }
            do {
                let result = try body(LMDBTransaction(txn: txn, databases: reopenDatabases(txn)))
                try txn.commit()
                return result
            } catch where LMDBRawTransaction.isMapFull(error) && growths < 40 {
                growths += 1
                txn.finish()
                try environment.grow()
            }
        }
    }

    /// The current map size in bytes.
    var mapSize: Int { environment.mapSize }

    /// The index and ranges a filter would use (for tests).
    func plannedIndex(_ request: FetchRequest) -> String? {
        schema.entity(named: request.entity).flatMap { LMDBQueryPlan.plan(request.filter, $0)?.0.name }
    }
}

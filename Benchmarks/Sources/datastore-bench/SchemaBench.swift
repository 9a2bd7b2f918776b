import BenchSupport
import DataStoreAPI
import Foundation
import LMDBStore
import RawLMDB
import RawSQLite
import SQLiteStore

/// Each kind of schema step on a store of `n` items, next to the raw engine making the same
/// change: SQLite's `ALTER TABLE` / `CREATE INDEX` (a table rebuilt in SQL for a change of type),
/// and on LMDB a cursor loop that rewrites every record's bytes (or writes every index entry) in
/// one transaction. With `key`, on encrypted stores (where every step but an index's rewrites
/// each item: opened, changed, sealed again).
@MainActor func benchmarkSchemaSteps(n: Int, key: StoreKey? = nil) throws {
    let workload = Workload(count: n)
    let item = Workload.schema.entities[0]
    // Each step, its raw SQL, and the LMDB raw loop's kind of work.
    let steps: [(String, SchemaStep, String, RawLMDBStep)] = [
        ("add optional attribute", .addAttribute(entity: "Item", attribute: Attribute("note", .string, optional: true)),
         "ALTER TABLE \"Item\" ADD COLUMN \"note\" TEXT", .appendByte),
        ("add attribute with default", .addAttribute(entity: "Item", attribute: Attribute("rank", .int, default: .int(3))),
         "ALTER TABLE \"Item\" ADD COLUMN \"rank\" INTEGER NOT NULL DEFAULT 3", .appendByte),
        ("rename attribute", .renameAttribute(entity: "Item", from: "name", to: "title"),
         "ALTER TABLE \"Item\" RENAME COLUMN \"name\" TO \"title\"", .metadataOnly),
        // SQLite's documented way to change a column's declared type (an `UPDATE … CAST` under the
        // old INTEGER type would store the doubles as integers again): a new table, the rows
        // copied, the old table dropped, the new one renamed, its index built.
        ("change type int -> double", .changeType(entity: "Item", attribute: "rank", to: .double),
         """
         CREATE TABLE "_raw" ("id" INTEGER PRIMARY KEY NOT NULL, "title" TEXT NOT NULL, "score" INTEGER NOT NULL, \
         "ratio" NOT NULL, "payload" BLOB NOT NULL, "note" TEXT, "rank" NOT NULL);
         INSERT INTO "_raw" SELECT "id", "title", "score", "ratio", "payload", "note", CAST("rank" AS REAL) FROM "Item";
         DROP TABLE "Item";
         ALTER TABLE "_raw" RENAME TO "Item";
         CREATE INDEX "Item.byScore" ON "Item" ("score");
         """, .rewriteInPlace),
        ("add index", .addIndex(entity: "Item", index: Index("byRatio", on: ["ratio"])),
         "CREATE INDEX \"Item.byRatio\" ON \"Item\" (\"ratio\")", .indexEntries),
        ("remove index", .removeIndex(entity: "Item", name: "byRatio"), "DROP INDEX \"Item.byRatio\"", .dropIndex),
        ("remove attribute", .removeAttribute(entity: "Item", name: "note"),
         "ALTER TABLE \"Item\" DROP COLUMN \"note\"", .rewriteInPlace),
        ("rename entity", .renameEntity(from: "Item", to: "Thing"),
         "ALTER TABLE \"Item\" RENAME TO \"Thing\"", .copyDatabase),
    ]
    _ = item
    for engine in ["SQLite", "LMDB"] {
        let backend = engine + (key == nil ? "" : ", encrypted")
        let directory = scratch("schema-\(engine)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + (engine == "SQLite" ? "/store.sqlite" : "/store.lmdb")
        func open(_ schema: Schema, _ upgrades: SchemaUpgrades) throws -> any DataStore {
            engine == "SQLite"
                ? try SQLiteStore(path: path, schema: schema, upgrades: upgrades,
                                  options: SQLiteOptions(durability: .normal, key: key))
                : try LMDBStore(path: path, schema: schema, upgrades: upgrades,
                                options: LMDBOptions(durability: .normal, initialMapSize: 8 << 30, key: key))
        }
        let seeded = try open(Workload.schema, SchemaUpgrades())
        try APIBench(store: seeded, workload: workload).insertAll(from: 0, count: n, batch: n)
        try seeded.close()
        let rawSQLiteStore = engine == "SQLite" ? RawSQLiteBench(path: directory + "/raw.sqlite", workload: workload) : nil
        let rawLMDBStore: RawLMDBBench? = engine == "LMDB" ? rawLMDB(directory + "/raw.lmdb", workload) : nil
        rawSQLiteStore?.insertAll(from: 0, count: n, batch: n)
        rawLMDBStore?.insertAll(from: 0, count: n, batch: n)
        var schema = Workload.schema
        for (name, step, sql, lmdbWork) in steps {
            var upgrades = SchemaUpgrades()
            upgrades.version(schema.version + 1, step)
            let next = try SchemaPlan([.init(schema.version + 1, [step])]).target(from: schema)
            let api = try time { try open(next, upgrades).close() }
            let raw = time {
                if let rawSQLiteStore {
                    rawSQLiteStore.begin()
                    let rc = rawSQLiteStore.exec(sql)
                    precondition(rc == SQLITE_OK, "the raw SQL of '\(name)' failed (\(rc))")
                    rawSQLiteStore.commitTransaction()
                } else if let rawLMDBStore {
                    rawLMDBStore.schemaStep(lmdbWork)
                }
            }
            record(backend, "schema step: \(name)", n, operations: n, api: api, raw: raw)
            schema = next
        }
    }
}

enum RawLMDBStep { case appendByte, metadataOnly, rewriteInPlace, indexEntries, dropIndex, copyDatabase }

extension RawLMDBBench {
    /// The raw counterpart of a schema step, in one write transaction.
    func schemaStep(_ step: RawLMDBStep) {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        defer { mdb_txn_commit(txn) }
        var meta: MDB_dbi = 0
        mdb_dbi_open(txn, "_raw_meta", UInt32(MDB_CREATE), &meta)
        put(txn, meta, Array("schema".utf8), Array(repeating: 7, count: 600))
        var target: MDB_dbi = 0
        switch step {
        case .metadataOnly:
            return
        case .dropIndex:
            mdb_dbi_open(txn, "i.Item.byRatio", UInt32(MDB_CREATE), &target)
            mdb_drop(txn, target, 1)
            return
        case .indexEntries:
            mdb_dbi_open(txn, "i.Item.byRatio", UInt32(MDB_CREATE), &target)
        case .copyDatabase:
            mdb_dbi_open(txn, "e.Thing", UInt32(MDB_CREATE), &target)
        case .appendByte, .rewriteInPlace:
            target = items
        }
        // Read every record, then write what the step writes for it.
        var pairs: [([UInt8], [UInt8])] = []
        pairs.reserveCapacity(workload.count)
        var cursor: OpaquePointer?
        mdb_cursor_open(txn, items, &cursor)
        var key = MDB_val()
        var data = MDB_val()
        var rc = mdb_cursor_get(cursor, &key, &data, MDB_FIRST)
        while rc == MDB_SUCCESS {
            let k = Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
            var v = Array(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size))
            switch step {
            // The record's fields changed (or rewritten as they were), and sealed again: its
            // checksum covers them (RawRowSum).
            case .appendByte: v = RawLMDBBench.resealed(Array(v.dropLast(4)) + [0])
            case .rewriteInPlace:
                v[v.count - 5] ^= 0
                v = RawLMDBBench.resealed(Array(v.dropLast(4)))
            case .indexEntries:
                pairs.append((Array(v.suffix(9)) + [0] + k, k))
                rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
                continue
            default: break
            }
            pairs.append((k, v))
            rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
        }
        mdb_cursor_close(cursor)
        for (k, v) in pairs { put(txn, target, k, v) }
        if step == .copyDatabase { mdb_drop(txn, items, 0) }
    }
}

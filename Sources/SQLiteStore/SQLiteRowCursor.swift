internal import CSQLite
@_spi(Backend) import DataStoreAPI

/// A visit's row read in the statement: each column where SQLite keeps it (its page cache or
/// the statement's buffer), checked by ``SQLiteStatement/holdsRow(_:)`` before the row is
/// handed over. Nothing is built per row.
final class SQLiteRowCursor: RowCursor {
    let layout: RecordLayout
    let types: [ValueType]
    let entityName: String
    private let handle: OpaquePointer

    init(_ entity: EntitySchema, _ handle: OpaquePointer) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        self.handle = handle
    }

    func isNull(at slot: Int) -> Bool { sqlite3_column_type(handle, Int32(slot)) == SQLITE_NULL }

    func int64(at slot: Int) -> Int64 { sqlite3_column_int64(handle, Int32(slot)) }

    func double(at slot: Int) -> Double { sqlite3_column_double(handle, Int32(slot)) }

    func withBytes(at slot: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        let column = Int32(slot)
        // The pointer first, then its length (SQLite's documented order).
        let pointer = types[slot] == .string ? UnsafeRawPointer(sqlite3_column_text(handle, column))
            : sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        body(UnsafeRawBufferPointer(start: count > 0 ? pointer : nil, count: pointer == nil ? 0 : count))
    }
}

@_spi(Backend) import DataStoreAPI

/// A visit's row read in LMDB's map: the stored record's fields (``LMDBRecordCoding``), checked
/// and laid out in the cursor's ``FieldTable`` by ``load(_:)`` before the row is handed over.
/// Nothing is built per row: the table is the cursor's, written in place, and its strings and
/// bytes point into the map.
final class LMDBRowCursor: RowCursor {
    let layout: RecordLayout
    let types: [ValueType]
    let entityName: String
    let table: FieldTable
    var fieldTable: FieldTable? { table }
    private let check: LMDBFieldCheck

    init(_ entity: EntitySchema, _ check: LMDBFieldCheck) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        table = FieldTable(count: types.count)
        self.check = check
    }

    func type(at slot: Int) -> ValueType { types[slot] }

    func field(at slot: Int) -> RowField {
        precondition(slot >= 0 && slot < types.count, "a row's field index out of range")
        return table[slot]
    }

    /// Makes the stored record `bytes` (in the map) the current row: every field checked
    /// (``LMDBFieldCheck``) and noted in the table.
    /// - Returns: whether the record is sound (when it is not, the table is partly written).
    func load(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let table = self.table
        return check.walk(bytes) { slot, _, field in table[slot] = field }
    }
}

internal import CChecksum

/// The checksum of a row's values, as the SQL backends keep it beside the row (a column of its
/// own): the CRC-32C of the values' fields as a compact record holds them (``FieldWriter``: a tag
/// and payload per attribute, in the entity's order) up to the last that is not null. Trailing
/// nulls are left out so that adding an optional attribute, a column of nulls, leaves every sum
/// as it was.
@_spi(Backend) public enum RecordSum {
    /// The sum of `values`, in their entity's order.
    public static func of(_ values: UnsafeBufferPointer<Value>) -> Int64 {
        var size = 0
        for value in values { size += FieldWriter.size(of: value) }
        return withUnsafeTemporaryAllocation(byteCount: max(size, 1), alignment: 1) { buffer in
            let base = buffer.baseAddress.unsafelyUnwrapped
            var (at, end) = (0, 0)
            for value in values {
                at += FieldWriter.write(value, at: base + at)
                if !value.isNull { end = at }
            }
            return of(UnsafeRawPointer(base), count: end)
        }
    }

    /// The sum of a record's values.
    public static func of(_ values: RecordValues) -> Int64 {
        values.withUnsafeBufferPointer { of($0) }
    }

    /// The sum of `values`.
    public static func of(_ values: [Value]) -> Int64 {
        values.withUnsafeBufferPointer { of($0) }
    }

    /// The sum of fields already written: `count` bytes at `base`, up to the last field that is
    /// not null.
    @inline(__always)
    public static func of(_ base: UnsafeRawPointer, count: Int) -> Int64 {
        Int64(ds_crc32c(0, base, count))
    }
}

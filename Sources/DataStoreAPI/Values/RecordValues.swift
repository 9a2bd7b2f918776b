/// The values of many records in one allocation: its header counts the values initialized so
/// far, from the start, and those are the ones its deinit destroys.
///
/// Written only at its tail (by ``RecordArena``, past every value a record already refers to) or
/// by a record that holds the only reference to it, so a value a record can see never changes
/// under it: sending records to other threads is safe (``RecordValues`` is `@unchecked Sendable`;
/// `ManagedBuffer` subclasses cannot be `Sendable` themselves).
@usableFromInline
final class ValueStorage: ManagedBuffer<Int, Value> {
    /// Room for `capacity` values, none initialized.
    @inlinable
    static func make(capacity: Int) -> ValueStorage {
        unsafeDowncast(create(minimumCapacity: capacity) { _ in 0 }, to: ValueStorage.self)
    }

    deinit {
        withUnsafeMutablePointers { initialized, values in _ = values.deinitialize(count: initialized.pointee) }
    }
}

/// A record's values, in order: a run of a ``ValueStorage`` that the record may share with
/// other records (those a store returned together; see ``RecordArena``). Copy on write: a
/// change to a shared run copies the run (and only the run) first.
///
/// 16 bytes, so that a record is 24.
@_spi(Backend) public struct RecordValues: RandomAccessCollection, MutableCollection, @unchecked Sendable {
    @usableFromInline var storage: ValueStorage?
    @usableFromInline var start: Int32
    @usableFromInline var length: Int32

    @inlinable init(storage: ValueStorage?, start: Int, count: Int) {
        self.storage = storage
        self.start = Int32(truncatingIfNeeded: start)
        self.length = Int32(truncatingIfNeeded: count)
    }

    /// No values.
    public init() { self.init(storage: nil, start: 0, count: 0) }

    /// The values of a collection, in order.
    public init<C: Collection<Value>>(_ values: C) {
        let count = values.count
        guard count > 0 else {
            self.init()
            return
        }
        let storage = ValueStorage.make(capacity: count)
        storage.withUnsafeMutablePointers { initialized, base in
            for value in values {
                precondition(initialized.pointee < count, "a collection longer than its count")
                (base + initialized.pointee).initialize(to: value)
                initialized.pointee += 1
            }
        }
        self.init(storage: storage, start: 0, count: storage.header)
    }

    /// `count` copies of one value.
    public init(repeating value: Value, count: Int) {
        guard count > 0 else {
            self.init()
            return
        }
        let storage = ValueStorage.make(capacity: count)
        storage.withUnsafeMutablePointers { initialized, base in
            base.initialize(repeating: value, count: count)
            initialized.pointee = count
        }
        self.init(storage: storage, start: 0, count: count)
    }

    public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { Int(length) }
    @inlinable public var count: Int { Int(length) }

    @inlinable
    public subscript(position: Int) -> Value {
        get {
            precondition(position >= 0 && position < Int(length), "a record's value index out of range")
            return storage.unsafelyUnwrapped.withUnsafeMutablePointerToElements { $0[Int(start) + position] }
        }
        set {
            precondition(position >= 0 && position < Int(length), "a record's value index out of range")
            makeUnique()
            storage.unsafelyUnwrapped.withUnsafeMutablePointerToElements { $0[Int(start) + position] = newValue }
        }
    }

    /// Calls `body` with the values in place.
    @inlinable
    public func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<Value>) throws -> R) rethrows -> R {
        guard let storage else { return try body(UnsafeBufferPointer(start: nil, count: 0)) }
        return try storage.withUnsafeMutablePointerToElements {
            try body(UnsafeBufferPointer(start: $0 + Int(start), count: Int(length)))
        }
    }

    /// Calls `body` with the values in place, to replace them (each stays initialized): the run
    /// is copied first when another record shares its storage.
    @inlinable
    public mutating func withUnsafeMutableBufferPointer<R>(
        _ body: (UnsafeMutableBufferPointer<Value>) throws -> R
    ) rethrows -> R {
        guard length > 0 else { return try body(UnsafeMutableBufferPointer(start: nil, count: 0)) }
        makeUnique()
        let (start, length) = (Int(self.start), Int(self.length))
        return try storage.unsafelyUnwrapped.withUnsafeMutablePointerToElements {
            try body(UnsafeMutableBufferPointer(start: $0 + start, count: length))
        }
    }

    /// Whether no other record shares the storage (a change then needs no copy).
    @inlinable
    mutating func isUnique() -> Bool { isKnownUniquelyReferenced(&storage) }

    /// Copies the run into storage of its own unless this is the storage's only reference.
    @inlinable
    mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&storage) { self = copy(extraCapacity: 0) }
    }

    /// The values followed by one more.
    mutating func append(_ value: Value) {
        var grown = copy(extraCapacity: 1)
        grown.storage.unsafelyUnwrapped.withUnsafeMutablePointers { initialized, base in
            (base + Int(grown.length)).initialize(to: value)
            initialized.pointee += 1
        }
        grown.length += 1
        self = grown
    }

    /// The values in storage of their own, with room for `extraCapacity` more.
    @usableFromInline
    func copy(extraCapacity: Int) -> RecordValues {
        let count = Int(length)
        guard count + extraCapacity > 0 else { return RecordValues() }
        let fresh = ValueStorage.make(capacity: count + extraCapacity)
        fresh.withUnsafeMutablePointers { initialized, base in
            withUnsafeBufferPointer { values in
                if let source = values.baseAddress { base.initialize(from: source, count: count) }
            }
            initialized.pointee = count
        }
        return RecordValues(storage: fresh, start: 0, count: count)
    }

    /// Whether both hold equal values in the same order, compared in place.
    static func equalElements(_ a: RecordValues, _ b: RecordValues) -> Bool {
        guard a.length == b.length else { return false }
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in
                for i in x.indices where !(x[i] == y[i]) { return false }
                return true
            }
        }
    }
}

/// Appends a record's values to the storage a ``RecordArena`` hands it, each initialized once
/// (no null written first and then replaced).
@_spi(Backend) public struct ValueSink {
    @usableFromInline let base: UnsafeMutablePointer<Value>
    @usableFromInline let capacity: Int
    @usableFromInline var appended = 0
    /// How many values were appended.
    public var count: Int { appended }

    @usableFromInline init(base: UnsafeMutablePointer<Value>, capacity: Int) {
        self.base = base
        self.capacity = capacity
    }

    /// Appends the next value; one past the record's last attribute is a programming error.
    @inlinable
    public mutating func append(_ value: Value) {
        precondition(appended < capacity, "more values than the record's layout names")
        (base + appended).initialize(to: value)
        appended += 1
    }

    /// Destroys what was appended (a record that could not be read whole).
    @usableFromInline mutating func discard() {
        base.deinitialize(count: appended)
        appended = 0
    }
}

/// Builds the records of one result with their values in shared allocations (growing to
/// ``valuesPerChunk`` values), in place of one allocation per record: for a fetch or scan that
/// keeps many records, where allocating and freeing a values array per record is a large part
/// of the cost.
///
/// A record kept after the others are gone keeps its chunk alive: at most a chunk per record,
/// `valuesPerChunk` values (24 bytes each), and a fetch that keeps a few records of many (a
/// sorted fetch with a limit) keeps at most that many chunks.
@_spi(Backend) public struct RecordArena {
    /// Values per shared allocation (12 KiB).
    public static let valuesPerChunk = 512

    private var chunk: ValueStorage?
    /// The chunk's initialized values; its capacity.
    private var used = 0, capacity = 0
    /// Records the next chunk holds: one at first (a point get's record takes no more than it
    /// needs), twice as many each time after, up to ``valuesPerChunk`` values.
    private var recordsPerChunk = 1

    public init() {}

    /// A record of `layout` whose values `fill` appends to the sink, one per name in order, or
    /// `nil` when `fill` returns `false` (then it could not read the row; what it appended is
    /// destroyed). Neither generic nor throwing, as ``Record/refill(layout:_:)``: the caller keeps
    /// its own error.
    public mutating func record(layout: RecordLayout, _ fill: (inout ValueSink) -> Bool) -> Record? {
        let count = layout.names.count
        if chunk == nil || capacity - used < count {
            capacity = max(min(recordsPerChunk * count, Self.valuesPerChunk), count)
            if recordsPerChunk * count < Self.valuesPerChunk { recordsPerChunk *= 2 }
            chunk = ValueStorage.make(capacity: capacity)
            used = 0
        }
        let storage = chunk.unsafelyUnwrapped
        let start = used
        let complete = storage.withUnsafeMutablePointers { initialized, base -> Bool in
            var sink = ValueSink(base: base + start, capacity: count)
            guard fill(&sink), sink.count == count else {
                sink.discard()
                return false
            }
            initialized.pointee = start + count
            return true
        }
        guard complete else { return nil }
        used = start + count
        return Record(layout: layout, values: RecordValues(storage: storage, start: start, count: count))
    }
}

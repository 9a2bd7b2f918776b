/// The filter, sort and page stages of a request, for backends without a query engine of their
/// own (the in-memory tables, LMDB, child stores): they offer candidates, the stages answer
/// exactly as the canonical semantics say.
///
/// Offered in key order, a request without sort keys streams: offset and limit apply as the
/// candidates arrive and ``offer(key:record:)`` says when no more are needed. With sort keys,
/// every match is kept, then sorted (ties by primary key) and paged.
@_spi(Backend) public struct RequestStages {
    public let request: FetchRequest
    private let inKeyOrder: Bool
    private var skipped = 0
    private var taken = 0
    /// The filter bound to the layout of the records offered (compiled at the first one).
    private var compiled: CompiledFilter?
    private var streamed: [Record] = []
    private var kept: [(key: [UInt8], record: Record)] = []

    /// Stages for `request`; `inKeyOrder` when candidates come in canonical key order.
    public init(_ request: FetchRequest, inKeyOrder: Bool = true) {
        self.request = request
        self.inKeyOrder = inKeyOrder
    }

    /// Makes room for the answer of a request that streams when the backend knows how many
    /// candidates it will offer (every item of an entity, no filter): a million-record fetch
    /// then builds its array once, instead of doubling it twenty times and touching the memory
    /// of every copy.
    public mutating func reserve(candidates: Int) {
        guard streams, case .all = request.filter else { return }
        // At most 2^26 ahead: the count is the backend's (a damaged file's, on LMDB), and an array
        // larger than that grows as it fills.
        let answer = max(0, min(candidates, 1 << 26) - request.offset)
        streamed.reserveCapacity(min(answer, request.limit ?? .max))
    }

    /// Whether the stages can stop taking candidates early (no sort, candidates in key order).
    private var streams: Bool { request.sort.isEmpty && inKeyOrder }

    /// Offers a candidate (it need not match the filter); its key is read only when a sort
    /// needs it. The record is consumed: a caller that hands over its last use of a fresh record
    /// moves it into the answer (no reference retained and released per record).
    /// - Returns: false once no later candidate can change the answer.
    public mutating func offer(key: @autoclosure () -> [UInt8], record: consuming Record) -> Bool {
        guard matches(record) else { return true }
        guard streams else {
            kept.append((key(), record))
            return true
        }
        switch admit() {
        case .skip: return true
        case .stop: return false
        case .take:
            streamed.append(record)
            return request.limit.map { streamed.count < $0 } ?? true
        }
    }

    /// Whether the record matches the request's filter: by position for records of the layout
    /// the filter was compiled for (the first stored layout offered), by name otherwise (a child
    /// store offers records of more than one layout; compiling per switch would cost more).
    private mutating func matches(_ record: Record) -> Bool {
        if case .all = request.filter { return true }
        if compiled == nil {
            guard let layout = record.storedLayout else { return request.filter.matches(record) }
            compiled = CompiledFilter(request.filter, layout: layout)
        }
        // Read where it is kept: bound with `if let`, the filter was copied (its four references
        // retained and released) for every record offered.
        return compiled!.matches(record)
    }

    /// What a streaming request does with its next match.
    public enum Admission { case skip, take, stop }

    /// For a request that streams (no sort keys, candidates in key order) and hands its matches
    /// on instead of keeping them: what to do with the next match, offset and limit applied.
    public mutating func admit() -> Admission {
        if skipped < request.offset {
            skipped += 1
            return .skip
        }
        if let limit = request.limit, taken >= limit { return .stop }
        taken += 1
        return .take
    }

    /// Hands the matches among candidates offered in key order to `body` while it returns true,
    /// offset and limit applied; for requests without sort keys.
    /// - Returns: false once no later candidate can change the answer.
    public mutating func pass(_ record: Record, to body: (Record) throws -> Bool) rethrows -> Bool {
        guard matches(record) else { return true }
        switch admit() {
        case .skip: return true
        case .stop: return false
        case .take: return try body(record) && request.limit.map { taken < $0 } ?? true
        }
    }

    /// The answer: the matches in the request's order, offset and limit applied.
    public func finish() -> [Record] {
        if streams { return streamed }
        let sorted = kept.sorted { request.sort.compare($0, $1) < 0 }
        return request.page(sorted.map(\.record))
    }

    /// Answers `request` over candidates in any order.
    public static func answer(
        _ request: FetchRequest,
        over candidates: some Sequence<(key: [UInt8], record: Record)>
    ) -> [Record] {
        var stages = RequestStages(request, inKeyOrder: false)
        for (key, record) in candidates { _ = stages.offer(key: key, record: record) }
        return stages.finish()
    }
}

import CoreMetrics
import Dispatch
import Logging

/// Where a store, and the migration engine, report what they do: a swift-log `Logger` and a
/// swift-metrics factory, the ecosystem's own interfaces, so that the app's logging and metrics
/// backends (a JSON log, Prometheus, OpenTelemetry) receive them with everything else.
///
/// Silent by default: the logger prints nothing and the metrics go to the factory the app
/// bootstrapped with `MetricsSystem.bootstrap` (none, unless it did). Without either, a store
/// does not even read the clock for them.
///
/// What is logged: opens (`info`), LMDB map growth (`notice`), reconnections to PostgreSQL
/// (`warning`), read and write blocks slower than ``slowOperation`` (`warning`), migration
/// phases (`info`). What is counted, each with the dimension `backend`:
/// `datastore_commits_total`, `datastore_rollbacks_total`, `datastore_reads_total` (counters);
/// `datastore_commit_duration` (a timer, from the write block's start to its commit);
/// `datastore_migration_items_total` and `datastore_migration_items_per_second` (a counter and a
/// gauge, with the dimension `phase`).
public struct Instrumentation: Sendable {
    /// The logger; the default prints nothing.
    public var logger: Logger
    /// The metrics factory; `nil` uses `MetricsSystem.factory` as it is when the store opens.
    public var metrics: (any MetricsFactory)?
    /// Read and write blocks that take longer are logged as warnings.
    public var slowOperation: Duration

    public init(logger: Logger? = nil, metrics: (any MetricsFactory)? = nil,
                slowOperation: Duration = .milliseconds(500)) {
        self.logger = logger ?? Self.silentLogger
        self.metrics = metrics
        self.slowOperation = slowOperation
    }

    /// Nothing logged, and metrics only if the app bootstrapped a metrics system.
    public static var none: Instrumentation { Instrumentation() }

    private static let silentLogger = Logger(label: "DataStore", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Whether the logger has a handler that may print something.
    package var logs: Bool { !(logger.handler is SwiftLogNoOpLogHandler) }

    /// The factory to use, `nil` when it is the no-op one.
    package var metricsFactory: (any MetricsFactory)? {
        let factory = metrics ?? MetricsSystem.factory
        return factory is NOOPMetricsHandler ? nil : factory
    }
}

/// A store's instruments, made once when it opens; `nil` in a store that reports nothing.
final class StoreInstruments: Sendable {
    let logger: Logger
    let logs: Bool
    let slowNanoseconds: Int64
    let commits: Counter?
    let rollbacks: Counter?
    let reads: Counter?
    let commitDuration: Timer?

    init?(_ instrumentation: Instrumentation, backend: String) {
        let factory = instrumentation.metricsFactory
        guard instrumentation.logs || factory != nil else { return nil }
        logger = instrumentation.logger
        logs = instrumentation.logs
        let slow = instrumentation.slowOperation.components
        // A threshold past what 64 bits of nanoseconds hold (about 292 years) is never reached.
        let (whole, past) = slow.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        slowNanoseconds = past ? .max : whole.addingReportingOverflow(slow.attoseconds / 1_000_000_000).overflow ? .max
            : whole + slow.attoseconds / 1_000_000_000
        let dimensions = [("backend", backend)]
        commits = factory.map { Counter(label: "datastore_commits_total", dimensions: dimensions, factory: $0) }
        rollbacks = factory.map { Counter(label: "datastore_rollbacks_total", dimensions: dimensions, factory: $0) }
        reads = factory.map { Counter(label: "datastore_reads_total", dimensions: dimensions, factory: $0) }
        commitDuration = factory.map { Timer(label: "datastore_commit_duration", dimensions: dimensions, factory: $0) }
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    func wrote(since start: UInt64, committed: Bool) {
        let nanoseconds = Int64(Self.now() - start)
        if committed {
            commits?.increment()
            commitDuration?.recordNanoseconds(nanoseconds)
        } else {
            rollbacks?.increment()
        }
        if logs, nanoseconds > slowNanoseconds {
            logger.warning("slow write block", metadata: ["milliseconds": "\(nanoseconds / 1_000_000)",
                                                          "committed": "\(committed)"])
        }
    }

    func read(since start: UInt64) {
        reads?.increment()
        guard logs else { return }
        let nanoseconds = Int64(Self.now() - start)
        if nanoseconds > slowNanoseconds {
            logger.warning("slow read block", metadata: ["milliseconds": "\(nanoseconds / 1_000_000)"])
        }
    }
}

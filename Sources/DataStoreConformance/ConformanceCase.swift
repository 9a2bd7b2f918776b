import DataStoreAPI
import Foundation
import Synchronization
import Testing

/// One case of the conformance suite. Run every case with a parameterized test so each is
/// reported on its own:
///
/// ```swift
/// @Test(arguments: ConformanceSuite.cases)
/// func conformance(_ testCase: ConformanceCase) async throws {
///     try await testCase.run(on: myBackend)
/// }
/// ```
public struct ConformanceCase: Sendable, CustomTestStringConvertible, CustomStringConvertible {
    /// The area of the protocol the case checks (`CRUD`, `Queries`, `Child stores`, ...).
    public let area: String
    /// The case's name, which states the behaviour it checks.
    public let name: String
    let body: @Sendable (ConformanceContext) async throws -> Void

    init(_ area: String, _ name: String, _ body: @escaping @Sendable (ConformanceContext) async throws -> Void) {
        self.area = area
        self.name = name
        self.body = body
    }

    /// `Area: name`.
    public var testDescription: String { "\(area): \(name)" }
    public var description: String { testDescription }

    /// Runs the case against `backend` and returns its first failed expectation, or the error it
    /// threw, without recording either: `nil` when the case passes. What a test of a deliberately
    /// broken backend asks, in one line per case.
    public func firstFailure(on backend: ConformanceBackend) async -> String? {
        let collector = FailureCollector()
        do {
            try await FailureCollector.$current.withValue(collector) { try await run(on: backend) }
        } catch {
            collector.keep("threw \(error)")
        }
        return collector.first
    }

    /// Runs the case against `backend` in a fresh temporary directory, closing every store it
    /// opened and removing the directory afterwards. Failed expectations are attributed to
    /// `sourceLocation`, the caller's test.
    public func run(on backend: ConformanceBackend, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("conformance-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let context = ConformanceContext(backend: backend, directory: directory, sourceLocation: sourceLocation)
        defer {
            context.closeAll()
            try? FileManager.default.removeItem(at: directory)
        }
        try await body(context)
    }
}

/// What a case works with: the backend, its own directory, and the caller's source location.
public final class ConformanceContext: Sendable {
    /// The backend under test.
    public let backend: ConformanceBackend
    /// The case's own temporary directory.
    public let directory: URL
    /// Where failed expectations are reported: the caller's test.
    public let sourceLocation: SourceLocation
    private let opened = Mutex<[any DataStore]>([])

    init(backend: ConformanceBackend, directory: URL, sourceLocation: SourceLocation) {
        self.backend = backend
        self.directory = directory
        self.sourceLocation = sourceLocation
    }

    /// Opens the store named `name` in the case's directory.
    public func open(_ schema: Schema? = Fixtures.schema, name: String = "store",
                     upgrades: SchemaUpgrades = SchemaUpgrades()) throws -> any DataStore {
        let store = try backend.open(directory.appendingPathComponent(name), schema, upgrades)
        opened.withLock { $0.append(store) }
        return store
    }

    func closeAll() {
        for store in opened.withLock({ $0 }) { try? store.close() }
    }

    /// Records a failed expectation: as an issue of the running test, or, while
    /// ``ConformanceCase/firstFailure(on:)`` runs the case, only the first one, kept there.
    func fail(_ message: @autoclosure () -> String) {
        if let collector = FailureCollector.current {
            collector.keep(message())
        } else {
            Issue.record(Comment(rawValue: message()), sourceLocation: sourceLocation)
        }
    }

    /// Expects `body` to throw a ``StoreError`` with `code` whose message contains `naming`.
    func expectError(_ code: StoreError.Code, naming: String? = nil, _ what: String = "",
                     _ body: () throws -> Void) {
        do {
            try body()
            fail("expected \(code) error \(what), got none")
        } catch let error as StoreError {
            if error.code != code { fail("expected \(code) \(what), got \(error)") }
            if let naming, !error.message.contains(naming) {
                fail("message '\(error.message)' should name '\(naming)'")
            }
        } catch {
            fail("expected StoreError \(code) \(what), got \(error)")
        }
    }

    /// Runs `body` on a thread of its own and records an issue when it has not returned within
    /// `seconds`: a case that would deadlock fails instead of hanging the suite.
    /// Expectations belong in the caller, on the test's own task: `body` returns what to check.
    func withinDeadline<T: Sendable>(_ seconds: Double, _ what: String,
                                     _ body: @escaping @Sendable () throws -> T) -> T? {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<T, any Error>?>(nil)
        Thread {
            let result = Result { try body() }
            outcome.withLock { $0 = result }
            done.signal()
        }.start()
        guard done.wait(timeout: .now() + seconds) == .success else {
            fail("\(what) did not finish within \(seconds) s on \(backend.name): it hangs")
            return nil
        }
        switch outcome.withLock({ $0 }) {
        case .success(let value)?:
            return value
        case .failure(let error)?:
            fail("\(what) failed on \(backend.name): \(error)")
            return nil
        case nil:
            return nil
        }
    }

    func expect(_ condition: Bool, _ comment: @autoclosure () -> String = "") {
        if !condition { fail("expectation failed: \(comment())") }
    }

    func expectEqual<T: Equatable>(_ actual: T, _ expected: T, _ comment: @autoclosure () -> String = "") {
        if actual != expected { fail("\(comment()): got \(actual), expected \(expected)") }
    }

    func expectEqual<T: Equatable>(_ actual: T?, _ expected: T, _ comment: @autoclosure () -> String = "") {
        if actual != expected { fail("\(comment()): got \(actual.map { "\($0)" } ?? "nil"), expected \(expected)") }
    }
}

/// The first failure of a case run by ``ConformanceCase/firstFailure(on:)``.
final class FailureCollector: Sendable {
    @TaskLocal static var current: FailureCollector?
    private let kept = Mutex<String?>(nil)

    func keep(_ message: String) { kept.withLock { if $0 == nil { $0 = message } } }
    var first: String? { kept.withLock { $0 } }
}

import DataStoreTestSupport
import Foundation
import Testing

/// Async reads and writes run on threads the store owns: in a process of its own (a test
/// process shares its cooperative pool with every test beside it), more `readAsync` and
/// `writeAsync` blocks are blocked at once than Swift's cooperative pool has threads, and a new
/// task still runs (`crash-writer KIND PATH async-probe`). With reads run on the caller's thread,
/// the probe does not run and the tool exits 1.
@Test(arguments: ["sqlite", "lmdb", "memory"])
func asyncReadsAndWritesLeaveTheCooperativePoolFree(_ kind: String) throws {
    let dir = try TemporaryDirectory()
    let output = try runCommand(CrashRecovery.tool.path, [kind, dir.path("store.\(kind)"), "async-probe"])
    #expect(output.contains("probe ran while"), "\(output)")
}

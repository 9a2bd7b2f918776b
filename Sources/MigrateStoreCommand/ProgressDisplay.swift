import Foundation
import StoreMigration

/// A progress bar with rate and ETA on a terminal, plain lines about once a second otherwise.
///
/// `@unchecked Sendable`: the engines call progress on the thread that runs the command, one
/// call at a time (an upgrade's progress closure must be `@Sendable` because a store's
/// upgrades may be kept by the store).
final class ProgressDisplay: @unchecked Sendable {
    private let bar: Bool
    private let silent: Bool
    private var lastDraw = Date.distantPast
    private var lastShown: (String, Int)?
    private var drewBar = false

    init(style: ProgressStyle) {
        let terminal = isatty(STDERR_FILENO) != 0
        bar = style == .bar || (style == .auto && terminal)
        silent = style == .none
    }

    /// A follow's position and lag: redrawn in place on a terminal, a line a second otherwise.
    func show(_ progress: FollowProgress) {
        guard !silent else { return }
        let now = Date()
        guard now.timeIntervalSince(lastDraw) >= (bar ? 0.1 : 1.0) else { return }
        lastDraw = now
        let text = "follow: applied \(progress.applied.sequence) of \(progress.sourceHead.sequence), lag "
            + "\(progress.lagTransactions) transactions / " + String(format: "%.3f", progress.lagSeconds) + " s, "
            + "\(progress.transactionsApplied) applied (\(progress.itemsWritten) written, \(progress.itemsDeleted) deleted)"
        if bar {
            FileHandle.standardError.write(Data(("\r" + text + "\u{1B}[K").utf8))
            drewBar = true
        } else {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }
    }

    func show(_ progress: MigrationProgress) {
        guard !silent else { return }
        let now = Date()
        let complete = progress.done == progress.total
        guard now.timeIntervalSince(lastDraw) >= (bar ? 0.1 : 1.0) || complete else { return }
        let key = (progress.phase.rawValue + progress.entity, progress.done)
        if let lastShown, lastShown == key { return }
        lastShown = key
        lastDraw = now
        // In doubles, and clamped: counts come from stores and checkpoints, a rate from a clock.
        let fraction = progress.total > 0 ? min(1, max(0, Double(progress.done) / Double(progress.total))) : 1
        let rate = progress.itemsPerSecond.isFinite ? max(0, progress.itemsPerSecond) : 0
        let eta = rate > 0 ? max(0, Double(progress.total) - Double(progress.done)) / rate : 0
        let stats = "\(progress.done)/\(progress.total) \(Self.whole(rate)) items/s ETA \(Self.whole(eta))s"
        if bar {
            let width = 30
            let filled = Int(fraction * Double(width))
            let text = "\r\(progress.phase.rawValue) \(progress.entity) [" + String(repeating: "#", count: filled)
                + String(repeating: ".", count: width - filled) + "] \(Int(fraction * 100))% \(stats)\u{1B}[K"
            FileHandle.standardError.write(Data(text.utf8))
            drewBar = true
        } else {
            FileHandle.standardError.write(Data("\(progress.phase.rawValue) \(progress.entity) \(Int(fraction * 100))% \(stats)\n".utf8))
        }
    }

    /// A count of seconds or items a second, rounded, as digits (past 64 bits: the largest).
    static func whole(_ value: Double) -> Int { Int(exactly: value.rounded()) ?? (value > 0 ? .max : 0) }

    func finish() {
        if drewBar { FileHandle.standardError.write(Data("\n".utf8)) }
        drewBar = false
    }
}

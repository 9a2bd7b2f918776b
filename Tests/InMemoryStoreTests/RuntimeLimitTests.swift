@_spi(Backend) import DataStoreAPI
import Foundation
import Synchronization
import Testing

/// A timeout meant as "for ever" gives a condition a deadline it can wait until: Foundation's
/// wait counts the nanoseconds since 1970 in 64 bits and trapped on any date past 2262. A waiter
/// with the longest deadline is woken by a signal.
@Test func theLongestTimeoutIsADeadlineAConditionWaitsUntil() throws {
    let far = Date.deadline(after: .seconds(Int64.max))
    #expect(far.timeIntervalSinceNow > 99 * 365 * 86_400 && far.timeIntervalSinceNow < 101 * 365 * 86_400)
    #expect(Date.deadline(after: .seconds(-5)).timeIntervalSinceNow <= 0.001)

    let condition = NSCondition()
    let state = Mutex((waiting: false, woken: false, done: false))
    let waiter = Thread {
        condition.lock()
        state.withLock { $0.waiting = true }
        while !state.withLock({ $0.woken }) { _ = condition.wait(until: Date.deadline(after: .seconds(Int64.max))) }
        condition.unlock()
        state.withLock { $0.done = true }
    }
    waiter.start()
    // The waiter holds the lock from before it says it waits until its wait lets go of it.
    while true {
        condition.lock()
        let waiting = state.withLock { $0.waiting }
        if waiting {
            state.withLock { $0.woken = true }
            condition.signal()
        }
        condition.unlock()
        if waiting { break }
        Thread.sleep(forTimeInterval: 0.001)
    }
    while !state.withLock({ $0.done }) { Thread.sleep(forTimeInterval: 0.001) }
}

private enum LastVersion: ModelVersion {
    static let version = Int.max
    static let models: [any DataObject.Type] = []
}

private enum AfterTheLast: ModelVersion {
    static let version = Int.min
    static let models: [any DataObject.Type] = []
    static let upgradeSteps: [UpgradeStep] = [.step(.addEntity(EntitySchema("Nothing", primaryKey: "id", attributes: [Attribute("id", .int)])))]
}

private enum PastTheLast: ModelVersionPlan {
    static let versions: [any ModelVersion.Type] = [LastVersion.self, AfterTheLast.self]
}

/// A model version plan whose version after `Int.max` is asked for: refused naming the plan,
/// where adding one to the last version overflowed.
@Test func aVersionAfterTheLargestIsRefused() {
    #expect(performing: { _ = try PastTheLast.upgrades() },
            throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("PastTheLast") })
}

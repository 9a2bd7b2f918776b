import Foundation

/// The shared conformance suite: every case, for every backend alike.
public enum ConformanceSuite {
    /// Every case of the suite, or with `DATASTORE_CASES` set in the environment, the cases
    /// whose `Area: name` contains one of its comma-separated words (to run a few cases on
    /// every backend: `DATASTORE_CASES=Limits,ChangeFeed: feedOrder swift test --filter Conformance`).
    public static let cases: [ConformanceCase] = {
        guard let words = ProcessInfo.processInfo.environment["DATASTORE_CASES"]?.split(separator: ","),
              !words.isEmpty else { return all }
        return all.filter { testCase in words.contains { testCase.testDescription.contains($0) } }
    }()

    /// Every case of the suite, whatever the environment says.
    public static let all: [ConformanceCase] =
        CRUDCases.all + ValidationCases.all + ValueCases.all + LimitCases.all + QueryCases.all
            + TransactionCases.all + AsyncWriteCases.all + ChildStoreCases.all + PersistenceCases.all
            + ConcurrencyCases.all + RandomOperationCases.all + TypedModelCases.all + EdgeQueryCases.all
            + EdgeStoreCases.all + SchemaUpgradeCases.all + ChangeFeedCases.all + RelationshipCases.all
            + OrderedRelationshipCases.all
            + AppModelCases.all

    /// The case of that name, if any (for tests that run one case on purpose).
    public static func named(_ name: String) -> ConformanceCase? {
        all.first { $0.name == name }
    }
}

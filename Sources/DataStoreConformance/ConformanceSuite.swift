/// The shared conformance suite: every case, for every backend alike.
public enum ConformanceSuite {
    /// Every case of the suite.
    public static let cases: [ConformanceCase] =
        CRUDCases.all + ValidationCases.all + ValueCases.all + LimitCases.all + QueryCases.all
            + TransactionCases.all + AsyncWriteCases.all + ChildStoreCases.all + PersistenceCases.all
            + ConcurrencyCases.all + RandomOperationCases.all + TypedModelCases.all + EdgeQueryCases.all
            + EdgeStoreCases.all + SchemaEvolutionCases.all + ChangeFeedCases.all

    /// The case of that name, if any (for tests that run one case on purpose).
    public static func named(_ name: String) -> ConformanceCase? {
        cases.first { $0.name == name }
    }
}

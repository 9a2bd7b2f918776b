import BenchSupport
import DataStoreAPI
import DataStoreModels

/// The workload's item declared with the model macro, for the typed rows: the same five
/// attributes in the same order as `Workload.schema`'s `Item`, each model a struct as the raw
/// loop's `RawRow` is.
@StoredModel("Item")
struct BenchItem {
    var id: Int64
    var name: String
    var score: Int64
    var ratio: Double
    var payload: [UInt8]

    /// The workload's item `i`, with the values the raw loop inserts as item `i`.
    init(_ workload: Workload, _ i: Int) {
        (id, name, score, ratio, payload) = (Int64(i), workload.name(i), workload.score(i), workload.ratio(i),
                                             workload.payload(i))
    }
}

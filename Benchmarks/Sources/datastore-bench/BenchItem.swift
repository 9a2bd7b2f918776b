import DataStoreAPI
import DataStoreModels

/// The workload's item declared with the model macro, for the typed fetch row: the same five
/// attributes in the same order as `Workload.schema`'s `Item`, each model a struct as the raw
/// loop's `RawRow` is.
@StoredModel("Item")
struct BenchItem {
    var id: Int64
    var name: String
    var score: Int64
    var ratio: Double
    var payload: [UInt8]
}

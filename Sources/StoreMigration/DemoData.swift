@_spi(Backend) import DataStoreAPI
import Foundation

/// A realistic demo store: customers, products and orders with every value type, optional
/// attributes with nulls, a unique and a non-unique index, and relationships: a customer's
/// orders (cascade), the customer who referred a customer (a self-reference), and the products
/// of an order (many-to-many; deleting a product takes it out of its orders). Deterministic for a
/// given seed.
public enum DemoData {
    /// The demo store's schema: customers, products and orders, related.
    public static let schema = Schema(version: 1, entities: [
        EntitySchema("Customer", primaryKey: "id", attributes: [
            Attribute("id", .uuid), Attribute("name", .string), Attribute("email", .string),
            Attribute("country", .string, optional: true), Attribute("vip", .bool),
            Attribute("balance", .double), Attribute("joinedAt", .date), Attribute("avatar", .bytes, optional: true),
        ], indexes: [Index("byEmail", on: ["email"], unique: true), Index("byCountry", on: ["country"])],
        relationships: [.toOne("referredBy", to: "Customer", inverse: "referrals"),
                        .toMany("referrals", to: "Customer", inverse: "referredBy"),
                        .toMany("orders", to: "Order", inverse: "customer", deleteRule: .cascade)]),
        EntitySchema("Product", primaryKey: "sku", attributes: [
            Attribute("sku", .string), Attribute("title", .string), Attribute("price", .double),
            Attribute("stock", .int), Attribute("description", .string, optional: true),
        ], relationships: [.toMany("orders", to: "Order", inverse: "products")]),
        EntitySchema("Order", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("customer", .uuid),
            Attribute("quantity", .int), Attribute("total", .double), Attribute("placedAt", .date),
            Attribute("note", .string, optional: true),
        ], indexes: [Index("byCustomer", on: ["customer"])],
        relationships: [.toOne("customer", to: "Customer", inverse: "orders", optional: false),
                        .toMany("products", to: "Product", inverse: "orders")]),
    ])

    static let firstNames = ["Zoë", "José", "Ünal", "Ming", "Åsa", "Siobhán", "Nguyễn", "Amélie", "Søren", "李", "Ada",
                             "Grace", "O'Brien", "Renée"]
    static let lastNames = ["Müller", "García", "Smith", "Kowalski", "Dubois", "Tanaka", "Ivanova", "Okafor", "Rossi"]
    static let countries: [Value] = ["DE", "FR", "US", "JP", "BR", "NG", nil]

    /// The most items a demo store is seeded with.
    public static let maxItems = 1_000_000_000

    /// Writes `items` items in total (a fifth customers, a tenth products, the rest orders, each
    /// order with one product, a third of them with a second) into a new store at `location`, in
    /// batches of `batchSize`. The pairs of an order and its products are items of the join
    /// entity `Order_products`, counted in `items`.
    public static func seed(_ location: StoreLocation, items: Int, seed: UInt64, batchSize: Int = 5_000,
                            progress: (Int) -> Void = { _ in }) throws {
        // Checked before the store is made, so that a refused seed leaves nothing behind.
        guard (1...maxItems).contains(items), batchSize >= 1 else {
            throw StoreError(.invalidArgument, "a demo store holds 1 to \(maxItems) items in batches of at least 1 "
                + "(got \(items) items in batches of \(batchSize))")
        }
        let store = try location.open(schema: schema, durability: .normal)
        defer { try? store.close() }
        var rng = DemoRandom(seed: seed)
        let customers = max(1, items / 5)
        let products = max(1, items / 10)
        // An order is itself and one pair, or two in a third of them: 7 items per 3 orders.
        let orders = max(0, (items - customers - products) * 3 / 7)
        var pairs = max(0, items - customers - products - orders)
        var customerIDs: [UUID] = []
        var written = 0
        func batches(_ count: Int, _ make: (Int, inout DemoRandom) -> (String, Record)) throws {
            var start = 0
            while start < count {
                let end = start + min(count - start, batchSize)
                var batch: [(String, Record)] = []
                for i in start..<end { batch.append(make(i, &rng)) }
                try store.writeSync { w in for (entity, record) in batch { try w.insert(record, into: entity) } }
                written += batch.count
                progress(written)
                start = end
            }
        }
        try batches(customers) { i, rng in
            let id = rng.uuid()
            let referrer: Value = customerIDs.isEmpty || rng.next() % 3 != 0 ? .null
                : .uuid(customerIDs[Int(rng.next() % UInt64(customerIDs.count))])
            customerIDs.append(id)
            let name = "\(rng.pick(firstNames)) \(rng.pick(lastNames))"
            return ("Customer", [
                "referredBy": referrer,
                "id": .uuid(id), "name": .string(name), "email": .string("customer\(i)@example.com"),
                "country": rng.pick(countries), "vip": .bool(rng.next() % 10 == 0),
                "balance": .double(Double(Int64(rng.next() % 2_000_000) - 500_000) / 100),
                "joinedAt": .date(Timestamp(microsecondsSinceEpoch: 1_500_000_000_000_000
                    + Int64(rng.next() % 250_000_000_000_000))),
                "avatar": rng.next() % 3 == 0 ? .bytes((0..<32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }) : nil,
            ])
        }
        try batches(products) { i, rng in
            ("Product", [
                "sku": .string(String(format: "SKU-%06d", i)), "title": .string("Product \(i) \(rng.pick(lastNames))"),
                "price": .double(Double(rng.next() % 100_000) / 100), "stock": .int(Int64(rng.next() % 1_000)),
                "description": rng.next() % 4 == 0 ? nil : .string("A fine product, été \(i)"),
            ])
        }
        try batches(orders) { i, rng in
            let quantity = Int64(rng.next() % 5 + 1)
            return ("Order", [
                "id": .int(Int64(i) + 1), "customer": .uuid(customerIDs[Int(rng.next() % UInt64(customerIDs.count))]),
                "quantity": .int(quantity), "total": .double(Double(quantity) * Double(rng.next() % 10_000) / 100),
                "placedAt": .date(Timestamp(microsecondsSinceEpoch: 1_600_000_000_000_000
                    + Int64(rng.next() % 150_000_000_000_000))),
                "note": rng.next() % 5 == 0 ? .string("leave at the door ✓") : nil,
            ])
        }
        // Each order's products: one, and a second while pairs remain.
        var pairList: [(Int64, Int, Int?)] = []
        for order in 0..<orders {
            let first = Int(rng.next() % UInt64(products))
            pairs -= 1
            var second: Int?
            if pairs > orders - order - 1, products > 1 {
                second = (first + 1 + Int(rng.next() % UInt64(products - 1))) % products
                pairs -= 1
            }
            pairList.append((Int64(order) + 1, first, second))
        }
        var flat: [(Int64, Int)] = []
        for (order, first, second) in pairList {
            flat.append((order, first))
            if let second { flat.append((order, second)) }
        }
        try batches(flat.count) { i, rng in
            ("Order_products", [
                "id": .uuid(rng.uuid()), "source": .int(flat[i].0),
                "target": .string(String(format: "SKU-%06d", flat[i].1)),
            ])
        }
    }
}

/// SplitMix64, so that a seed gives the same store on every machine (and a test tool's run can
/// be repeated).
package struct DemoRandom {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func pick<T>(_ values: [T]) -> T { values[Int(next() % UInt64(values.count))] }

    mutating func uuid() -> UUID {
        let bytes = (0..<16).map { _ in UInt8(truncatingIfNeeded: next()) }
        return UUID(bytes: bytes) ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }
}

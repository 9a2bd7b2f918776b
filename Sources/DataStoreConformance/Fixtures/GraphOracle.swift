import DataStoreAPI

/// The relationship rules of ``RelationshipCases/schema`` over plain dictionaries: users with
/// managers (nullify), notes with authors (cascade from the user), notes with tags (pairs,
/// removed with either side). Written from the rules, not from the store's code.
struct GraphModel: Equatable {
    var users: [Int64: Int64?] = [:]      // id -> manager
    var notes: [Int64: Int64] = [:]       // id -> author
    var tags: Set<String> = []
    var pairs: Set<Pair> = []

    struct Pair: Hashable, Comparable {
        var note: Int64
        var tag: String
        static func < (a: Pair, b: Pair) -> Bool { (a.note, a.tag) < (b.note, b.tag) }
    }

    mutating func deleteUser(_ id: Int64) {
        guard users.removeValue(forKey: id) != nil else { return }
        for (note, author) in notes where author == id { deleteNote(note) }
        for (user, manager) in users where manager == id { users[user] = .some(nil) }
    }

    mutating func deleteNote(_ id: Int64) {
        guard notes.removeValue(forKey: id) != nil else { return }
        pairs = pairs.filter { $0.note != id }
    }

    mutating func deleteTag(_ name: String) {
        guard tags.remove(name) != nil else { return }
        pairs = pairs.filter { $0.tag != name }
    }

    /// The first reference that points at nothing, if any.
    var violation: String? {
        for (user, manager) in users.sorted(by: { $0.key < $1.key }) {
            if let manager, users[manager] == nil { return "User \(user) manager \(manager)" }
        }
        for (note, author) in notes.sorted(by: { $0.key < $1.key }) where users[author] == nil {
            return "Note \(note) author \(author)"
        }
        for pair in pairs.sorted() where notes[pair.note] == nil || !tags.contains(pair.tag) {
            return "pair \(pair.note) \(pair.tag)"
        }
        return nil
    }

    /// What the store holds, in the model's terms.
    static func read(_ r: ReadAccessor) throws -> GraphModel {
        var model = GraphModel()
        for user in try r.fetch(FetchRequest("User")) {
            guard case .int(let id) = user["id"] else { continue }
            if case .int(let manager) = user["manager"] { model.users[id] = .some(manager) } else { model.users[id] = .some(nil) }
        }
        for note in try r.fetch(FetchRequest("Note")) {
            if case .int(let id) = note["id"], case .int(let author) = note["author"] { model.notes[id] = author }
        }
        for tag in try r.fetch(FetchRequest("Tag")) { if case .string(let name) = tag["name"] { model.tags.insert(name) } }
        for pair in try r.fetch(FetchRequest("Note_tags")) {
            if case .int(let note) = pair["source"], case .string(let tag) = pair["target"] {
                model.pairs.insert(Pair(note: note, tag: tag))
            }
        }
        return model
    }
}

extension RelationshipCases {
    /// One write of a random graph transaction: applied to the model and, as the same call, to
    /// the store.
    struct GraphStep {
        var label: String
        var model: (inout GraphModel) -> Void
        var store: (WriteAccessor) throws -> Void
    }

    static func randomStep(_ rng: inout SplitMix64, _ model: GraphModel) -> GraphStep {
        let user = Int64(rng.next() % 8)
        let other = Int64(rng.next() % 8)
        let note = Int64(rng.next() % 24)
        let tag = "t\(rng.next() % 4)"
        switch rng.next() % 11 {
        case 0, 1:
            let manager: Int64? = rng.next() % 3 == 0 ? nil : other
            return GraphStep(label: "save user \(user) manager \(manager.map(String.init) ?? "nil")",
                             model: { $0.users[user] = .some(manager) },
                             store: { try $0.save(["id": .int(user), "name": "u", "manager": manager.map { .int($0) } ?? .null],
                                                  into: "User") })
        case 2, 3:
            return GraphStep(label: "save note \(note) author \(user)", model: { $0.notes[note] = user },
                             store: { try $0.save(["id": .int(note), "title": "n", "author": .int(user)], into: "Note") })
        case 4:
            return GraphStep(label: "delete user \(user)", model: { $0.deleteUser(user) },
                             store: { _ = try $0.delete("User", key: .int(user)) })
        case 5:
            return GraphStep(label: "delete note \(note)", model: { $0.deleteNote(note) },
                             store: { _ = try $0.delete("Note", key: .int(note)) })
        case 6:
            return GraphStep(label: "insert tag \(tag)", model: { $0.tags.insert(tag) },
                             store: { if try $0.get("Tag", key: .string(tag)) == nil { try $0.insert(["name": .string(tag)], into: "Tag") } })
        case 7:
            return GraphStep(label: "delete tag \(tag)", model: { $0.deleteTag(tag) },
                             store: { _ = try $0.delete("Tag", key: .string(tag)) })
        case 8, 9:
            // Linking needs the note to exist when the link is made (its pairs are looked up).
            guard model.notes[note] != nil else {
                return GraphStep(label: "delete notes of user \(user)",
                                 model: { m in for (n, a) in m.notes where a == user { m.deleteNote(n) } },
                                 store: { _ = try $0.delete(FetchRequest("Note", filter: Field("author") == .int(user))) })
            }
            return GraphStep(label: "link note \(note) tag \(tag)", model: { $0.pairs.insert(GraphModel.Pair(note: note, tag: tag)) },
                             store: { try $0.link("Note", key: .int(note), "tags", to: .string(tag)) })
        default:
            return GraphStep(label: "unlink note \(note) tag \(tag)",
                             model: { $0.pairs.remove(GraphModel.Pair(note: note, tag: tag)) },
                             store: { _ = try $0.unlink("Tag", key: .string(tag), "notes", from: .int(note)) })
        }
    }

    /// Random transactions of one to four writes over a small graph (so that cascades chain,
    /// references point at items inserted later in the same transaction, and many commits are
    /// refused), some through child stores; after each the store must equal the model, and a
    /// refusal must come exactly when the model finds a dangling reference.
    static func randomGraph(_ c: ConformanceContext, seed: UInt64) throws {
        let store = try c.open(schema)
        var rng = SplitMix64(seed: seed)
        var model = GraphModel()
        for transaction in 0..<150 {
            var next = model
            var steps: [GraphStep] = []
            for _ in 0...(rng.next() % 4) {
                let step = randomStep(&rng, next)
                step.model(&next)
                steps.append(step)
            }
            let expected = next.violation
            let viaChild = rng.next() % 5 == 0
            let labels = steps.map(\.label).joined(separator: ", ")
            do {
                let write: (WriteAccessor) throws -> Void = { w in for step in steps { try step.store(w) } }
                if viaChild {
                    let child = try store.makeChild()
                    try child.writeSync(write)
                    _ = try store.merge(child)
                } else {
                    try store.writeSync(write)
                }
                if let expected {
                    c.fail("transaction \(transaction) [\(labels)] committed, but leaves \(expected) dangling")
                    return
                }
                model = next
            } catch let error as StoreError where error.code == .referenceViolation {
                if expected == nil {
                    c.fail("transaction \(transaction) [\(labels)] was refused: \(error.message)")
                    return
                }
            }
            let actual = try store.read { try GraphModel.read($0) }
            if actual != model {
                c.fail("after transaction \(transaction) [\(labels)]: store \(actual) != model \(model)")
                return
            }
        }
    }
}

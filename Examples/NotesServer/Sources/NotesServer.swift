// An example HTTP service on the store: notes as JSON, with a live list over server-sent
// events, on the backend its --store location names. Built with the package trait
// ExampleServer:
//
//     swift run --traits ExampleServer notes-server --store sqlite:notes.sqlite --port 8080
//
//     GET    /notes          every note, in id order
//     GET    /notes/:id      one note (404 when there is none)
//     POST   /notes          {"title": "...", "done": false} → 201 with the note and its id
//     PATCH  /notes/:id      {"title": "...", "done": true} (either or both)
//     DELETE /notes/:id      204, or 404
//     GET    /notes/live     text/event-stream: the list now, and again after each change
//
// Handlers use the store's async API (`readAsync`, `await writeAsync`), which runs SQLite's,
// LMDB's and PostgreSQL's blocking calls on the store's own threads; `--api sync` calls the
// synchronous `read` and `writeSync` from the handlers instead, for comparison under load.
#if ExampleServer
import ArgumentParser
import DataStoreModels
import Foundation
import Hummingbird
import ServiceLifecycle
import StoreMigration

/// A note: the server's one typed model, declared with the model macro.
@StoredModel
struct Note: ResponseCodable, Equatable {
    static let defaultSort = [SortKey.ascending("id")]
    var id: Int
    var title: String
    var done: Bool
}

/// What POST and PATCH take.
struct NoteInput: Decodable {
    var title: String?
    var done: Bool?
}

/// The server's request context: JSON with its keys in one order (a struct's keys would
/// otherwise come out in the order of a dictionary, which changes from one run to the next).
struct NotesContext: RequestContext {
    var coreContext: CoreRequestContextStorage

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    var responseEncoder: JSONEncoder { NotesServer.encoder() }
}

/// How handlers call the store.
enum StoreAPI: String, ExpressibleByArgument, Sendable {
    case async, sync
}

/// The store calls the handlers make, through the async API or the synchronous one.
struct Notes: Sendable {
    let store: any DataStore
    let api: StoreAPI

    func read<T: Sendable>(_ body: @escaping @Sendable (ReadAccessor) throws -> T) async throws -> T {
        switch api {
        case .async: try await store.readAsync(body)
        case .sync: try store.read(body)
        }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T) async throws -> T {
        switch api {
        case .async: try await store.writeAsync(body)
        case .sync: try store.writeSync(body)
        }
    }
}

@main
struct NotesServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notes-server",
        abstract: "Serves notes over HTTP from a store: JSON, and a live list over server-sent events.")

    @Option(help: "The store: sqlite:PATH, lmdb:PATH, memory:NAME or postgres://USER@HOST/DB?schema=NAME.")
    var store: String

    @Option(help: "The port to listen on (0: any free one; the server prints it).")
    var port = 8080

    @Option(help: "The store API the handlers call: async (readAsync, writeAsync) or sync (read, writeSync).")
    var api = StoreAPI.async

    @Option(help: "Notes to create when the store has none.")
    var seed = 0

    static let schema = Schema(version: 1, entities: [try! Note.entitySchema()])

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0 to 65535, not \(port)") }
        guard seed >= 0 else { throw ValidationError("--seed must be 0 or more, not \(seed)") }
    }

    func run() async throws {
        let location: StoreLocation
        do {
            location = try StoreLocation(parsing: store)
        } catch {
            throw ValidationError("\(error)")
        }
        let store = try location.open(schema: Self.schema, durability: .normal)
        defer { try? store.close() }
        let notes = Notes(store: store, api: api)
        if seed > 0 {
            let seed = seed
            try store.writeSync { w in
                guard try w.count(FetchRequest(Note.entityName)) == 0 else { return }
                for id in 1...seed { try w.insert(Note(id: id, title: "note \(id)", done: id % 2 == 0)) }
            }
        }
        let app = Application(
            router: Self.router(notes),
            configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                FileHandle.standardOutput.write(Data("listening on http://127.0.0.1:\(port)\n".utf8))
            })
        try await app.runService()
    }

    /// A JSON encoder whose output does not depend on hash order.
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601  // Hummingbird's default
        return encoder
    }

    static func router(_ notes: Notes) -> Router<NotesContext> {
        let router = Router(context: NotesContext.self)
        router.get("notes") { _, _ -> [Note] in
            try await notes.read { try $0.fetch(Note.self) }
        }
        router.get("notes/:id") { _, context -> Note in
            let id = try context.parameters.require("id", as: Int.self)
            guard let note = try await notes.read({ try $0.get(Note.self, key: .int(Int64(id))) }) else {
                throw HTTPError(.notFound, message: "no note \(id)")
            }
            return note
        }
        router.post("notes") { request, context -> EditedResponse<Note> in
            let input = try await request.decode(as: NoteInput.self, context: context)
            guard let title = input.title else { throw HTTPError(.badRequest, message: "a note needs a title") }
            let note = try await notes.write { w -> Note in
                let last = try w.fetch(Note.self, sortedBy: [.descending("id")], limit: 1).first?.id ?? 0
                let note = Note(id: last + 1, title: title, done: input.done ?? false)
                try w.insert(note)
                return note
            }
            return EditedResponse(status: .created, response: note)
        }
        router.patch("notes/:id") { request, context -> Note in
            let id = try context.parameters.require("id", as: Int.self)
            let input = try await request.decode(as: NoteInput.self, context: context)
            let edited = try await notes.write { w -> Note? in
                guard var note = try w.get(Note.self, key: .int(Int64(id))) else { return nil }
                if let title = input.title { note.title = title }
                if let done = input.done { note.done = done }
                try w.save(note)
                return note
            }
            guard let edited else { throw HTTPError(.notFound, message: "no note \(id)") }
            return edited
        }
        router.delete("notes/:id") { _, context -> HTTPResponse.Status in
            let id = try context.parameters.require("id", as: Int.self)
            let deleted = try await notes.write { w in
                try w.get(Note.self, key: .int(Int64(id))).map { try w.delete($0) } ?? false
            }
            return deleted ? .noContent : .notFound
        }
        router.get("notes/live") { _, _ -> Response in
            Response(
                status: .ok,
                headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
                body: ResponseBody { writer in
                    // The live query runs on a task of its own, which a graceful shutdown cancels:
                    // the server would otherwise wait for the stream to end. A slow client gets
                    // the newest list, not every one. The client going away ends it too.
                    let (lists, delivered) = AsyncStream.makeStream(of: [Note].self,
                                                                    bufferingPolicy: .bufferingNewest(1))
                    let live = Task {
                        do {
                            for try await list in notes.store.observe(Note.self) { delivered.yield(list) }
                        } catch {}
                        delivered.finish()
                    }
                    defer { live.cancel() }
                    try await withGracefulShutdownHandler {
                        let encoder = Self.encoder()
                        for await list in lists {
                            let json = String(decoding: try encoder.encode(list), as: UTF8.self)
                            try await writer.write(ByteBuffer(string: "data: \(json)\n\n"))
                        }
                    } onGracefulShutdown: {
                        live.cancel()
                    }
                    try await writer.finish(nil)
                })
        }
        return router
    }
}
#else
import Foundation

/// Built without the trait ExampleServer: says how to build it.
@main
enum NotesServer {
    static func main() {
        FileHandle.standardError.write(Data(("notes-server: build it with the package trait ExampleServer "
            + "(swift run --traits ExampleServer notes-server ...)\n").utf8))
        exit(2)
    }
}
#endif

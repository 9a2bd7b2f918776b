#if ExampleServer
import DataStoreTestSupport
import Foundation
import Testing

struct ServerDidNotStart: Error, CustomStringConvertible {
    let output: String
    var description: String { "notes-server did not start: \(output)" }
}

/// A running notes-server process, started on a free port.
final class RunningServer {
    let process = Process()
    let port: Int

    init(store: String, api: String, seed: Int) throws {
        process.executableURL = CrashRecovery.executable(named: "notes-server")
        process.arguments = ["--store", store, "--port", "0", "--api", api, "--seed", String(seed)]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        var text = ""
        let deadline = Date(timeIntervalSinceNow: 60)
        while !text.contains("listening on http://"), Date() < deadline {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let range = text.range(of: "http://127.0.0.1:"),
              let port = Int(text[range.upperBound...].prefix { $0.isNumber }) else {
            process.terminate()
            throw ServerDidNotStart(output: text)
        }
        self.port = port
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// `curl` with `arguments`; returns the status code and the body.
    func request(_ method: String, _ path: String, json: String? = nil) throws -> (status: Int, body: String) {
        var arguments = ["-s", "-X", method, "-w", "\n%{http_code}", url + path]
        if let json { arguments += ["-H", "Content-Type: application/json", "-d", json] }
        let output = try runCommand("/usr/bin/curl", arguments)
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? -1, lines.dropLast().joined(separator: "\n"))
    }

    /// Stops the server (SIGTERM: a graceful shutdown, which ends live streams) and waits for it.
    func stop() {
        process.terminate()
        process.waitUntilExit()
    }

    deinit { if process.isRunning { process.interrupt() } }
}

/// The events of a `curl -N` subscription to /notes/live, one `data:` line at a time.
final class LiveSubscription {
    let process = Process()
    let output = Pipe()
    var buffer = ""

    init(_ server: RunningServer) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-s", "-N", server.url + "/notes/live"]
        process.standardOutput = output
        try process.run()
    }

    /// The next event's data, or nil when the stream ended.
    func next() -> String? {
        while true {
            if let end = buffer.range(of: "\n\n") {
                let event = String(buffer[..<end.lowerBound])
                buffer = String(buffer[end.upperBound...])
                return event.hasPrefix("data: ") ? String(event.dropFirst(6)) : event
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer += String(decoding: chunk, as: UTF8.self)
        }
    }

    deinit { if process.isRunning { process.terminate() } }
}

struct Note: Codable, Equatable {
    var id: Int
    var title: String
    var done: Bool
}

func notes(_ json: String) throws -> [Note] { try JSONDecoder().decode([Note].self, from: Data(json.utf8)) }

/// The backends the server test runs on: PostgreSQL where the package is built with it.
let notesServerBackends: [String] = {
    #if Postgres
    return ["sqlite", "lmdb", "memory", "postgres"]
    #else
    return ["sqlite", "lmdb", "memory"]
    #endif
}()

/// The server's JSON for `notes`: keys sorted,
/// as the server writes them in every process.
func notesJSON(_ notes: [Note]) -> String {
    "[" + notes.map(noteJSON).joined(separator: ",") + "]"
}

func noteJSON(_ note: Note) -> String {
    #"{"done":\#(note.done),"id":\#(note.id),"title":"\#(note.title)"}"#
}

/// The server on each backend, with the async API and with the synchronous one: the seeded
/// notes as JSON, one note, a created, an edited and a deleted note, each change pushed to a
/// live subscriber, and clear errors for a missing note and bad input.
@Test(.serialized, arguments: notesServerBackends, ["async", "sync"])
func theNotesServerServesAndPushesChanges(_ kind: String, _ api: String) throws {
    let dir = try TemporaryDirectory()
    let store: String
    switch kind {
    case "postgres":
        #if Postgres
        store = "postgres://postgres@/datastore?schema=notes_\(api)_\(getpid())&host=\(TestPostgresServer.host)"
        #else
        Issue.record("no PostgreSQL in this build")
        return
        #endif
    case "memory": store = "memory:notes"
    default: store = "\(kind):" + dir.path("notes.\(kind)")
    }
    let server = try RunningServer(store: store, api: api, seed: 3)
    defer {
        #if Postgres
        if kind == "postgres" {
            _ = try? runCommand("/usr/bin/psql", ["-h", TestPostgresServer.host, "-U", "postgres", "-d", "datastore",
                                                  "-c", "DROP SCHEMA IF EXISTS notes_\(api)_\(getpid()) CASCADE"])
        }
        #endif
    }
    let seeded = (1...3).map { Note(id: $0, title: "note \($0)", done: $0 % 2 == 0) }
    let all = try server.request("GET", "/notes")
    #expect(all.status == 200)
    #expect(try notes(all.body) == seeded)
    // The JSON byte for byte: its keys in one order in every server process (not a dictionary's).
    #expect(all.body == notesJSON(seeded), "\(all.body)")
    let two = try server.request("GET", "/notes/2")
    #expect(two.body == noteJSON(seeded[1]), "\(two)")
    #expect(try server.request("GET", "/notes/99").status == 404)

    // Each live event is the whole list, as GET /notes gives it.
    let live = try LiveSubscription(server)
    let first = live.next()
    #expect(first == notesJSON(seeded), "\(first ?? "the stream ended")")
    let milk = Note(id: 4, title: "milk", done: false)
    let created = try server.request("POST", "/notes", json: #"{"title": "milk"}"#)
    #expect(created.status == 201 && created.body == noteJSON(milk), "\(created)")
    let afterCreate = live.next()
    #expect(afterCreate == notesJSON(seeded + [milk]), "\(afterCreate ?? "the stream ended")")
    let done = Note(id: 4, title: "milk", done: true)
    let patched = try server.request("PATCH", "/notes/4", json: #"{"done": true}"#)
    #expect(patched.status == 200 && patched.body == noteJSON(done), "\(patched)")
    let afterPatch = live.next()
    #expect(afterPatch == notesJSON(seeded + [done]), "\(afterPatch ?? "the stream ended")")
    let deleted = try server.request("DELETE", "/notes/1")
    #expect(deleted.status == 204, "\(deleted)")
    let afterDelete = live.next()
    #expect(afterDelete == notesJSON(Array(seeded.dropFirst()) + [done]), "\(afterDelete ?? "the stream ended")")
    #expect(try server.request("DELETE", "/notes/1").status == 404)

    #expect(try server.request("POST", "/notes", json: #"{"done": true}"#).status == 400)
    #expect(try server.request("POST", "/notes", json: "not json").status == 400)
    #expect(try server.request("GET", "/notes/abc").status == 400)

    // A graceful shutdown with a subscriber connected ends its stream and the server.
    let stopping = ContinuousClock.now
    server.stop()
    let last = live.next()
    #expect(last == nil, "\(last ?? "")")
    let stopped = ContinuousClock.now - stopping
    #expect(stopped < .seconds(10), "\(stopped)")
    #expect(server.process.terminationReason == .exit, "\(server.process.terminationStatus)")
}

/// A store location the server cannot use is refused with a message that names it.
@Test func theNotesServerRefusesABadStoreLocation() throws {
    let output = try runCommand(CrashRecovery.executable(named: "notes-server").path, ["--store", "nosuch:x"],
                                allowingFailure: true)
    #expect(output.contains("nosuch"), "\(output)")
    #expect(!output.contains("StoreError("), "\(output)")
    let port = try runCommand(CrashRecovery.executable(named: "notes-server").path,
                              ["--store", "memory:x", "--port", "80000"], allowingFailure: true)
    #expect(port.contains("--port must be 0 to 65535, not 80000"), "\(port)")
}
#endif

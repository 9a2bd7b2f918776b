#if Postgres
import DataStoreTestSupport
import Foundation
import Testing

/// The error codes do not depend on the language of the messages: a server with
/// `lc_messages=de_DE.UTF-8` and a client with `LANG=de_DE.UTF-8` give the codes the same server
/// and client give in English, for a server that is not there, a database that is not there, a
/// server that does not take writes (at connect and at a write), and a server shutting down.
/// The client is `crash-writer … error-code`, a process that sets its locale from `LANG`.

/// The code and message of the probe in `language`.
private func probe(_ url: String, _ what: String, language: String) throws -> (code: String, message: String) {
    let process = Process()
    process.executableURL = CrashRecovery.executable(named: "crash-writer")
    process.arguments = ["postgres", url, "error-code", what]
    process.environment = ProcessInfo.processInfo.environment.merging(["LANG": language, "LC_ALL": language]) { $1 }
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let lines = text.split(separator: "\n", maxSplits: 1).map(String.init)
    return (lines.first ?? "", lines.count > 1 ? lines[1] : "")
}

/// Runs each statement with psql, one `-c` each (ALTER SYSTEM runs outside a transaction block).
private func psql(_ host: String, _ statements: String...) throws {
    _ = try runCommand("/usr/bin/psql", ["-h", host, "-U", "postgres", "-d", "datastore", "-v", "ON_ERROR_STOP=1"]
        + statements.flatMap { ["-c", $0] })
}

@Test func errorCodesAreTheSameInGermanAndInEnglish() throws {
    #expect(try runCommand("/usr/bin/locale", ["-a"]).lowercased().contains("de_de.utf8"),
            "the test needs the locale de_DE.UTF-8 (Scripts/install-deps.sh makes it)")
    let host = TestPostgresServer.startOwn("german", settings: "-c lc_messages=de_DE.UTF-8")
    let nowhere = try TemporaryDirectory()
    let store = "postgres://postgres@/datastore?schema=locale_probe&host=\(host)"
    var cases: [(what: String, url: String, action: String, code: String)] = [
        ("no server at the socket", "postgres://postgres@/datastore?schema=s&host=\(nowhere.url.path)", "open",
         "code unavailable"),
        ("no such database", "postgres://postgres@/nope?schema=s&host=\(host)", "open", "code io"),
    ]
    func check(_ cases: [(what: String, url: String, action: String, code: String)]) throws {
        for item in cases {
            let english = try probe(item.url, item.action, language: "C")
            let german = try probe(item.url, item.action, language: "de_DE.UTF-8")
            #expect(english.code == item.code, "\(item.what) in English: \(english)")
            #expect(german.code == item.code, "\(item.what) in German: \(german)")
        }
    }
    try check(cases)
    // The messages are German: the test is not passing in English twice.
    let german = try probe(cases[0].url, "open", language: "de_DE.UTF-8")
    #expect(german.message.contains("fehlgeschlagen"), "\(german.message)")
    #expect(try probe(cases[1].url, "open", language: "C").message.contains("existiert nicht"), "the server's words")
    #expect(try probe(store, "write", language: "de_DE.UTF-8").code == "ok")

    // A server that does not take writes.
    try psql(host, "ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()")
    cases = [
        ("a standby-like server, at connect", store + "&target_session_attrs=read-write", "open", "code unavailable"),
        ("a standby-like server, at a write", store, "write", "code unavailable"),
    ]
    try check(cases)
    try psql(host, "ALTER SYSTEM RESET default_transaction_read_only", "SELECT pg_reload_conf()")
    #expect(try probe(store, "write", language: "C").code == "ok")

    // A serialization failure and a deadlock, as the server reports them (raised by a trigger on
    // the store's table): `conflict`, at once with write_retries=0 and after the retries.
    // The trigger counts its runs in a sequence (which a rollback does not undo): one run per
    // language with no retries, three with two.
    for state in ["serialization_failure", "deadlock_detected"] {
        try psql(host, "CREATE SEQUENCE public.conflict_probe_runs",
                 "CREATE FUNCTION public.conflict_probe() RETURNS trigger LANGUAGE plpgsql AS "
                    + "$$BEGIN PERFORM nextval('public.conflict_probe_runs'); "
                    + "RAISE EXCEPTION 'probe' USING ERRCODE = '\(state)'; END$$",
                 "CREATE TRIGGER probe BEFORE INSERT OR UPDATE ON locale_probe.\"Entry\" FOR EACH ROW "
                    + "EXECUTE FUNCTION public.conflict_probe()")
        try check([("a \(state)", store + "&write_retries=0", "write", "code conflict"),
                   ("a \(state), retried", store + "&write_retries=2", "write", "code conflict")])
        let runs = try runCommand("/usr/bin/psql", ["-h", host, "-U", "postgres", "-d", "datastore", "-At", "-c",
                                                    "SELECT last_value FROM public.conflict_probe_runs"])
        #expect(runs.trimmingCharacters(in: .whitespacesAndNewlines) == "8", "\(state): the block ran \(runs) times")
        try psql(host, "DROP TRIGGER probe ON locale_probe.\"Entry\"", "DROP FUNCTION public.conflict_probe()",
                 "DROP SEQUENCE public.conflict_probe_runs")
    }
    #expect(try probe(store, "write", language: "C").code == "ok")

    // A server shutting down: a session keeps it from stopping (smart mode) while it refuses new ones.
    let session = Process()
    session.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
    session.arguments = ["-h", host, "-U", "postgres", "-d", "datastore", "-c", "SELECT pg_sleep(60)"]
    session.standardOutput = FileHandle.nullDevice
    session.standardError = FileHandle.nullDevice
    try session.run()
    // The end: a fast shutdown ends the session, and psql with it.
    defer {
        _ = try? runCommand("/usr/sbin/runuser", ["-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pg_ctl", "-D",
                                                  host + "/data", "-m", "fast", "-w", "stop"])
        session.waitUntilExit()
    }
    // Wait for the session to be in its sleep, then for the server to refuse new ones.
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline {
        let active = try runCommand("/usr/bin/psql", ["-h", host, "-U", "postgres", "-d", "datastore", "-At", "-c",
                                                      "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'"])
        if active.trimmingCharacters(in: .whitespacesAndNewlines) == "1" { break }
    }
    _ = try runCommand("/usr/sbin/runuser", ["-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pg_ctl", "-D",
                                             host + "/data", "-m", "smart", "-W", "stop"])
    var refused = false
    while !refused, ContinuousClock.now < deadline {
        refused = (try? runCommand("/usr/bin/psql", ["-h", host, "-U", "postgres", "-d", "datastore", "-c", "SELECT 1"]))
            == nil
    }
    #expect(refused, "the server refuses new sessions while it shuts down")
    try check([("a server shutting down", store, "open", "code unavailable")])
}
#endif

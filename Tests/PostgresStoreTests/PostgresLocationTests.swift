#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import StoreMigration
import Testing

/// The error a call throws, as a `StoreError`.
private func storeError(_ body: () throws -> Void) -> StoreError? {
    do {
        try body()
        return nil
    } catch {
        return error as? StoreError
    }
}

/// Bad store specs and unreachable servers give one-line errors naming what is wrong, and no
/// password ever appears in a location's text or an error.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func badPostgresLocationsGiveOneLineErrorsThatNameWhatIsWrong() throws {
    let host = PostgresTestServer.host
    let environment = ["PGPASSWORD": "s3cret-never-printed"]
    let parsing: [(String, String)] = [
        ("postgres://postgres@/datastore", "names no schema"),
        ("postgres://app:s3cret@db/app?schema=app", "must not hold a password"),
        ("postgres://postgres@/datastore?schema=pg_catalog", "'pg_catalog' cannot be a store's schema"),
        ("postgres://postgres@/datastore?schema=" + String(repeating: "s", count: 64), "at most 63 bytes"),
    ]
    for (text, naming) in parsing {
        let error = storeError { _ = try PostgresLocation(parsing: text, environment: environment) }
        #expect(error?.code == .invalidArgument, "\(text)")
        #expect(error?.message.contains(naming) == true, "\(text): \(String(describing: error))")
        #expect(error?.message.contains("s3cret") == false)
    }
    // No server there is `unavailable` (it may come back); a server that refuses is `io`.
    let opening: [(String, String, StoreError.Code)] = [
        ("postgres://postgres@/datastore?schema=a&host=/nonexistent-socket-dir", "/nonexistent-socket-dir", .unavailable),
        ("postgres://postgres@/nope?schema=a&host=\(host)", "database \"nope\" does not exist", .io),
        ("postgres://nobody@/datastore?schema=a&host=\(host)", "role \"nobody\" does not exist", .io),
    ]
    for (text, naming, code) in opening {
        let location = try PostgresLocation(parsing: text, environment: environment)
        #expect(!location.description.contains("s3cret"))
        let error = storeError { _ = try PostgresStore(location: location, schema: Fixtures.schema) }
        #expect(error?.code == code, "\(text): \(String(describing: error))")
        #expect(error?.message.contains(naming) == true, "\(text): \(String(describing: error))")
        #expect(error?.message.contains("\n") == false)
    }
    // Through the kinds' registry, as migrate-store opens it: the same errors.
    let missing = storeError {
        _ = try StoreLocation(parsing: "postgres://postgres@/nope?schema=a&host=\(host)").open(schema: nil)
    }
    #expect(missing?.message.contains("database \"nope\" does not exist") == true, "\(String(describing: missing))")
}

/// A store's schema holds ordinary tables that `psql` shows, named as the entities are, with a
/// column per attribute of the documented type, and several stores share one database.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aStoreIsOrdinaryTablesInASchemaOfItsOwn() throws {
    let dir = try TemporaryDirectory()
    let first = PostgresTestServer.location(dir.url.path + "/first")
    let second = PostgresTestServer.location(dir.url.path + "/second")
    for location in [first, second] {
        let store = try PostgresStore(location: location, schema: Fixtures.schema)
        try Fixtures.load(Fixtures.items(20, seed: location == first ? 1 : 2), into: store)
        try store.close()
    }
    defer { for location in [first, second] { try? PostgresStore.destroy(location) } }
    func psql(_ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-AtF", "|", "-c", sql]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "psql -c \(sql)")
        return String(decoding: output, as: UTF8.self)
    }
    let columns = try psql("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = '"
        + first.schema + "' AND table_name = 'Item' ORDER BY ordinal_position")
    #expect(columns.contains("id|bigint") && columns.contains("name|text") && columns.contains("ratio|double precision"),
            "\(columns)")
    for location in [first, second] {
        let count = try psql("SELECT count(*) FROM \"\(location.schema)\".\"Item\"")
        #expect(count.trimmingCharacters(in: .whitespacesAndNewlines) == "20")
    }
    let tables = try psql("SELECT table_name FROM information_schema.tables WHERE table_schema = '\(first.schema)' "
        + "ORDER BY table_name")
    #expect(tables.split(separator: "\n").contains("Item") && tables.contains("_ds_meta"), "\(tables)")
}
#endif

#if Postgres
/// A stored schema that no longer names the tables of its PostgreSQL schema (changed with
/// `psql`) is damage: `check` names the tables it does not explain.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aStoredSchemaThatHidesTablesIsDamageOnPostgreSQL() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = StoreLocation(kind: "postgres", path: String(location.description.dropFirst(9)))
    try DemoData.seed(store, items: 100, seed: 2)
    // An empty schema, with its checksum, as a program computing it would write it.
    let psql = ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-At", "-v", "ON_ERROR_STOP=1", "-c"]
    let format = try #require(Int(try runCommand("/usr/bin/psql", psql + ["SELECT convert_from(value, 'UTF8') FROM "
        + "\"\(location.schema)\"._ds_meta WHERE key = 'datastore.format'"]).trimmingCharacters(in: .whitespacesAndNewlines)))
    var header: [(String, [UInt8])] = []
    try StoreHeader.write(Schema(entities: []), format: format) { header.append(($0, $1)) }
    let updates = header.map { key, value in
        "UPDATE \"\(location.schema)\"._ds_meta SET value = decode('"
            + value.map { String(format: "%02x", $0) }.joined() + "', 'hex') WHERE key = '\(key)';"
    }
    _ = try runCommand("/usr/bin/psql", psql + [updates.joined()])
    #expect(throws: StoreError.self) { try store.check() }
    do {
        _ = try store.check()
    } catch let error as StoreError {
        #expect(error.code == .corrupt && error.message.contains("Customer")
                && error.message.contains("the stored schema does not name"), "\(error)")
    }
}
#endif

#if Postgres
/// libpq's two forms of connection string, several hosts, and libpq's own parameters; an
/// unknown parameter and a password are refused when the location is parsed.
@Test func postgresLocationsTakeLibpqConnectionStrings() throws {
    let environment: [String: String] = [:]
    let url = try PostgresLocation(parsing: "postgres://app@db1:5433,db2/app?schema=s&target_session_attrs=read-write"
        + "&connect_timeout=2", environment: environment)
    #expect(url.hosts == ["db1", "db2"] && url.ports == [5433, 5432] && url.user == "app" && url.database == "app")
    #expect(url.parameters == ["target_session_attrs": "read-write", "connect_timeout": "2"])
    #expect(url.description == "postgres://app@db1:5433,db2/app?schema=s&connect_timeout=2&target_session_attrs=read-write")
    #expect(try PostgresLocation(parsing: url.description, environment: environment) == url)
    let pairs = try PostgresLocation(parsing: "host=/run/postgresql dbname='my app' user=app schema=s listen=poll",
                                     environment: environment)
    #expect(pairs.hosts == ["/run/postgresql"] && pairs.database == "my app" && pairs.listener == .poll)
    let pooled = try PostgresLocation(parsing: "postgres://app@pool:6432/app?schema=s&listen_host=db&listen_port=5433",
                                      environment: environment)
    #expect(pooled.listener == .direct(host: "db", port: 5433))
    let refusals: [(String, String)] = [
        ("postgres://app@db/app?schema=s&colour=blue", "invalid connection option \"colour\""),
        ("host=db dbname=app schema=s password=hunter2", "must not hold a password"),
        ("postgres://app@db1,db2/app?schema=s&port=1,2,3", "names 2 hosts and 3 ports"),
        ("postgres://app@db/app?schema=s&listen=sometimes", "listen='sometimes'"),
    ]
    for (text, naming) in refusals {
        do {
            _ = try PostgresLocation(parsing: text, environment: environment)
            Issue.record("\(text) was taken")
        } catch {
            #expect(error.code == .invalidArgument && error.message.contains(naming) && !error.message.contains("hunter2"),
                    "\(text): \(error)")
        }
    }
}
#endif

import DataStoreAPI
import Foundation
#if Postgres
import PostgresStore
#endif

/// The PostgreSQL error codes in the language of the environment (a test runs it with
/// `LANG=de_DE.UTF-8` against a server with `lc_messages=de_DE.UTF-8`, and again in English):
///
///     crash-writer postgres URL error-code open|write
///
/// sets the process's locale from the environment (so libpq and the C library speak its
/// language), then opens a store at URL (`open`), or opens it and writes one item (`write`);
/// prints `ok`, or `code CODE` and then the error's message on the next line.
enum ErrorCodeProbe {
    static func main(_ arguments: [String]) -> Int32 {
        #if Postgres
        setlocale(LC_ALL, "")
        let schema = Schema(entities: [
            EntitySchema("Entry", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("text", .string)]),
        ])
        do {
            let store = try PostgresStore(url: arguments[2], schema: schema)
            defer { try? store.close() }
            if arguments.count > 4, arguments[4] == "write" {
                try store.writeSync { try $0.save(["id": .int(1), "text": .string("x")], into: "Entry") }
            }
            print("ok")
        } catch let error as StoreError {
            print("code \(error.code)\n\(error.message)")
        } catch {
            print("code other\n\(error)")
        }
        return 0
        #else
        FileHandle.standardError.write(Data("crash-writer: built without the Postgres trait\n".utf8))
        return 2
        #endif
    }
}

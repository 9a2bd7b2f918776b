internal import CZlib
import DataStoreAPI
import Foundation

/// The header line of a JSON Lines store: `{"datastore":"jsonl","format":1,"schema":{...}}`.
enum JSONLHeader {
    static let format = 1

    static func encode(_ schema: Schema) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let schemaJSON: Data
        do {
            schemaJSON = try encoder.encode(schema)
        } catch {
            throw StoreError(.invalidValue, "the schema cannot be encoded: \(error)")
        }
        return Array(#"{"datastore":"jsonl","format":\#(format),"schema":"#.utf8) + Array(schemaJSON) + [0x7D]
    }

    static func decode(_ line: [UInt8], path: String) throws -> Schema {
        struct Header: Decodable {
            var datastore: String
            var format: Int
            var schema: Schema
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(line)), header.datastore == "jsonl" else {
            throw StoreError(.notAStore, "\(path): line 1 is not a JSON Lines store header "
                + #"({"datastore":"jsonl","format":1,"schema":{...}})"#)
        }
        guard header.format <= format else {
            throw StoreError(.incompatibleFormat, "\(path) was written by JSON Lines format \(header.format); this "
                + "version reads up to \(format)")
        }
        try header.schema.validate()
        return header.schema
    }
}

/// Reads a file line by line, in bounded memory, through zlib (which also reads plain files),
/// so `.jsonl` and `.jsonl.gz` read alike.
final class JSONLLineReader {
    let path: String
    private let file: gzFile
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var start = 0
    private var end = 0
    private var atEnd = false
    /// The number of the last line returned.
    private(set) var lineNumber = 0

    init(path: String) throws {
        self.path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw StoreError(.notFound, "\(path) does not exist")
        }
        guard !isDirectory.boolValue else { throw StoreError(.notAStore, "\(path) is a directory, not a JSON Lines file") }
        guard let file = gzopen(path, "rb") else {
            throw StoreError(.io, "\(path) cannot be opened: \(String(cString: strerror(errno)))")
        }
        self.file = file
    }

    deinit { gzclose(file) }

    /// The next line without its newline, or `nil` at the end of the file.
    /// - Throws: `corrupt` when the compressed data is damaged or truncated, or a line is over
    ///   the limit of a line (a 64 MiB item).
    func next() throws -> [UInt8]? {
        while true {
            if let newline = buffer[start..<end].firstIndex(of: 0x0A) {
                let line = Array(buffer[start..<newline])
                start = newline + 1
                lineNumber += 1
                return line
            }
            if atEnd {
                guard start < end else { return nil }
                throw StoreError(.corrupt, "\(path): line \(lineNumber + 1) has no newline: the file is truncated")
            }
            if start > 0 {
                buffer.replaceSubrange(0..<end - start, with: buffer[start..<end])
                end -= start
                start = 0
            }
            if end == buffer.count {
                guard buffer.count < 64 << 20 else {
                    throw StoreError(.corrupt, "\(path): line \(lineNumber + 1) is longer than 64 MiB")
                }
                buffer += [UInt8](repeating: 0, count: buffer.count)
            }
            let read = buffer.withUnsafeMutableBytes { raw in
                gzread(file, raw.baseAddress! + end, UInt32(raw.count - end))
            }
            if read < 0 {
                var code: Int32 = 0
                let message = String(cString: gzerror(file, &code))
                throw StoreError(.corrupt, "\(path): after line \(lineNumber): the compressed data is damaged (\(message))")
            }
            if read == 0 {
                atEnd = true
                // zlib reports a gzip stream cut short only as an end without its trailer.
                var code: Int32 = 0
                _ = gzerror(file, &code)
                if code == Z_BUF_ERROR {
                    throw StoreError(.corrupt, "\(path): after line \(lineNumber): the compressed data is truncated")
                }
            }
            end += Int(read)
        }
    }
}

/// Writes a file line by line into `PATH.partial` (gzip-compressed when the path ends in `.gz`),
/// then syncs it and renames it into place: a reader never sees half a file.
final class JSONLLineWriter {
    let path: String
    private let partial: String
    private let gzip: gzFile?
    private let plain: FileHandle?
    private var pending: [UInt8] = []
    private var closed = false

    init(path: String) throws {
        self.path = path
        partial = path + ".partial"
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
            throw StoreError(.notFound, "\(path): directory \(directory) does not exist")
        }
        try? FileManager.default.removeItem(atPath: partial)
        if path.hasSuffix(".gz") {
            guard let file = gzopen(partial, "wb6") else {
                throw StoreError(.io, "\(partial) cannot be created: \(String(cString: strerror(errno)))")
            }
            gzip = file
            plain = nil
        } else {
            guard FileManager.default.createFile(atPath: partial, contents: nil),
                let handle = FileHandle(forWritingAtPath: partial)
            else {
                throw StoreError(.io, "\(partial) cannot be created: \(String(cString: strerror(errno)))")
            }
            plain = handle
            gzip = nil
        }
    }

    func write(line: [UInt8]) throws {
        pending += line
        pending.append(0x0A)
        if pending.count >= 1 << 16 { try flush() }
    }

    private func flush() throws {
        guard !pending.isEmpty else { return }
        defer { pending.removeAll(keepingCapacity: true) }
        if let gzip {
            let written = pending.withUnsafeBytes { gzwrite(gzip, $0.baseAddress, UInt32($0.count)) }
            guard written == pending.count else {
                throw StoreError(.io, "\(partial): cannot write (disk full?)")
            }
        } else if let plain {
            do {
                try plain.write(contentsOf: pending)
            } catch {
                throw StoreError(.io, "\(partial): cannot write: \(error.localizedDescription)")
            }
        }
    }

    /// Flushes, syncs and renames the file into place.
    func finish() throws {
        try flush()
        closed = true
        if let gzip {
            guard gzclose(gzip) == Z_OK else { throw StoreError(.io, "\(partial): cannot finish the gzip stream") }
        } else if let plain {
            do {
                try plain.synchronize()
                try plain.close()
            } catch {
                throw StoreError(.io, "\(partial): cannot flush: \(error.localizedDescription)")
            }
        }
        guard rename(partial, path) == 0 else {
            throw StoreError(.io, "cannot move \(partial) to \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Removes the partial file.
    func abandon() {
        if !closed {
            closed = true
            if let gzip { gzclose(gzip) }
            try? plain?.close()
        }
        try? FileManager.default.removeItem(atPath: partial)
    }
}

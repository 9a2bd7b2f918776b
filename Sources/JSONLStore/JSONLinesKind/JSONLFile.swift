internal import CZlib
@_spi(Backend) import DataStoreAPI
import Foundation

/// The header line of a JSON Lines store: `{"datastore":"jsonl","format":1,"schema":{...}}`.
///
/// An encrypted store's header is of format 2: it also holds the store's metadata, the key
/// record and the sealed schema, each in base64 by its metadata key
/// (`{"datastore":"jsonl","format":2,"metadata":{...},"schema":{...}}`), and its schema is the one
/// its lines are written in, each entity as an encrypted store's engine keeps it (``SealedStream``).
/// A version that reads only format 1 refuses such a file as newer rather than reading ciphertext
/// as values.
enum JSONLHeader {
    static let format = 2

    static func encode(_ schema: Schema, metadata: [String: [UInt8]] = [:]) throws -> [UInt8] {
        var line = Array(#"{"datastore":"jsonl","format":\#(metadata.isEmpty ? 1 : 2),"#.utf8)
        if !metadata.isEmpty {
            let entries = metadata.sorted { $0.key < $1.key }.map { key, value in
                #""\#(key)":"\#(Data(value).base64EncodedString())""#
            }
            line += Array(#""metadata":{\#(entries.joined(separator: ","))},"#.utf8)
        }
        return line + Array(#""schema":"#.utf8) + (try schemaJSON(schema)) + [0x7D]
    }

    /// The schema as JSON with sorted keys: the same schema always gives the same bytes.
    static func schemaJSON(_ schema: Schema) throws -> [UInt8] {
        do {
            return Array(try JSONEncoder.sortingKeys(.withoutEscapingSlashes).encode(schema))
        } catch {
            throw StoreError(.invalidValue, "the schema cannot be encoded: \(error)")
        }
    }

    /// Refuses an encrypted store's header unless an encrypted store's engine is reading it.
    static func refuseWithoutKey(_ metadata: [String: [UInt8]], path: String) throws {
        if SealedStream.isEncrypted(metadata) && !SealedEngine.physicalSchemas {
            throw StoreError(.wrongKey, "\(path) is encrypted: open it with its key (migrate-store's --key-file)")
        }
    }

    /// The schema and metadata of a header line.
    /// - Throws: `notAStore`, `incompatibleFormat`; `wrongKey` for an encrypted store's header
    ///   unless an encrypted store's engine is opening it (``SealedEngine/physicalSchemas``).
    static func decode(_ line: [UInt8], path: String) throws -> (schema: Schema, metadata: [String: [UInt8]]) {
        struct Header: Decodable {
            var datastore: String
            var format: Int
            var metadata: [String: String]?
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
        // Only an encrypted store's header (format 2) holds metadata, and only its key record and
        // sealed schema: a file cannot hand a store any other reserved record.
        let stored = header.metadata ?? [:]
        if header.format == 2 ? stored.keys.sorted() != SealedStream.metadataKeys : !stored.isEmpty {
            throw StoreError(.corrupt, "\(path): line 1 is a damaged header: format \(header.format) with metadata "
                + (stored.isEmpty ? "none" : stored.keys.sorted().map { "'\($0)'" }.joined(separator: ", "))
                + "; an encrypted file's header holds " + SealedStream.metadataKeys.map { "'\($0)'" }.joined(separator: " and "))
        }
        var metadata: [String: [UInt8]] = [:]
        for (key, value) in stored.sorted(by: { $0.key < $1.key }) {
            guard let bytes = Data(base64Encoded: value) else {
                throw StoreError(.corrupt, "\(path): line 1 holds metadata '\(key)' that is not base64")
            }
            metadata[key] = Array(bytes)
        }
        try refuseWithoutKey(metadata, path: path)
        try header.schema.validate()
        return (header.schema, metadata)
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
    /// Where the last line returned starts, in uncompressed bytes from the start of the file.
    private(set) var lineOffset: Int64 = 0
    /// Where the next line starts, in uncompressed bytes.
    private var nextOffset: Int64 = 0

    /// Opens `path` (named so in errors), or the file `opening` names in its place (a
    /// `/proc/self/fd` path that holds on to one version of a file a writer may replace).
    init(path: String, opening: String? = nil) throws {
        self.path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: opening ?? path, isDirectory: &isDirectory) else {
            throw StoreError(.notFound, "\(path) does not exist")
        }
        guard !isDirectory.boolValue else { throw StoreError(.notAStore, "\(path) is a directory, not a JSON Lines file") }
        guard let file = gzopen(opening ?? path, "rb") else {
            throw StoreError(.io, "\(path) cannot be opened: \(String(cString: strerror(errno)))")
        }
        self.file = file
    }

    deinit { gzclose(file) }

    /// Moves to the line that starts at `offset` (uncompressed), numbered `lineNumber + 1`:
    /// direct in a plain file, by decompressing from the start (or from where it is, going
    /// forward) in a compressed one.
    func seek(toOffset offset: Int64, lineNumber: Int) throws {
        guard gzseek(file, off_t(offset), SEEK_SET) == off_t(offset) else {
            var code: Int32 = 0
            throw StoreError(.io, "\(path): cannot move to byte \(offset): \(String(cString: gzerror(file, &code)))")
        }
        start = 0
        end = 0
        atEnd = false
        nextOffset = offset
        self.lineNumber = lineNumber
    }

    /// The next line without its newline, or `nil` at the end of the file.
    /// - Throws: `corrupt` when the compressed data is damaged or truncated, or a line is over
    ///   the limit of a line (a 64 MiB item).
    func next() throws -> [UInt8]? {
        while true {
            if let newline = buffer[start..<end].firstIndex(of: 0x0A) {
                let line = Array(buffer[start..<newline])
                start = newline + 1
                lineNumber += 1
                lineOffset = nextOffset
                nextOffset += Int64(line.count + 1)
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

/// Writes a JSON Lines store as one stream into `PATH.migrating` (gzip-compressed when `PATH`
/// ends in `.gz`), with checkpoints, then syncs it and renames it into place: a reader never
/// sees half a file, and an interrupted stream goes on from its last checkpoint.
///
/// A checkpoint flushes and syncs the stream (in a compressed file it also ends the gzip
/// member, so the file ends cleanly there) and then records its length and the position in
/// `PATH.migrating.checkpoint`, written to a temporary file, synced and renamed. Resuming cuts
/// the stream back to that length and appends a new member.
final class JSONLStreamWriter: StreamedStoreWriter {
    let path: String
    let staging: String
    let checkpointPath: String
    private let compressed: Bool
    private(set) var position: StreamPosition
    private var descriptor: Int32 = -1
    private var gzip: gzFile?
    private var pending: [UInt8] = []
    private var closed = false
    /// An encrypted stream's sealing: each item is written as its sealed record.
    private var sealing: SealedStream?
    /// An encrypted stream's key, which opens what it wrote.
    private var key: StoreKey?

    private struct Mark: Codable {
        var position: StreamPosition
        var bytes: Int64
    }

    static func stagingPath(_ path: String) -> String { path + ".migrating" }
    static func checkpointPath(_ path: String) -> String { path + ".migrating.checkpoint" }

    private init(path: String, position: StreamPosition) {
        self.path = path
        staging = Self.stagingPath(path)
        checkpointPath = Self.checkpointPath(path)
        compressed = path.hasSuffix(".gz")
        self.position = position
    }

    /// A new stream into `path`: the header line, then a first checkpoint.
    /// With `key`, an encrypted store's stream (``JSONLHeader``, ``SealedStream``).
    static func begin(at path: String, schema: Schema, source: String, key: StoreKey? = nil) throws
        -> JSONLStreamWriter
    {
        let directory = PathNames.directory(of: path)
        if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
            throw StoreError(.notFound, "\(path): directory \(directory) does not exist")
        }
        let writer = JSONLStreamWriter(path: path, position: StreamPosition(source: source))
        writer.sealing = try key.map { try SealedStream.create(schema, key: $0) }
        writer.key = key
        try requireLeftover(at: writer.staging, compressed: writer.compressed)
        try? FileManager.default.removeItem(atPath: writer.checkpointPath)
        try writer.open(truncating: true)
        do {
            try writer.write(line: JSONLHeader.encode(writer.sealing?.physicalSchema ?? schema,
                                                      metadata: writer.sealing?.metadata ?? [:]))
            try writer.checkpoint(writer.position)
        } catch {
            writer.abandon()
            throw error
        }
        return writer
    }

    /// Refuses a file at the staging path that no copy left there (a user's `notes.jsonl.migrating`):
    /// what a stream truncates must be empty or begin as a stream does.
    private static func requireLeftover(at staging: String, compressed: Bool) throws {
        guard FileManager.default.fileExists(atPath: staging), !isLeftover(staging, compressed: compressed) else {
            return
        }
        throw StoreError(.invalidArgument, "\(staging) is not replaced: it is a file that is not a JSON Lines stream "
            + "an interrupted copy left; a copy writes its destination there before it moves it into place. Move or "
            + "delete it yourself if it is to go, or choose another destination")
    }

    /// Whether the file at `staging` is empty or begins as a stream into `PATH` does (a header
    /// cut short by a crash included): what a copy may have left there.
    static func isLeftover(_ staging: String, compressed: Bool) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: staging) else { return false }
        defer { try? handle.close() }
        let start = Array((try? handle.read(upToCount: 16)) ?? Data())
        let streamStart: [UInt8] = compressed ? [0x1f, 0x8b] : Array(#"{"datastore":"jsonl""#.utf8)
        return start.starts(with: streamStart.prefix(start.count))
    }

    /// Whether `PATH.migrating` holds what a copy into `path` left.
    static func hasLeftover(_ path: String) -> Bool {
        isLeftover(stagingPath(path), compressed: path.hasSuffix(".gz"))
    }

    /// Where the unfinished stream into `path` stood at its last checkpoint (its source
    /// included), or `nil` when there is none.
    static func unfinishedPosition(_ path: String) -> StreamPosition? {
        guard FileManager.default.fileExists(atPath: stagingPath(path)),
            let data = FileManager.default.contents(atPath: checkpointPath(path)),
            let mark = try? JSONDecoder().decode(Mark.self, from: data)
        else { return nil }
        return mark.position
    }

    /// A plain stream of lines into `path` (no header, no checkpoints), which appears when
    /// finished: the rejects file of an import.
    static func lines(at path: String) throws -> JSONLStreamWriter {
        let writer = JSONLStreamWriter(path: path, position: StreamPosition(source: ""))
        try writer.open(truncating: true)
        return writer
    }

    /// The unfinished stream into `path`, cut back to its last checkpoint; `nil` when there is
    /// none (or it never reached a first checkpoint, so it holds nothing worth keeping).
    /// `schema` is the stream's, `key` its key (`nil` for a stream without encryption).
    static func resume(at path: String, schema: Schema, key: StoreKey?) throws -> JSONLStreamWriter? {
        let checkpointPath = Self.checkpointPath(path)
        guard FileManager.default.fileExists(atPath: stagingPath(path)),
            let data = FileManager.default.contents(atPath: checkpointPath)
        else { return nil }
        let mark: Mark
        do {
            mark = try JSONDecoder().decode(Mark.self, from: data)
        } catch {
            throw StoreError(.corrupt, "\(checkpointPath) cannot be read (\(error)); start over with --overwrite")
        }
        let writer = JSONLStreamWriter(path: path, position: mark.position)
        if let key {
            let metadata = try SealedEngine.$physicalSchemas.withValue(true) { () throws -> [String: [UInt8]] in
                let reader = try JSONLLineReader(path: writer.staging)
                guard let header = try reader.next() else {
                    throw StoreError(.corrupt, "\(writer.staging) has no header line; start over with --overwrite")
                }
                return try JSONLHeader.decode(header, path: writer.staging).metadata
            }
            writer.sealing = try SealedStream.resume(metadata, schema: schema, key: key, location: "jsonl:\(path)")
            writer.key = key
        }
        guard truncate(writer.staging, off_t(mark.bytes)) == 0 else {
            throw StoreError(.io, "\(writer.staging) cannot be cut back to its checkpoint (\(mark.bytes) bytes): "
                + String(cString: strerror(errno)))
        }
        return writer
    }

    private func open(truncating: Bool) throws {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncating ? O_TRUNC : O_APPEND)
        descriptor = Foundation.open(staging, flags, 0o644)
        guard descriptor >= 0 else {
            throw StoreError(.io, "\(staging) cannot be written: \(String(cString: strerror(errno)))")
        }
        if compressed {
            // gzdopen takes its own descriptor: ours stays open for fsync.
            guard let file = gzdopen(dup(descriptor), truncating ? "wb6" : "ab6") else {
                throw StoreError(.io, "\(staging) cannot be compressed into")
            }
            gzip = file
        }
    }

    func append(_ record: Record, of entity: EntitySchema) throws {
        if let sealing {
            let (sealed, physical) = try sealing.seal(record, of: entity)
            return try write(line: JSONLineCodec.encode(sealed, of: physical))
        }
        try write(line: JSONLineCodec.encode(record, of: entity))
    }

    func write(line: [UInt8]) throws {
        if descriptor < 0 { try open(truncating: false) }
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
                var code: Int32 = 0
                throw StoreError(.io, "\(staging): cannot write: \(String(cString: gzerror(gzip, &code))) (disk full?)")
            }
            return
        }
        try pending.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = Foundation.write(descriptor, raw.baseAddress! + done, raw.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw StoreError(errno == ENOSPC ? .storeFull : .io,
                                     "\(staging): cannot write: \(String(cString: strerror(errno)))")
                }
                done += n
            }
        }
    }

    /// Flushes and closes the stream (ending a gzip member) and syncs it; returns its length.
    private func sync() throws -> Int64 {
        try flush()
        if let gzip {
            self.gzip = nil
            guard gzclose(gzip) == Z_OK else { throw StoreError(.io, "\(staging): cannot finish the gzip member") }
        }
        guard descriptor >= 0 else {
            // Nothing written since the last checkpoint, which closed the stream: its length is
            // the file's.
            var info = stat()
            guard stat(staging, &info) == 0 else {
                throw StoreError(.io, "\(staging) cannot be examined: \(String(cString: strerror(errno)))")
            }
            return Int64(info.st_size)
        }
        defer {
            Foundation.close(descriptor)
            descriptor = -1
        }
        guard fsync(descriptor) == 0 else {
            throw StoreError(.io, "\(staging): cannot sync: \(String(cString: strerror(errno)))")
        }
        return Int64(lseek(descriptor, 0, SEEK_END))
    }

    func checkpoint(_ position: StreamPosition) throws {
        let bytes = try sync()
        let data: Data
        do {
            data = try JSONEncoder.sortingKeys().encode(Mark(position: position, bytes: bytes))
        } catch {
            throw StoreError(.invalidValue, "the checkpoint cannot be encoded: \(error)")
        }
        // The checkpoint takes the staging file's permission bits, which a copy sets to its
        // source's.
        let temporary = checkpointPath + ".tmp"
        var info = stat()
        let mode = stat(staging, &info) == 0 ? info.st_mode & 0o666 : 0o644
        guard FileManager.default.createFile(atPath: temporary, contents: data), chmod(temporary, mode) == 0 else {
            throw StoreError(.io, "\(temporary) cannot be written")
        }
        try Self.syncFile(temporary)
        guard rename(temporary, checkpointPath) == 0 else {
            throw StoreError(.io, "cannot move \(temporary) to \(checkpointPath): \(String(cString: strerror(errno)))")
        }
        self.position = position
    }

    func openWritten() throws -> any DataStore {
        try JSONLinesStore(path: staging, key: key)
    }

    func finish() throws {
        _ = try sync()
        closed = true
        guard rename(staging, path) == 0 else {
            throw StoreError(.io, "cannot move \(staging) to \(path): \(String(cString: strerror(errno)))")
        }
        try? FileManager.default.removeItem(atPath: checkpointPath)
        try Self.syncFile(PathNames.containingDirectory(of: path))
    }

    func abandon() {
        if !closed {
            closed = true
            if let gzip { gzclose(gzip) }
            gzip = nil
            if descriptor >= 0 { Foundation.close(descriptor) }
            descriptor = -1
        }
        try? FileManager.default.removeItem(atPath: staging)
        try? FileManager.default.removeItem(atPath: checkpointPath)
    }

    deinit {
        if let gzip { gzclose(gzip) }
        if descriptor >= 0 { Foundation.close(descriptor) }
    }

    /// fsync of a file or directory by path.
    static func syncFile(_ path: String) throws {
        let descriptor = Foundation.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreError(.io, "\(path) cannot be opened to sync") }
        defer { Foundation.close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw StoreError(.io, "\(path): cannot sync: \(String(cString: strerror(errno)))")
        }
    }
}

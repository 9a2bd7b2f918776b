@_spi(Backend) import DataStoreAPI
internal import CZlib
import Foundation

/// An import's input file, read as a stream of top-level objects: the elements of a JSON array,
/// or the lines of JSON Lines. Only one element is in memory at a time, however large the file.
struct ImportInput {
    let path: String
    /// Whether the file is one JSON array (else JSON Lines).
    let isArray: Bool

    /// The file at `path`.
    /// - Throws: `notFound` when it does not exist or cannot be read.
    init(_ path: String) throws {
        if path == "-" {
            throw StoreError(.invalidArgument, "import reads a file, not standard input ('-'): it reads its input "
                + "twice (to check it is JSON, then to write it) and goes on from a checkpoint after Ctrl-C; save the "
                + "input to a file and give its path")
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw StoreError(.invalidArgument, "\(path) is a folder, not a JSON file; nothing was imported")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw StoreError(.notFound, "\(path) does not exist or cannot be read")
        }
        defer { try? handle.close() }
        var first: UInt8?
        var start = true
        while first == nil, let read = try? handle.read(upToCount: 4096), !read.isEmpty {
            let chunk = start ? Self.blankingByteOrderMark(Array(read)) : Array(read)
            start = false
            first = chunk.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        }
        // An empty body, a download cut short, a file still being written: no value is no
        // input, never "the entity now holds nothing" (that takes an explicit []).
        guard let first else {
            throw StoreError(.invalidValue, "\(path) holds no JSON value (it is empty or only whitespace); nothing "
                + "was imported. To delete every item of the entity, import an explicit empty array []")
        }
        self.path = path
        self.isArray = first == UInt8(ascii: "[")
    }

    /// Reads the whole file once, checking that it is JSON of the expected shape; returns its
    /// size and CRC-32, which tell two inputs apart, and how many top-level objects it holds.
    /// - Throws: `invalidValue` naming the byte or line where the JSON is malformed.
    func validate() throws -> (digest: String, objects: Int) {
        var size = 0
        var objects = 0
        var crc = CZlib.crc32(0, nil, 0)
        try forEachObject(validatingOnly: true, chunk: { chunk in
            size += chunk.count
            chunk.withUnsafeBufferPointer { crc = CZlib.crc32(crc, $0.baseAddress, UInt32($0.count)) }
        }) { _, _ in objects += 1 }
        return ("\(size):\(crc)", objects)
    }

    /// Hands each top-level object with its position (from 1: the array index, or the line
    /// number for JSON Lines) to `body`, in input order.
    func forEachObject(_ body: (Int, JSON) throws -> Void) throws {
        try forEachObject(validatingOnly: false, chunk: { _ in }, body)
    }

    private func forEachObject(validatingOnly: Bool, chunk: ([UInt8]) -> Void,
                               _ body: (Int, JSON) throws -> Void) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw StoreError(.notFound, "\(path) does not exist or cannot be read")
        }
        defer { try? handle.close() }
        var splitter = isArray ? ElementSplitter.array(path) : ElementSplitter.lines(path)
        var isFirst = true
        while true {
            let data: Data
            do {
                data = try handle.read(upToCount: 1 << 20) ?? Data()
            } catch {
                throw StoreError(.io, "\(path) cannot be read: \(error.localizedDescription)")
            }
            let read = [UInt8](data)
            chunk(read)
            // A UTF-8 byte order mark (which editors on Windows write) is read as blanks, so
            // that offsets in messages stay the file's.
            let bytes = isFirst ? Self.blankingByteOrderMark(read) : read
            isFirst = false
            try splitter.feed(bytes, end: bytes.isEmpty) { position, element, offset in
                var parser = JSONParser(element)
                do {
                    if validatingOnly {
                        try parser.validateDocument()
                        try body(position, .null)
                    } else {
                        try body(position, try parser.parseDocument())
                    }
                } catch let error as JSONParser.Failure {
                    throw isArray
                        ? StoreError(.invalidValue, "\(path) is not valid JSON: \(error.message) at "
                            + "\(Self.place(ofByte: offset + error.offset, in: path)); nothing was imported")
                        : StoreError(.invalidValue, "\(path): line \(position) is not valid JSON: \(error.message); "
                            + "nothing was imported")
                }
            }
            if bytes.isEmpty { break }
        }
    }
}

extension ImportInput {
    /// `bytes`, the start of a file, with a UTF-8 byte order mark (EF BB BF) as three spaces.
    static func blankingByteOrderMark(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.starts(with: [0xEF, 0xBB, 0xBF]) else { return bytes }
        return [0x20, 0x20, 0x20] + bytes.dropFirst(3)
    }

    /// "line L, column C" of the byte at `offset` (from 0) of the file: where an editor shows
    /// it, as the errors of plans and mappings say. Columns count bytes. Read again only when an
    /// error is reported.
    static func place(ofByte offset: Int, in path: String) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "byte \(offset + 1)" }
        defer { try? handle.close() }
        var line = 1
        var column = 1
        var seen = 0
        while seen < offset, let data = try? handle.read(upToCount: 1 << 20), !data.isEmpty {
            for byte in data.prefix(offset - seen) {
                if byte == 0x0A { line += 1; column = 1 } else { column += 1 }
            }
            seen += data.count
        }
        return "line \(line), column \(column)"
    }
}

/// Cuts a byte stream into its top-level elements without parsing them: the values of one
/// JSON array (tracking strings and nesting), or non-blank lines.
struct ElementSplitter {
    private enum State { case beforeArray, beforeElement, inElement, afterElement, afterArray }
    private let isArray: Bool
    private var state: State
    private var element: [UInt8] = []
    private var depth = 0
    private var inString = false
    private var escaped = false
    private var position = 0
    private var offset = 0
    private var elementStart = 0
    private let path: String

    static func array(_ path: String) -> ElementSplitter { ElementSplitter(path, isArray: true, state: .beforeArray) }
    static func lines(_ path: String) -> ElementSplitter { ElementSplitter(path, isArray: false, state: .beforeElement) }

    private init(_ path: String, isArray: Bool, state: State) {
        self.path = path
        self.isArray = isArray
        self.state = state
    }

    private func failure(_ message: String, at byte: Int) -> StoreError {
        StoreError(.invalidValue, "\(path) is not a JSON array of objects: \(message) at "
            + "\(ImportInput.place(ofByte: byte, in: path)); nothing was imported")
    }

    /// Feeds the next bytes; `end` says there are no more. Calls `emit` with each element's
    /// position, bytes and offset in the stream.
    mutating func feed(_ bytes: [UInt8], end: Bool,
                       _ emit: (_ position: Int, _ element: [UInt8], _ offset: Int) throws -> Void) throws {
        isArray ? try feedArray(bytes, emit) : try feedLines(bytes, emit)
        offset += bytes.count
        guard end else { return }
        if isArray {
            switch state {
            case .afterArray: return
            case .beforeArray: throw failure("no array", at: offset)
            default: throw failure("the array does not end", at: offset)
            }
        } else if element.contains(where: { ![0x20, 0x09, 0x0D].contains($0) }) {
            position += 1
            try emit(position, element, elementStart)
            element = []
        }
    }

    private mutating func feedLines(_ bytes: [UInt8], _ emit: (Int, [UInt8], Int) throws -> Void) throws {
        var start = 0
        for index in bytes.indices where bytes[index] == 0x0A {
            element += bytes[start..<index]
            position += 1
            if element.contains(where: { ![0x20, 0x09, 0x0D].contains($0) }) {
                try emit(position, element, elementStart)
            }
            element = []
            start = index + 1
            elementStart = offset + start
        }
        element += bytes[start...]
    }

    private mutating func feedArray(_ bytes: [UInt8], _ emit: (Int, [UInt8], Int) throws -> Void) throws {
        var index = 0
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
        while index < bytes.count {
            let byte = bytes[index]
            switch state {
            case .beforeArray:
                if byte == UInt8(ascii: "[") {
                    state = .beforeElement
                } else if !isSpace(byte) {
                    throw failure("no array", at: offset + index)
                }
                index += 1
            case .beforeElement, .afterElement:
                if isSpace(byte) {
                    index += 1
                } else if byte == UInt8(ascii: "]"), state == .afterElement || position == 0 {
                    state = .afterArray
                    index += 1
                } else if byte == UInt8(ascii: ","), state == .afterElement {
                    state = .beforeElement
                    index += 1
                } else if state == .beforeElement, byte != UInt8(ascii: ","), byte != UInt8(ascii: "]") {
                    state = .inElement
                    elementStart = offset + index
                } else {
                    throw failure("unexpected '\(Character(Unicode.Scalar(byte)))'", at: offset + index)
                }
            case .inElement:
                // Copy the run of bytes up to the element's end in one append.
                let start = index
                var ended = false
                while index < bytes.count {
                    let b = bytes[index]
                    if inString {
                        if escaped { escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 {
                            inString = false
                        }
                    } else if b == 0x22 {
                        inString = true
                    } else if b == UInt8(ascii: "{") || b == UInt8(ascii: "[") {
                        depth += 1
                    } else if b == UInt8(ascii: "}") || b == UInt8(ascii: "]") {
                        if depth == 0 { ended = true; break }
                        depth -= 1
                    } else if depth == 0, b == UInt8(ascii: ",") || isSpace(b) {
                        ended = true
                        break
                    }
                    index += 1
                }
                element += bytes[start..<index]
                if ended {
                    position += 1
                    try emit(position, element, elementStart)
                    element = []
                    state = .afterElement
                }
            case .afterArray:
                guard isSpace(byte) else { throw failure("text after the array", at: offset + index) }
                index += 1
            }
        }
    }
}

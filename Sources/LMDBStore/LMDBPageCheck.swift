@_spi(Backend) import DataStoreAPI
import Foundation

/// Validates an LMDB environment's `data.mdb` with bounds checks before liblmdb follows any
/// of it, so that no damaged file can crash the process.
///
/// liblmdb trusts its pages: a truncated file faults (SIGBUS) on the first access past its
/// end, and a damaged page sends it through wild offsets (SIGSEGV). The check runs in two
/// steps, both before liblmdb reads a page:
/// - ``checkMeta(path:)``, on every open: the two meta pages (magic, version, page size) and
///   that the file holds every page the newest meta says was committed (`mm_last_pg`).
/// - ``walk(txnid:)``, for sources and `migrate-store check`: every page of the free tree,
///   the main tree and each named database reachable from the meta of transaction `txnid`:
///   page numbers, flags, header bounds, node offsets and sizes, key order, overflow runs,
///   sub-database records, tree depth, page and entry counts, and no page reached twice.
///   The caller holds a read transaction of that snapshot, so a live writer cannot reuse
///   its pages during the walk.
///
/// The layout is LMDB's data format version 1 (lmdb.h 0.9, 64-bit): a 16-byte page header
/// `{pgno: u64, pad: u16, flags: u16, lower: u16, upper: u16}` (`pages: u32` for overflow
/// pages), node pointers after the header, nodes `{lo: u16, hi: u16, flags: u16, ksize: u16}`
/// followed by key and data. A meta page holds `{magic, version, address, mapsize,
/// dbs[2] (48 bytes each), last_pg, txnid}` after its header.
struct LMDBPageCheck {
    /// What a walk found.
    struct Report: Sendable, Hashable {
        var pageSize = 0
        var pages = 0
        var entries = 0
        var databases = 0
    }

    struct Meta {
        var pageSize: Int
        var lastPage: UInt64
        var txnid: UInt64
        var free: DatabaseRecord
        var main: DatabaseRecord
    }

    /// An `MDB_db` record: a tree's root, depth and counts.
    struct DatabaseRecord {
        var flags: UInt16
        var depth: Int
        var branchPages: UInt64
        var leafPages: UInt64
        var overflowPages: UInt64
        var entries: UInt64
        var root: UInt64

        init(_ bytes: UnsafeRawBufferPointer) {
            flags = UInt16(littleEndian: bytes, at: 4)
            depth = Int(UInt16(littleEndian: bytes, at: 6))
            branchPages = UInt64(littleEndian: bytes, at: 8)
            leafPages = UInt64(littleEndian: bytes, at: 16)
            overflowPages = UInt64(littleEndian: bytes, at: 24)
            entries = UInt64(littleEndian: bytes, at: 32)
            root = UInt64(littleEndian: bytes, at: 40)
        }
    }

    static let magic: UInt32 = 0xBEEF_C0DE
    static let headerSize = 16
    static let nodeHeaderSize = 8
    static let invalidPage = UInt64.max
    static let maxKeySize = 511
    static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04
    static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02, dupData: UInt16 = 0x04
    /// `MDB_DUPSORT`: this package never creates such databases.
    static let dupSort: UInt16 = 0x04

    let path: String
    let file: String
    private let descriptor: Int32
    private let fileSize: UInt64

    /// Opens `data.mdb` of the environment `path` for reading.
    init(path: String) throws(StoreError) {
        self.path = path
        file = path + "/data.mdb"
        descriptor = Glibc.open(file, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            let cause = StoreError.Cause(
                library: "posix", code: code, message: String(cString: strerror(code)))
            if code == EACCES || code == EPERM {
                throw StoreError(
                    .readOnly, "\(file): permission denied: cannot read the environment", cause: cause)
            }
            throw StoreError(
                code == ENOENT ? .notFound : .io, "\(file): cannot open: \(cause.message)", cause: cause)
        }
        var status = stat()
        fstat(descriptor, &status)
        fileSize = UInt64(max(0, status.st_size))
    }

    func close() { Glibc.close(descriptor) }

    /// The file's size now (it only grows while a writer works on it).
    private var currentSize: UInt64 {
        var status = stat()
        return fstat(descriptor, &status) == 0 ? UInt64(max(0, status.st_size)) : fileSize
    }

    private func corrupt(_ what: String) -> StoreError {
        StoreError(.corrupt, "\(file) is damaged: \(what)")
    }

    private func read(offset: UInt64, count: Int) throws(StoreError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(offset)) }
        guard got == count else {
            if got < 0 {
                let code = errno
                throw StoreError(
                    .io, "\(file): cannot read at offset \(offset)",
                    cause: StoreError.Cause(
                        library: "posix", code: code,
                        message: String(cString: strerror(code))))
            }
            throw corrupt("it ends at byte \(fileSize), inside the page at offset \(offset)")
        }
        return bytes
    }

    // MARK: Meta pages

    /// Reads both meta pages and checks that the file holds them and the root pages of the
    /// newest meta's trees.
    ///
    /// Not every page up to the meta's `mm_last_pg`: a page a transaction dirtied and then freed
    /// ("loose", mdb.c) is counted there but never written, so a healthy file can end before
    /// it (seen on a store that another process was writing). Pages past the end of the file are
    /// unreachable in a healthy store; ``walk(txnid:)`` checks that every reachable page is in it.
    /// - Returns: the meta of the newest committed transaction.
    /// - Throws: `notAStore` for a file that is not an LMDB environment (empty, too short for
    ///   a meta page, wrong magic), `incompatibleFormat` for another data version, `corrupt`
    ///   for a truncated file or unusable metas.
    func checkMeta() throws(StoreError) -> Meta {
        guard fileSize > 0 else {
            throw StoreError(
                .notAStore, "\(file) is empty: not an LMDB environment (nothing is written to it)")
        }
        guard fileSize >= 160 else {
            throw StoreError(.notAStore, "\(file) holds \(fileSize) bytes, too few for an LMDB meta page")
        }
        let first = try read(offset: 0, count: 160)
        guard first.withUnsafeBytes({ UInt32(littleEndian: $0, at: 16) }) == Self.magic else {
            throw StoreError(.notAStore, "\(file) is not an LMDB environment (no LMDB magic number)")
        }
        let pageSize = Int(first.withUnsafeBytes { UInt32(littleEndian: $0, at: 40) })
        guard pageSize >= 512, pageSize <= 65_536, pageSize & (pageSize - 1) == 0 else {
            throw corrupt("its meta page names a page size of \(pageSize) bytes")
        }
        var metas: [Meta] = []
        for index in 0..<2 {
            let offset = UInt64(index * pageSize)
            guard offset + 160 <= fileSize else { continue }
            let bytes = index == 0 ? first : try read(offset: offset, count: 160)
            // liblmdb takes the page size of the newest meta page: two that differ are damage
            // (a damaged size made it map the file with a page size of its own).
            let named = Int(bytes.withUnsafeBytes { UInt32(littleEndian: $0, at: 40) })
            if index == 1, named != pageSize, bytes.withUnsafeBytes({ UInt32(littleEndian: $0, at: 16) }) == Self.magic {
                throw corrupt("its meta page 1 names a page size of \(named) bytes, meta page 0 one of \(pageSize)")
            }
            // liblmdb maps at least the pages up to the meta's last page: a damaged one names a
            // map no store grows to (``DiskSpace.largestMap``), which it cannot map.
            let lastPage = bytes.withUnsafeBytes { UInt64(littleEndian: $0, at: 136) }
            if bytes.withUnsafeBytes({ UInt32(littleEndian: $0, at: 16) }) == Self.magic,
               lastPage >= UInt64(DiskSpace.largestMap / pageSize) {
                let largest = DiskSpace.largestMap
                throw corrupt("its meta page \(index) names page \(lastPage) as its last, past the largest map a store "
                    + "makes (\(largest) bytes)")
            }
            guard let meta = parseMeta(bytes, pageSize: pageSize) else { continue }
            metas.append(meta)
        }
        guard let newest = metas.max(by: { $0.txnid < $1.txnid }) else {
            throw corrupt("neither meta page is valid")
        }
        // A live writer writes its pages and then the meta naming them: the size read after the
        // metas holds every page they reach, the size read at open may not.
        let filePages = currentSize / UInt64(pageSize)
        guard filePages >= 2 else {
            throw corrupt("it holds \(currentSize) bytes, less than its two meta pages (the file was truncated)")
        }
        for (name, tree) in [("free-page list", newest.free), ("main database", newest.main)]
        where tree.root != Self.invalidPage && tree.root >= filePages {
            throw corrupt("the root page \(tree.root) of its \(name) lies past its end at byte "
                + "\(filePages * UInt64(pageSize)) (the file was truncated)")
        }
        return newest
    }

    private func parseMeta(_ bytes: [UInt8], pageSize: Int) -> Meta? {
        bytes.withUnsafeBytes { parseMeta($0, pageSize: pageSize) }
    }

    private func parseMeta(_ page: UnsafeRawBufferPointer, pageSize: Int) -> Meta? {
        guard UInt32(littleEndian: page, at: 16) == Self.magic, UInt32(littleEndian: page, at: 20) == 1,
            UInt16(littleEndian: page, at: 10) & 0x08 != 0
        else { return nil }
        let lastPage = UInt64(littleEndian: page, at: 136)
        guard lastPage >= 1, lastPage < UInt64.max / UInt64(pageSize) else { return nil }
        return Meta(
            pageSize: pageSize, lastPage: lastPage, txnid: UInt64(littleEndian: page, at: 144),
            free: DatabaseRecord(UnsafeRawBufferPointer(rebasing: page[40..<88])),
            main: DatabaseRecord(UnsafeRawBufferPointer(rebasing: page[88..<136])))
    }

    // MARK: Tree walk

    /// Walks every tree of the meta page whose transaction is `txnid`.
    /// - Returns: `nil` when a writer has committed twice since that transaction began, so that
    ///   both meta pages now name newer ones (the caller's snapshot is intact, but its meta page
    ///   is gone: the caller walks a newer snapshot).
    /// - Throws: `corrupt` naming the file, the database and the page at the first damage.
    func walk(txnid: UInt64? = nil) throws(StoreError) -> Report? {
        let newest = try checkMeta()
        var meta = newest
        if let txnid, txnid != newest.txnid {
            var candidates: [Meta] = []
            for offset in [0, UInt64(newest.pageSize)] {
                // A meta page a writer is writing may be read half old, half new: it is read until
                // two reads agree.
                var bytes = try read(offset: offset, count: 160)
                for _ in 0..<100 {
                    let again = try read(offset: offset, count: 160)
                    if again == bytes { break }
                    bytes = again
                }
                if let parsed = parseMeta(bytes, pageSize: newest.pageSize) { candidates.append(parsed) }
            }
            guard let match = candidates.first(where: { $0.txnid == txnid }) else {
                // Both meta pages newer than the snapshot: a live writer moved on.
                if candidates.count == 2, candidates.allSatisfy({ $0.txnid > txnid }) { return nil }
                throw corrupt("no meta page holds transaction \(txnid)")
            }
            meta = match
        }
        // Only the pages the file holds are mapped, and LMDB never shrinks the file while it is
        // open, so reading them through a read-only mapping cannot fault; the walk's bounds
        // checks (every reachable page inside the file) stand between damage and liblmdb.
        let filePages = min(meta.lastPage + 1, currentSize / UInt64(meta.pageSize))
        let length = Int(filePages) * meta.pageSize
        guard let mapping = mmap(nil, length, PROT_READ, MAP_SHARED, descriptor, 0), mapping != MAP_FAILED else {
            throw StoreError(.io, "\(file): cannot map \(length) bytes to check them")
        }
        defer { munmap(mapping, length) }
        var walker = Walker(check: self, meta: meta, pages: UnsafeRawBufferPointer(start: mapping, count: length))
        try walker.tree(meta.free, name: "the free-page list", isFreeList: true)
        try walker.tree(meta.main, name: "the main database", isFreeList: false)
        return walker.report
    }

    fileprivate struct Walker {
        let check: LMDBPageCheck
        let meta: Meta
        /// Pages `0...meta.lastPage`, mapped.
        let pages: UnsafeRawBufferPointer
        var visited = Set<UInt64>()
        var report = Report()
        var named: [(String, DatabaseRecord)] = []

        init(check: LMDBPageCheck, meta: Meta, pages: UnsafeRawBufferPointer) {
            self.check = check
            self.meta = meta
            self.pages = pages
            report.pageSize = meta.pageSize
        }

        struct Counts {
            var branch: UInt64 = 0
            var leaf: UInt64 = 0
            var overflow: UInt64 = 0
            var entries: UInt64 = 0
        }

        mutating func tree(_ db: DatabaseRecord, name: String, isFreeList: Bool) throws(StoreError) {
            report.databases += 1
            if db.root == LMDBPageCheck.invalidPage {
                guard db.entries == 0, db.depth == 0 else {
                    throw check.corrupt("\(name) has no root page but counts \(db.entries) entries")
                }
                return
            }
            guard db.flags & LMDBPageCheck.dupSort == 0 else {
                throw check.corrupt("\(name) holds duplicate-sorted data, which no DataStore store has")
            }
            guard db.depth >= 1, db.depth <= 32 else {
                throw check.corrupt("\(name) has a tree depth of \(db.depth)")
            }
            var counts = Counts()
            try page(db.root, depth: 1, tree: db, name: name, isFreeList: isFreeList, counts: &counts)
            guard counts.entries == db.entries, counts.branch == db.branchPages, counts.leaf == db.leafPages,
                counts.overflow == db.overflowPages
            else {
                throw check.corrupt(
                    // Each count printed as it is: damaged ones may not add up without overflowing.
                    "\(name) counts \(db.entries) entries in \(db.branchPages) branch and \(db.leafPages) leaf "
                        + "pages, but its tree holds \(counts.entries) entries in \(counts.branch) branch and "
                        + "\(counts.leaf) leaf pages"
                )
            }
            report.entries += Int(counts.entries)
            if !isFreeList {
                let children = named
                named = []
                for (child, record) in children {
                    try tree(record, name: "database '\(child)'", isFreeList: false)
                }
            }
        }

        mutating func load(_ number: UInt64, name: String) throws(StoreError) -> UnsafeRawBufferPointer {
            guard number >= 2, number <= meta.lastPage else {
                throw check.corrupt("\(name) refers to page \(number), outside pages 2...\(meta.lastPage)")
            }
            guard number < filePages else { throw pastTheEnd(number, name) }
            guard visited.insert(number).inserted else {
                throw check.corrupt("\(name) reaches page \(number) twice")
            }
            report.pages += 1
            let start = Int(number) * meta.pageSize
            let bytes = UnsafeRawBufferPointer(rebasing: pages[start..<start + meta.pageSize])
            guard UInt64(littleEndian: bytes, at: 0) == number else {
                throw check.corrupt(
                    "page \(number) of \(name) carries the number \(UInt64(littleEndian: bytes, at: 0))")
            }
            return bytes
        }

        mutating func page(
            _ number: UInt64, depth: Int, tree: DatabaseRecord, name: String, isFreeList: Bool,
            counts: inout Counts
        ) throws(StoreError) {
            let p = try load(number, name: name)
            let size = meta.pageSize
            let flags = UInt16(littleEndian: p, at: 10)
            let lower = Int(UInt16(littleEndian: p, at: 12))
            let upper = Int(UInt16(littleEndian: p, at: 14))
            var where_: String { "page \(number) of \(name)" }
            let isBranch = flags & LMDBPageCheck.branch != 0
            guard flags & ~(LMDBPageCheck.branch | LMDBPageCheck.leaf) == 0,
                isBranch != (flags & LMDBPageCheck.leaf != 0)
            else { throw check.corrupt("\(where_) has flags 0x\(String(flags, radix: 16)), not a tree page") }
            guard lower >= LMDBPageCheck.headerSize, lower % 2 == 0, lower <= upper, upper <= size else {
                throw check.corrupt("\(where_) has free space bounds \(lower)...\(upper)")
            }
            guard isBranch == (depth < tree.depth) else {
                throw check.corrupt(
                    "\(where_) is a \(isBranch ? "branch" : "leaf") at depth \(depth) of a tree "
                        + "\(tree.depth) deep")
            }
            let count = (lower - LMDBPageCheck.headerSize) / 2
            guard count > 0 || (!isBranch && depth == 1) else {
                throw check.corrupt("\(where_) holds no nodes")
            }
            if isBranch { counts.branch += 1 } else { counts.leaf += 1 }
            var previousKey: UnsafeRawBufferPointer?
            for i in 0..<count {
                let offset = Int(UInt16(littleEndian: p, at: LMDBPageCheck.headerSize + 2 * i))
                guard offset >= upper, offset + LMDBPageCheck.nodeHeaderSize <= size else {
                    throw check.corrupt(
                        "\(where_): node \(i) starts at \(offset), outside \(upper)..<\(size)")
                }
                let lo = UInt64(UInt16(littleEndian: p, at: offset))
                let hi = UInt64(UInt16(littleEndian: p, at: offset + 2))
                let nodeFlags = UInt16(littleEndian: p, at: offset + 4)
                let keySize = Int(UInt16(littleEndian: p, at: offset + 6))
                let keyStart = offset + LMDBPageCheck.nodeHeaderSize
                guard keySize <= LMDBPageCheck.maxKeySize, keyStart + keySize <= size else {
                    throw check.corrupt(
                        "\(where_): node \(i) has a key of \(keySize) bytes past the page end")
                }
                let key = UnsafeRawBufferPointer(rebasing: p[keyStart..<keyStart + keySize])
                if let previousKey, !(isBranch && i == 1), !isFreeList, Self.compare(previousKey, key) >= 0 {
                    throw check.corrupt("\(where_): keys \(i - 1) and \(i) are out of order")
                }
                previousKey = key
                if isBranch {
                    let child = lo | hi << 16 | UInt64(nodeFlags) << 32
                    try page(
                        child, depth: depth + 1, tree: tree, name: name, isFreeList: isFreeList,
                        counts: &counts)
                    continue
                }
                counts.entries += 1
                let dataSize = Int(lo | hi << 16)
                let dataStart = keyStart + keySize
                if nodeFlags & LMDBPageCheck.bigData != 0 {
                    guard dataStart + 8 <= size else {
                        throw check.corrupt("\(where_): node \(i) names an overflow page past the page end")
                    }
                    try overflowRun(
                        UInt64(littleEndian: p, at: dataStart), dataSize: dataSize, name: name,
                        counts: &counts)
                    continue
                }
                guard nodeFlags & ~LMDBPageCheck.subData == 0 else {
                    throw check.corrupt("\(where_): node \(i) has flags 0x\(String(nodeFlags, radix: 16))")
                }
                guard dataStart + dataSize <= size else {
                    throw check.corrupt(
                        "\(where_): node \(i) holds \(dataSize) bytes of data past the page end")
                }
                if isFreeList {
                    // The count is the file's: compared as it is read, never converted.
                    guard dataSize >= 8, UInt64(littleEndian: p, at: dataStart) <= UInt64((dataSize - 8) / 8) else {
                        throw check.corrupt("\(where_): free-page list \(i) is malformed")
                    }
                } else if nodeFlags & LMDBPageCheck.subData != 0 {
                    guard dataSize == 48 else {
                        throw check.corrupt("\(where_): database record \(i) holds \(dataSize) bytes, not 48")
                    }
                    named.append(
                        (
                            String(decoding: key, as: UTF8.self),
                            DatabaseRecord(UnsafeRawBufferPointer(rebasing: p[dataStart..<dataStart + 48]))
                        ))
                }
            }
        }

        /// Pages the file holds (the mapping's length).
        var filePages: UInt64 { UInt64(pages.count / meta.pageSize) }

        func pastTheEnd(_ number: UInt64, _ name: String) -> StoreError {
            check.corrupt("page \(number) of \(name) lies past the end of the file at byte \(pages.count) "
                + "(the file was truncated)")
        }

        /// Byte order of two keys (memcmp, then length), as LMDB's default comparator.
        static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
            let common = min(a.count, b.count)
            if common > 0, let x = a.baseAddress, let y = b.baseAddress {
                let c = memcmp(x, y, common)
                if c != 0 { return c < 0 ? -1 : 1 }
            }
            return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
        }

        mutating func overflowRun(
            _ number: UInt64, dataSize: Int, name: String, counts: inout Counts
        )
            throws(StoreError)
        {
            let bytes = try load(number, name: name)
            let flags = UInt16(littleEndian: bytes, at: 10)
            let pages = UInt64(UInt32(littleEndian: bytes, at: 12))
            guard flags == LMDBPageCheck.overflow, pages >= 1, number + pages - 1 <= meta.lastPage,
                UInt64(dataSize) <= pages * UInt64(meta.pageSize) - UInt64(LMDBPageCheck.headerSize)
            else {
                throw check.corrupt(
                    "overflow page \(number) of \(name) is malformed (\(pages) pages for "
                        + "\(dataSize) bytes)")
            }
            guard number + pages <= filePages else { throw pastTheEnd(number + pages - 1, name) }
            for extra in 1..<pages where !visited.insert(number + extra).inserted {
                throw check.corrupt("overflow pages of \(name) overlap at page \(number + extra)")
            }
            counts.overflow += pages
            report.pages += Int(pages) - 1
        }
    }
}

extension FixedWidthInteger {
    /// Reads a little-endian integer at `offset` of `bytes`; 0 past their end (the callers check
    /// the bounds first, this only keeps a mistake from reading out of bounds).
    init(littleEndian bytes: UnsafeRawBufferPointer, at offset: Int) {
        guard offset >= 0, offset + MemoryLayout<Self>.size <= bytes.count else {
            self = 0
            return
        }
        self = Self(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Self.self))
    }
}

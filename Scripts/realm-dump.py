#!/usr/bin/env python3
"""Dump tables, columns and first rows of a Realm file (formats 10-24), encrypted ones with --key-file.

Written only from the spec in realm-format.md (no realm-core code, no third-party packages).
Usage: realm-dump.py FILE [--rows N] [--table NAME] [--all-tables] [--json] [--key-file KEY]

The tests use it, with --json, as a checker independent of the Swift reader: it was written from
realm-core's format description by another hand, and prints every object of every class table
(`{"tables": [{"name", "primaryKey", "kind", "columns": [...], "objects": [{"key", "values"}]}]}`;
bytes as {"hex": ...}, dates as "ts(SECONDS,NANOSECONDS)", ObjectIds as hex, UUIDs as text, links
as the target's object key, lists as arrays).
"""
import json
import struct, sys, argparse

NODES = None   # ref -> what it is, when --nodes collects them
NODE_KINDS = {
    'raw/load': 'top array', 'load/main': 'table names and tables', '__init__/main': 'table top, spec and column arrays',
    'raw/__init__': 'table key and link arrays', 'cluster_leaves/rows': 'cluster leaf',
    'cluster_leaves/cluster_leaves': 'cluster inner node', 'column_values/rows': 'collection root',
    'leaf_values/column_values': 'value leaf', 'string_leaf/leaf_values': 'string leaf',
    'string_leaf/<lambda>': 'string leaf of a collection', 'timestamps/leaf_values': 'timestamp arrays',
    'raw/fixed_bytes': 'ObjectId and UUID leaf', 'raw/leaf_values': 'Decimal128 and float leaf',
    'bptree_leaves/bptree_values': 'list and set B+tree node', 'mixed_leaf/leaf_values': 'Mixed leaf',
    'arr/mixed_leaf': 'Mixed arrays', 'dictionary/column_values': 'dictionary',
}

# ---------------------------------------------------------------- file / nodes

class RealmError(Exception):
    pass

class Realm:
    def __init__(self, data):
        self.d = data
        self.parse_header()

    def parse_header(self):
        d = self.d
        n = len(d)
        if n < 24:
            raise RealmError("file too small (%d bytes)" % n)
        top0, top1 = struct.unpack_from('<QQ', d, 0)
        mnem, fmt0, fmt1, _res, flags = d[16:20], d[20], d[21], d[22], d[23]
        if mnem != b'T-DB':
            if n % 4096 == 0 and n >= 8192:
                raise RealmError("no 'T-DB' mnemonic: file is probably ENCRYPTED (or not a Realm file)")
            raise RealmError("no 'T-DB' mnemonic: not a Realm file")
        if n % 8:
            raise RealmError("file size %d not a multiple of 8" % n)
        sel = flags & 1
        top = (top0, top1)[sel]
        self.format = (fmt0, fmt1)[sel]
        self.streaming = False
        if sel == 0 and top == 0xFFFFFFFFFFFFFFFF:
            if n < 40:
                raise RealmError("streaming file too small")
            top, cookie = struct.unpack_from('<QQ', d, n - 16)
            if cookie != 0x3034125237E526C8:
                raise RealmError("streaming footer cookie mismatch (truncated?)")
            self.streaming = True
        if top % 8 or top >= n:
            raise RealmError("bad top ref %#x" % top)
        if top == 0:
            raise RealmError("empty Realm (top ref 0): no tables")
        if self.format < 10 or self.format > 24:
            raise RealmError("file format %d not supported (only 10, 11, 20-24)" % self.format)
        self.top_ref = top

    # --- node header
    def hdr(self, ref):
        if NODES is not None and ref not in NODES:
            # what the node is: the reader's functions that asked for it (the caller's caller
            # for the generic array readers)
            f = sys._getframe(1)
            names = []
            while f is not None and len(names) < 2:
                if f.f_code.co_name not in ('hdr', 'ints', 'refs', 'short_strings', 'get', 'strings', 'blob'):
                    names.append(f.f_code.co_name)
                f = f.f_back
            label = '/'.join(names)
            NODES[ref] = NODE_KINDS.get(label, label)
        if ref == 0 or ref % 8 or ref + 8 > len(self.d):
            raise RealmError("bad ref %#x" % ref)
        h = self.d[ref + 4]
        size = (self.d[ref + 5] << 16) | (self.d[ref + 6] << 8) | self.d[ref + 7]
        width = (1 << (h & 7)) >> 1
        wtype = (h >> 3) & 3
        nbytes = {0: (size * width + 7) // 8, 1: size * width, 2: size}.get(wtype)
        if nbytes is None or ref + 8 + nbytes > len(self.d):
            raise RealmError("node at %#x runs past end of file (or bad width type)" % ref)
        return dict(inner=bool(h & 0x80), has_refs=bool(h & 0x40), ctx=bool(h & 0x20),
                    wtype=wtype, width=width, size=size, data=ref + 8)

    def get(self, ref, i, signed=True, h=None):
        h = h or self.hdr(ref)
        w, p = h['width'], h['data']
        if w == 0:
            return 0
        if w < 8:
            byte = self.d[p + (i * w) // 8]
            return (byte >> ((i * w) % 8)) & ((1 << w) - 1)
        nb = w // 8
        return int.from_bytes(self.d[p + i * nb:p + (i + 1) * nb], 'little', signed=signed)

    def ints(self, ref, signed=True):
        h = self.hdr(ref)
        return [self.get(ref, i, signed, h) for i in range(h['size'])]

    def raw(self, ref):
        h = self.hdr(ref)
        w, s = h['width'], h['size']
        nbytes = {0: (s * w + 7) // 8, 1: s * w, 2: s}[h['wtype']]
        return h, self.d[h['data']:h['data'] + nbytes]

    # --- strings
    def short_strings(self, ref):
        h, b = self.raw(ref)
        w = h['width']
        out = []
        for i in range(h['size']):
            if w == 0:
                out.append(None)
                continue
            e = b[i * w:(i + 1) * w]
            pad = e[w - 1]
            out.append(None if pad == w else e[:w - 1 - pad].decode('utf-8', 'replace'))
        return out

    def blob(self, ref):
        h = self.hdr(ref)
        if h['ctx']:  # split blob: concatenation of children
            return b''.join(self.blob(r) for r in self.ints(ref))
        return self.d[h['data']:h['data'] + h['size']]

    def string_leaf(self, ref, binary=False, spec_enum=None, zero_term=None):
        h = self.hdr(ref)
        if not h['has_refs']:
            if h['wtype'] == 1:
                v = self.short_strings(ref)
                return [x.encode() if (binary and x is not None) else x for x in v] if binary else v
            # enum strings: integer indexes into spec enum-keys list
            idx = self.ints(ref)
            keys = spec_enum or []
            return [keys[i] if i < len(keys) else '<enum %d>' % i for i in idx]
        zt = (0 if binary else 1) if zero_term is None else int(zero_term)
        if not h['ctx']:  # medium: offsets, blob, nulls
            offs_ref, blob_ref = self.get(ref, 0), self.get(ref, 1)
            nulls = self.ints(self.get(ref, 2)) if h['size'] > 2 else None
            offs = self.ints(offs_ref)
            blob = self.blob(blob_ref)
            out, beg = [], 0
            for i, end in enumerate(offs):
                if nulls and nulls[i]:
                    out.append(None)
                else:
                    v = blob[beg:end - zt]
                    out.append(v if binary else v.decode('utf-8', 'replace'))
                beg = end
            return out
        out = []  # big: one ref per element
        for r in self.ints(ref):
            if r == 0:
                out.append(None)
            else:
                v = self.blob(r)
                v = v[:len(v) - zt]
                out.append(v if binary else v.decode('utf-8', 'replace'))
        return out

# ---------------------------------------------------------------- value leaves

NULL_F32 = 0x7fc000aa
NULL_F64 = 0x7ff80000000000aa

def dec_bid(w0, w1):
    if w0 == 0xaa and w1 == 0x7c00000000000000:
        return None
    sign = '-' if w1 >> 63 else ''
    if (w1 & 0x7c00000000000000) == 0x7c00000000000000:
        return 'NaN'
    if (w1 & 0x7800000000000000) == 0x7800000000000000:
        return sign + 'Inf'
    if (w1 >> 61) & 3 == 3:
        return sign + '0'  # non-canonical large-coefficient form: treated as zero
    exp = ((w1 >> 49) & 0x3FFF) - 6176
    coef = ((w1 & ((1 << 49) - 1)) << 64) | w0
    return '%s%dE%d' % (sign, coef, exp)

def dec_small(v, nbytes):
    bits = nbytes * 8
    if nbytes == 4 and v == 0x7c0000aa or nbytes == 8 and v == 0x7c000000000000aa:
        return None
    sign = '-' if v >> (bits - 1) else ''
    if (v >> (bits - 6)) & 0x1F == 0x1F:
        return 'NaN'
    if (v >> (bits - 5)) & 0xF == 0xF:
        return sign + 'Inf'
    ebits, bias, cbits = (8, 101, 23) if nbytes == 4 else (10, 398, 53)
    if (v >> (bits - 3)) & 3 == 3:  # large-coefficient form
        exp = ((v >> (cbits - 2)) & ((1 << ebits) - 1)) - bias
        coef = (v & ((1 << (cbits - 2)) - 1)) | (1 << (cbits)) 
    else:
        exp = ((v >> cbits) & ((1 << ebits) - 1)) - bias
        coef = v & ((1 << cbits) - 1)
    return '%s%dE%d' % (sign, coef, exp)

def fixed_bytes(R, ref, n):
    """ObjectId (n=12) / UUID (n=16) leaf: blocks of 1 null-bitmap byte + 8 values."""
    h, b = R.raw(ref)
    if h['width'] == 0 and h['size'] == 0:
        return []
    block = 8 * n + 1
    total = h['size']
    count = (total - (total + block - 1) // block) // n
    out = []
    for i in range(count):
        base = (i // 8) * block
        if b[base] & (1 << (i % 8)):
            out.append(None)
        else:
            s = base + 1 + (i % 8) * n
            v = b[s:s + n]
            out.append(v.hex() if n == 12 else '%s-%s-%s-%s-%s' % (v[:4].hex(), v[4:6].hex(), v[6:8].hex(), v[8:10].hex(), v[10:].hex()))
    return out

def timestamps(R, ref):
    secs_ref, ns_ref = R.get(ref, 0), R.get(ref, 1)
    secs = R.ints(secs_ref)
    ns = R.ints(ns_ref)
    nullv = secs[0]
    return [None if s == nullv else ('ts(%d,%d)' % (s, n)) for s, n in zip(secs[1:], ns)]

def mixed_leaf(R, ref, fmt):
    comp = R.ints(R.get(ref, 0))
    h = R.hdr(ref)
    slot = lambda k: R.get(ref, k) if h['size'] > k else 0
    ints_ref, pairs_ref, str_ref, refs_ref = slot(1), slot(2), slot(3), slot(4)
    cache = {}
    def arr(name, r, f):
        if name not in cache:
            cache[name] = f(r) if r else []
        return cache[name]
    out = []
    for v in comp:
        if v == 0:
            out.append(None)
            continue
        t = (v & 0x1F) - 1
        pidx = (v >> 5) & 7
        x = v >> 8
        if t == 0:
            out.append(arr('i', ints_ref, R.ints)[x] if pidx else x)
        elif t == 1:
            out.append(bool(x))
        elif t in (9, 10):
            raw = arr('i', ints_ref, R.ints)[x] & 0xFFFFFFFFFFFFFFFF
            out.append(struct.unpack('<f', struct.pack('<I', raw & 0xFFFFFFFF))[0] if t == 9 else
                       struct.unpack('<d', struct.pack('<Q', raw))[0])
        elif t in (2, 4, 15, 17):
            s = arr('s', str_ref, lambda r: R.string_leaf(r, binary=True, zero_term=True))[x]
            if t == 2:
                out.append(s.decode('utf-8', 'replace'))
            elif t == 4:
                out.append(s)
            elif t == 15:
                out.append('oid(%s)' % s.hex())
            else:
                out.append('uuid(%s)' % s.hex())
        elif t in (8, 11, 16):
            p = arr('p', pairs_ref, R.ints)
            a, b = p[2 * x], p[2 * x + 1]
            if t == 8:
                out.append('ts(%d,%d)' % (a, b))
            elif t == 11:
                out.append(dec_bid(a & 0xFFFFFFFFFFFFFFFF, b & 0xFFFFFFFFFFFFFFFF))
            else:
                out.append('link(table=%d,key=%d)' % (a, b))
        elif t == 12:
            out.append('link(key=%d)' % arr('i', ints_ref, R.ints)[x])
        elif pidx == 4:
            r = arr('r', refs_ref, R.ints)[x]
            out.append(('list@%#x' if t == 19 else 'set@%#x' if t == 20 else 'dict@%#x') % r)
        else:
            out.append('<mixed type %d>' % t)
    return out

def leaf_values(R, ref, ctype, nullable, fmt, in_bptree=False, enum_keys=None):
    """Decode one leaf array of a column / collection of the given ColumnType."""
    if ctype == 0:  # Int
        v = R.ints(ref)
        if nullable:
            return [None if x == v[0] else x for x in v[1:]]
        return v
    if ctype == 1:  # Bool
        return [None if x == 3 else bool(x) for x in R.ints(ref)]
    if ctype in (9, 10):
        h, b = R.raw(ref)
        if ctype == 9:
            vals = struct.unpack('<%dI' % h['size'], b[:4 * h['size']])
            return [None if x == NULL_F32 else struct.unpack('<f', struct.pack('<I', x))[0] for x in vals]
        vals = struct.unpack('<%dQ' % h['size'], b[:8 * h['size']])
        return [None if x == NULL_F64 else struct.unpack('<d', struct.pack('<Q', x))[0] for x in vals]
    if ctype == 2:
        return R.string_leaf(ref, spec_enum=enum_keys)
    if ctype == 4:
        return R.string_leaf(ref, binary=True)
    if ctype == 8:
        return timestamps(R, ref)
    if ctype == 11:
        h, b = R.raw(ref)
        w = h['width']
        if w == 0:
            return [('0' if h['ctx'] else None)] * h['size']
        out = []
        for i in range(h['size']):
            if w == 16:
                w0, w1 = struct.unpack_from('<QQ', b, 16 * i)
                out.append(dec_bid(w0, w1))
            else:
                out.append(dec_small(int.from_bytes(b[w * i:w * i + w], 'little'), w))
        return out
    if ctype == 15:
        return fixed_bytes(R, ref, 12)
    if ctype == 17:
        return fixed_bytes(R, ref, 16)
    if ctype in (12, 13):  # Link (+1 in cluster leaves, raw in B+trees)
        adj = 0 if in_bptree else 1
        return [None if (x == 0 and adj) else x - adj for x in R.ints(ref)]
    if ctype == 16:  # TypedLink: pairs (table+1, key+1)
        v = R.ints(ref)
        return [None if v[2 * i] == 0 else 'link(table=%d,key=%d)' % ((v[2 * i] - 1) & 0x7FFFFFFF, v[2 * i + 1] - 1)
                for i in range(len(v) // 2)]
    if ctype == 6:
        return mixed_leaf(R, ref, fmt)
    if ctype == 14:  # BackLink: 0 / tagged single key / ref to key list (array or B+tree)
        out = []
        for x in R.ints(ref):
            if x == 0:
                out.append([])
            elif x & 1:
                out.append([x >> 1])
            else:
                out.append(bptree_values(R, x, 0, False, fmt))
        return out
    return ['<type %d>' % ctype] * R.hdr(ref)['size']

def bptree_leaves(R, ref):
    h = R.hdr(ref)
    if not h['inner']:
        yield ref
        return
    for i in range(1, h['size'] - 1):
        yield from bptree_leaves(R, R.get(ref, i))

def bptree_values(R, ref, ctype, nullable, fmt):
    out = []
    for leaf in bptree_leaves(R, ref):
        out.extend(leaf_values(R, leaf, ctype, nullable, fmt, in_bptree=True))
    return out

# ---------------------------------------------------------------- cluster tree

SHIFT = 8  # log2(cluster node size): 8 for all SDK builds (REALM_MAX_BPNODE_SIZE=1000); 2 for core test builds with node size 4

def cluster_leaves(R, ref, offset=0, shift=None):
    shift = SHIFT if shift is None else shift
    """Yield (leaf_ref, [obj keys]) in key order."""
    h = R.hdr(ref)
    if not h['inner']:
        k = R.get(ref, 0)
        if k & 1:
            keys = list(range(k >> 1))
        else:
            keys = R.ints(k, signed=False)
        yield ref, [offset + x for x in keys]
        return
    keys_ref = R.get(ref, 0)
    depth = R.get(ref, 1) >> 1
    koffs = R.ints(keys_ref, signed=False) if keys_ref else None
    for i in range(3, h['size']):
        j = i - 3
        off = offset + (koffs[j] if koffs else j << (depth * shift))
        yield from cluster_leaves(R, R.get(ref, i), off, shift)

# ---------------------------------------------------------------- schema

TYPE_NAMES = {0: 'int', 1: 'bool', 2: 'string', 4: 'binary', 6: 'mixed', 8: 'timestamp', 9: 'float',
              10: 'double', 11: 'decimal128', 12: 'link', 13: 'linklist(old)', 14: 'backlink',
              15: 'objectId', 16: 'typedLink', 17: 'uuid'}

class Table:
    def __init__(self, R, name, ref):
        self.R, self.name, self.ref = R, name, ref
        top = R.ints(ref)
        self.top = top
        spec = R.ints(top[0])
        types = R.ints(spec[0])
        names = R.short_strings(spec[1])
        attrs = R.ints(spec[2])
        enum_ref = spec[4] if len(spec) > 4 else 0
        keys = R.ints(spec[5]) if len(spec) > 5 and spec[5] else None
        self.key = top[3] >> 1 if len(top) > 3 and top[3] & 1 else None
        self.pk = top[11] >> 1 if len(top) > 11 and top[11] & 1 else None
        self.flags = top[12] >> 1 if len(top) > 12 and top[12] & 1 else 0
        opp_t = R.ints(top[7]) if len(top) > 7 and top[7] else []
        opp_c = R.ints(top[8]) if len(top) > 8 and top[8] else []
        self.cols = []
        for i, t in enumerate(types):
            ck = keys[i] if keys else i
            leaf = ck & 0xFFFF
            # the ColKey is authoritative for type/attrs (spec type may still say 13 after upgrade)
            ctype = (ck >> 16) & 0x3F if keys else t & 0xFFFF
            enum_keys = None
            if enum_ref and i < len(names):
                er = R.get(enum_ref, i)
                if er:
                    enum_keys = R.string_leaf(er)
            self.cols.append(dict(
                name=names[i] if i < len(names) else '', type=ctype, key_type=t >> 16, attr=attrs[i],
                colkey=ck, leaf=leaf, nullable=bool(attrs[i] & 16),
                coll='list' if attrs[i] & 32 else 'dict' if attrs[i] & 64 else 'set' if attrs[i] & 128 else None,
                target=opp_t[leaf] if leaf < len(opp_t) else None,
                target_col=opp_c[leaf] if leaf < len(opp_c) else None, enum_keys=enum_keys))

    def rows(self, limit):
        R, n = self.R, 0
        for leaf, keys in cluster_leaves(R, self.top[2]):
            h = R.hdr(leaf)
            colvals = {}
            for c in self.cols:
                slot = c['leaf'] + 1
                if slot >= h['size']:
                    continue
                cref = R.get(leaf, slot)
                colvals[c['leaf']] = self.column_values(c, cref)
            for i, k in enumerate(keys):
                if n >= limit:
                    return
                yield k, {c['name'] or ('<backlink %d>' % c['leaf']): colvals[c['leaf']][i]
                          for c in self.cols if c['leaf'] in colvals}
                n += 1

    def column_values(self, c, cref):
        R, fmt = self.R, self.R.format
        if c['coll'] is None or c['type'] == 14:
            return leaf_values(R, cref, c['type'], c['nullable'], fmt, enum_keys=c['enum_keys'])
        out = []
        for r in R.ints(cref):
            if r == 0:
                out.append([] if c['coll'] != 'dict' else {})
            elif c['coll'] == 'dict':
                out.append(dictionary(R, r, c, fmt))
            else:
                out.append(bptree_values(R, r, c['type'], c['nullable'], fmt))
        return out

    def count(self):
        R = self.R
        h = R.hdr(self.top[2])
        if h['inner']:
            return R.get(self.top[2], 2) >> 1
        k = R.get(self.top[2], 0)
        return k >> 1 if k & 1 else R.hdr(k)['size']

def dictionary(R, ref, c, fmt):
    if fmt >= 23:  # [keys B+tree, values B+tree<Mixed>]
        kt = c['key_type'] if c['key_type'] else 2
        ks = bptree_values(R, R.get(ref, 0), kt, False, fmt)
        vs = bptree_values(R, R.get(ref, 1), 6, True, fmt)
        return dict(zip(ks, vs))
    # formats 21/22: a cluster tree, column slot 1 = keys, slot 2 = values (Mixed)
    out = {}
    for leaf, keys in cluster_leaves(R, ref):
        ks = leaf_values(R, R.get(leaf, 1), c['key_type'] or 2, False, fmt)
        vs = leaf_values(R, R.get(leaf, 2), 6, True, fmt)
        out.update(zip(ks, vs))
    return out

def decrypt(data, key):
    """The plain bytes of an encrypted Realm file (realm-core's util/encrypted_file_mapping.cpp):
    groups of one 4096-byte table page (64 entries: u32 iv1, hmac1[28], u32 iv2, hmac2[28]) and
    up to 64 AES-256-CBC pages, each authenticated by HMAC-SHA224 of its ciphertext."""
    import hashlib, hmac
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    if len(key) != 64:
        raise RealmError("key is %d bytes, not 64" % len(key))
    P = 4096
    if len(data) % P or len(data) < 2 * P:
        raise RealmError("encrypted file is not whole pages")
    pages = len(data) // P
    data_pages = pages - (pages + 64) // 65
    out = bytearray(data_pages * P)
    good = bad = 0
    for i in range(data_pages):
        g = (i // 64) * 65 * P
        e = g + (i % 64) * 64
        c = data[g + (1 + i % 64) * P: g + (2 + i % 64) * P]
        iv1, h1, iv2, h2 = struct.unpack_from('<I28sI28s', data, e)
        if iv1 == 0:
            continue
        mac = hmac.new(key[32:], c, hashlib.sha224).digest()
        if mac == h1:
            iv = iv1
        elif iv2 and mac == h2:
            iv = iv2
        else:
            bad += 1
            continue
        good += 1
        d = Cipher(algorithms.AES(key[:32]), modes.CBC(struct.pack('<IQI', iv, i * P, 0))).decryptor()
        out[i * P:(i + 1) * P] = d.update(c) + d.finalize()
    if bad and not good:
        raise RealmError("wrong key: no page's HMAC matches")
    if bad:
        raise RealmError("%d encrypted pages do not match their HMAC" % bad)
    return bytes(out)

def encrypt(data, key, counter=1):
    """The encrypted form of the plain bytes `data` (the inverse of decrypt), every page written
    once with IV counter `counter`: how the tests make encrypted files of any format."""
    import hashlib, hmac
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    P = 4096
    data = data + bytes(-len(data) % P)
    n = len(data) // P
    out = bytearray()
    for g in range(0, n, 64):
        table = bytearray(P)
        pages = []
        for i in range(g, min(n, g + 64)):
            e = Cipher(algorithms.AES(key[:32]), modes.CBC(struct.pack('<IQI', counter, i * P, 0))).encryptor()
            c = e.update(data[i * P:(i + 1) * P]) + e.finalize()
            struct.pack_into('<I28sI28s', table, (i - g) * 64, counter,
                             hmac.new(key[32:], c, hashlib.sha224).digest(), 0, bytes(28))
            pages.append(c)
        out += table + b''.join(pages)
    return bytes(out)

def load(path, key=None):
    data = open(path, 'rb').read()
    if key is not None:
        data = decrypt(data, key)
    R = Realm(data)
    top = R.ints(R.top_ref)
    if len(top) not in (3, 5, 7, 9, 10, 11, 12):
        raise RealmError("invalid top array size %d" % len(top))
    logical = top[2] >> 1
    if logical > len(R.d):
        raise RealmError("logical file size %d > file size %d" % (logical, len(R.d)))
    for r in top[:2]:
        if r == 0 or r & 7 or r > logical:
            raise RealmError("invalid table names/tables ref %#x" % r)
    names = R.short_strings(top[0])
    tables = R.ints(top[1])
    return R, top, names, tables

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('file')
    ap.add_argument('--rows', type=int, default=3)
    ap.add_argument('--table')
    ap.add_argument('--all-tables', action='store_true', help='include non class_ tables')
    ap.add_argument('--shift', type=int, default=8, help='cluster node shift (8 for SDK files)')
    ap.add_argument('--json', action='store_true', help='every object of every class table, as JSON')
    ap.add_argument('--key-file', help='the 64-byte key of an encrypted file')
    ap.add_argument('--nodes', action='store_true',
                    help='with --json: also every node read, as [ref, what] pairs ("nodes")')
    ap.add_argument('--encrypt', metavar='OUT', help='write the encrypted form of FILE under --key-file to OUT')
    a = ap.parse_args()
    if a.encrypt:
        open(a.encrypt, 'wb').write(encrypt(open(a.file, 'rb').read(), open(a.key_file, 'rb').read()))
        return
    global SHIFT, NODES
    SHIFT = a.shift
    if a.nodes:
        NODES = {}
    try:
        R, top, names, tables = load(a.file, open(a.key_file, 'rb').read() if a.key_file else None)
    except RealmError as e:
        print('REFUSED: %s' % e)
        sys.exit(2)
    if not a.json:
        print('file format %d, %s form, top_ref %#x, top array (%d): %s' % (
            R.format, 'streaming' if R.streaming else 'normal', R.top_ref, len(top),
            ['%#x' % v if not v & 1 else 'tag(%d)' % (v >> 1) for v in top]))
    if R.format not in (10, 11, 20, 21, 22, 23, 24):
        print('WARNING: unsupported file format %d' % R.format)
    tbl_by_key = {}
    objs = []
    for i, (n, r) in enumerate(zip(names, tables)):
        if r & 1 or r == 0:
            continue  # deleted slot
        t = Table(R, n, r)
        tbl_by_key[t.key] = n
        objs.append(t)
    if a.json:
        def plain(v):
            if isinstance(v, (bytes, bytearray)):
                return {'hex': bytes(v).hex()}
            if isinstance(v, dict):
                return {str(k): plain(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [plain(x) for x in v]
            return v
        out = []
        for t in objs:
            if not t.name.startswith('class_'):
                continue
            cols = [c for c in t.cols if c['type'] != 14]
            pk = next((c['name'] for c in cols if t.pk is not None and c['colkey'] == t.pk), None)
            objects = [{'key': k, 'values': {c: plain(v) for c, v in row.items() if not c.startswith('<backlink')}}
                       for k, row in t.rows(10 ** 9)]
            out.append({'name': t.name[6:], 'primaryKey': pk, 'kind': t.flags & 3, 'tableKey': t.key,
                        'columns': [{'name': c['name'], 'type': c['type'], 'collection': c['coll'],
                                     'target': tbl_by_key.get(c['target'])} for c in cols],
                        'objects': objects})
        result = {'format': R.format, 'tables': out}
        if NODES is not None:
            result['nodes'] = sorted([ref, what] for ref, what in NODES.items())
        print(json.dumps(result, sort_keys=True))
        return
    for t in objs:
        if a.table and t.name != a.table:
            continue
        if not a.all_tables and not a.table and not t.name.startswith('class_') and t.name != 'metadata':
            print('\n(table %r skipped; use --all-tables)' % t.name)
            continue
        kind = {0: 'top-level', 1: 'embedded', 2: 'asymmetric'}.get(t.flags & 3, '?')
        print('\nTABLE %r key=%s %s objects=%d' % (t.name, t.key, kind, t.count()))
        for c in t.cols:
            desc = TYPE_NAMES.get(c['type'], str(c['type']))
            if c['coll']:
                desc = '%s<%s%s>' % (c['coll'], TYPE_NAMES.get(c['key_type'], '') + ',' if c['coll'] == 'dict' else '', desc)
            if c['type'] in (12, 13, 14, 16):
                desc += ' -> %s' % tbl_by_key.get(c['target'], c['target'])
            flags = []
            if c['nullable']: flags.append('optional')
            if c['attr'] & 1: flags.append('indexed')
            if c['attr'] & 256: flags.append('fulltext')
            if t.pk is not None and c['colkey'] == t.pk: flags.append('PRIMARY KEY')
            print('  col %-24s %-28s leaf=%d colkey=%#x %s' % (c['name'] or '(backlink)', desc, c['leaf'], c['colkey'], ' '.join(flags)))
        for k, row in t.rows(a.rows):
            print('  obj %d: %s' % (k, row))

if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""Write a Realm file (format 23) of N items and N/1000 owners, for tests and benchmarks.

No Realm SDK runs on this Linux machine, so the file is written from the format as realm-core's
source describes it (docs/coming-from-core-data.md; the same description Scripts/realm-dump.py
reads by): the header, a top array of 3 (as the streaming writer makes), two class tables with
their specs, cluster trees of up to 256 objects a leaf under inner nodes, and the backlink columns
realm-core keeps for every link.

    realm-make.py OUT --items N [--key-file KEY]

- class Item, primary key `id` (int): id, name (string), price (double), active (bool),
  created (timestamp), note (optional string, null for every 7th), count (optional int, null for
  every 5th), owner (link to Owner, null for every 11th);
- class Owner, primary key `name` (string): name, items (list of links to Item: the items whose
  owner it is, in descending key order), and the backlinks.

Every value is a function of the item's number (`item_values`), so a test can check any item of a
copy without reading the file again. With --key-file the file is written encrypted (realm-dump.py's
encoder).
"""
import argparse, struct, sys

OWNERS_PER = 1000   # one owner per this many items


def item_values(i):
    """The values of item i, as the store holds them (see the module's docstring)."""
    return {
        'id': 1_000_000_000 + i,
        'name': 'item-%07d' % i,
        'price': i * 0.25 + 0.5,
        'active': i % 3 == 0,
        'created': (1_600_000_000 + i, (i % 1000) * 1000),   # seconds, nanoseconds
        'note': None if i % 7 == 0 else 'note %d' % (i * 31 % 9973),
        'count': None if i % 5 == 0 else (i % 200) - 100,
        'owner': None if i % 11 == 0 else i // OWNERS_PER,
    }


class Writer:
    def __init__(self):
        self.out = bytearray(24)   # the header, written last

    def node(self, flags, count, payload):
        ref = len(self.out)
        self.out += b'AAAA' + bytes([flags]) + count.to_bytes(3, 'big') + payload
        self.out += bytes(-len(self.out) % 8)
        return ref

    @staticmethod
    def width_for(values, unsigned=False):
        lo, hi = min(values, default=0), max(values, default=0)
        if lo >= 0:
            for w in (0, 1, 2, 4):
                if hi < (1 << w) or (w == 0 and hi == 0):
                    return w
        for w in (8, 16, 32, 64):
            if unsigned and lo >= 0 and hi < (1 << w):
                return w
            if -(1 << (w - 1)) <= lo and hi < (1 << (w - 1)):
                return w
        raise ValueError('value out of range')

    def ints(self, values, has_refs=False, inner=False, context=False, unsigned=False):
        w = self.width_for(values, unsigned)
        index = {0: 0, 1: 1, 2: 2, 4: 3, 8: 4, 16: 5, 32: 6, 64: 7}[w]
        flags = (0x80 if inner else 0) | (0x40 if has_refs else 0) | (0x20 if context else 0) | index
        if w < 8:
            payload = bytearray((len(values) * w + 7) // 8)
            for i, v in enumerate(values if w else []):
                payload[i * w // 8] |= v << (i * w % 8)
        else:
            fmt = {8: 'b', 16: 'h', 32: 'i', 64: 'q'}[w]
            if unsigned:
                fmt = fmt.upper()
            payload = struct.pack('<%d%s' % (len(values), fmt), *values)
        return self.node(flags, len(values), bytes(payload))

    def refs(self, items, inner=False, context=False):
        """A has-refs array: refs (even) and tagged ints, given as ('t', n)."""
        values = [(v[1] << 1 | 1) if isinstance(v, tuple) else v for v in items]
        return self.ints(values, has_refs=True, inner=inner, context=context)

    def doubles(self, values):
        return self.node(0x08 | 4, len(values), struct.pack('<%dd' % len(values), *values))

    def short_strings(self, strings):
        """ArrayStringShort: cells of a power-of-two width, the last byte the padding."""
        longest = max((len(s) for s in strings), default=0)
        width = 1
        while width < longest + 1:
            width *= 2
        index = {1: 1, 2: 2, 4: 3, 8: 4, 16: 5, 32: 6, 64: 7}[width]
        payload = bytearray()
        for s in strings:
            payload += s + bytes(width - 1 - len(s)) + bytes([width - 1 - len(s)])
        return self.node(0x08 | index, len(strings), bytes(payload))

    def medium_strings(self, strings):
        """ArraySmallBlobs: end offsets, one blob, null flags; each string ends in a zero byte."""
        blob = bytearray()
        ends, nulls = [], []
        for s in strings:
            if s is not None:
                blob += s.encode() + b'\0'
            ends.append(len(blob))
            nulls.append(1 if s is None else 0)
        return self.refs([self.ints(ends), self.node(0x10, len(blob), bytes(blob)), self.ints(nulls)])


def column_key(leaf, ctype, attrs, tag):
    return leaf | ctype << 16 | (attrs & 0xFF) << 22 | tag << 30


def cluster_tree(w, count, leaf_arrays):
    """The cluster tree of `count` objects with keys 0..count-1, compact: leaves of 256 objects,
    inner nodes of up to 256 children; `leaf_arrays(first, n)` writes a leaf's column leaves."""
    nodes = []
    for first in range(0, count, 256):
        n = min(256, count - first)
        nodes.append((w.refs([('t', n)] + leaf_arrays(first, n)), n))
    if not nodes:
        return w.refs([('t', 0)] + leaf_arrays(0, 0))
    depth = 1
    while len(nodes) > 1:
        parents = []
        for j in range(0, len(nodes), 256):
            children = nodes[j:j + 256]
            size = sum(n for _, n in children)
            parents.append((w.refs([0, ('t', depth), ('t', size)] + [ref for ref, _ in children], inner=True), size))
        nodes = parents
        depth += 1
    return nodes[0][0]


def make(items):
    w = Writer()
    owners = (items + OWNERS_PER - 1) // OWNERS_PER
    ITEM, OWNER = 0, 1
    NULL_TABLE = 0x7FFFFFFF
    NULLABLE, LIST = 16, 32
    # Item: leaf index → (name, type, attrs); backlinks after the public columns.
    item_cols = [('id', 0, 0), ('name', 2, 0), ('price', 10, 0), ('active', 1, 0), ('created', 8, 0),
                 ('note', 2, NULLABLE), ('count', 0, NULLABLE), ('owner', 12, NULLABLE), (None, 14, 0)]
    owner_cols = [('name', 2, 0), ('items', 13, LIST), (None, 14, 0)]
    item_keys = [column_key(i, t, a, 1 + i) for i, (_, t, a) in enumerate(item_cols)]
    owner_keys = [column_key(i, t, a, 16 + i) for i, (_, t, a) in enumerate(owner_cols)]
    owned = [[] for _ in range(owners)]
    for i in range(items):
        o = item_values(i)['owner']
        if o is not None:
            owned[o].append(i)

    def item_leaf(first, n):
        v = [item_values(i) for i in range(first, first + n)]
        counts = [x['count'] for x in v]
        sentinel = -(1 << 62)
        seconds = [x['created'][0] for x in v]
        return [
            w.ints([x['id'] for x in v]),
            w.medium_strings([x['name'] for x in v]),
            w.doubles([x['price'] for x in v]),
            w.ints([1 if x['active'] else 0 for x in v]),
            w.refs([w.ints([sentinel] + seconds), w.ints([x['created'][1] for x in v])]),
            w.medium_strings([x['note'] for x in v]),
            w.ints([sentinel] + [sentinel if c is None else c for c in counts]),
            w.ints([0 if x['owner'] is None else x['owner'] + 1 for x in v]),
            # the backlink from Owner.items: each owned item is in its owner's list once
            w.refs([0 if x['owner'] is None else ('t', x['owner']) for x in v]),
        ]

    def owner_leaf(first, n):
        names, lists, backs = [], [], []
        for o in range(first, first + n):
            names.append('owner-%05d' % o)
            keys = sorted(owned[o], reverse=True)
            lists.append(w.ints(keys) if keys else 0)
            # the backlink from Item.owner: the items that link here, in key order
            backs.append(w.ints(sorted(owned[o])) if len(keys) > 1 else ('t', keys[0]) if keys else 0)
        return [w.medium_strings(names), w.refs(lists), w.refs(backs)]

    def spec(cols, keys):
        return w.refs([w.ints([t for _, t, _ in cols]),
                       w.short_strings([n.encode() for n, _, _ in cols if n is not None]),
                       w.ints([a for _, _, a in cols]), 0, 0, w.ints(keys)])

    def table(key, cols, keys, root, targets, opposite, pk):
        return w.refs([spec(cols, keys), 0, root, ('t', key), w.refs([0] * len(cols)), ('t', len(cols)),
                       ('t', 0), w.ints(targets), w.ints(opposite), ('t', 0), 0, ('t', pk), ('t', 0)])

    item_root = cluster_tree(w, items, item_leaf)
    owner_root = cluster_tree(w, owners, owner_leaf)
    item_table = table(ITEM, item_cols, item_keys, item_root,
                       [NULL_TABLE] * 7 + [OWNER, OWNER], [0] * 7 + [owner_keys[2], owner_keys[1]], item_keys[0])
    owner_table = table(OWNER, owner_cols, owner_keys, owner_root,
                        [NULL_TABLE, ITEM, ITEM], [0, item_keys[8], item_keys[7]], owner_keys[0])
    names = w.short_strings([b'class_Item', b'class_Owner'])
    tables = w.refs([item_table, owner_table])
    top_at = len(w.out)
    size = top_at + 8 + 16   # three 32-bit elements, padded to 8 bytes
    top = w.refs([names, tables, ('t', size)])
    assert top == top_at and len(w.out) == size, (top, top_at, len(w.out), size)
    w.out[0:24] = struct.pack('<QQ', top, 0) + b'T-DB' + bytes([23, 23, 0, 0])
    return bytes(w.out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--items', type=int, required=True)
    ap.add_argument('--key-file')
    a = ap.parse_args()
    data = make(a.items)
    if a.key_file:
        sys.path.insert(0, __file__.rsplit('/', 1)[0])
        dump = __import__('realm-dump')
        data = dump.encrypt(data, open(a.key_file, 'rb').read())
    open(a.out, 'wb').write(data)


if __name__ == '__main__':
    main()

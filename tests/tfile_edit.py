#!/usr/bin/env python3
"""A dtrain DTRTNS01 weights file, changed one way and written again with a valid checksum: the
bad inputs of the command-line tests that a damaged file cannot make (the checksum would refuse
it first). Usage: tfile_edit.py IN OUT EDIT...

  text NAME VALUE   the text record NAME (meta:model, meta:spec, ...) set to VALUE, added if absent
  drop NAME         record NAME removed
  dup NAME          record NAME written a second time
  value NAME X      the first value of tensor NAME made X (nan, inf, -inf, a number)
"""
import math
import struct
import sys
import zlib


def read(path):
    b = open(path, "rb").read()
    if b[:8] != b"DTRTNS01":
        sys.exit(f"{path}: not a DTRTNS01 file")
    (n,) = struct.unpack_from("<I", b, 8)
    o, recs = 12, []
    for _ in range(n):
        (nl,) = struct.unpack_from("<H", b, o)
        name = b[o + 2:o + 2 + nl]
        o += 2 + nl
        nd = b[o]
        dims = list(struct.unpack_from(f"<{nd}I", b, o + 1))
        o += 1 + 4 * nd
        size = 4 * math.prod(dims)
        recs.append([name, dims, b[o:o + size]])
        o += size
    return recs


def write(path, recs):
    out = b"DTRTNS01" + struct.pack("<I", len(recs))
    for name, dims, data in recs:
        out += struct.pack("<H", len(name)) + name + bytes([len(dims)]) + struct.pack(f"<{len(dims)}I", *dims) + data
    open(path, "wb").write(out + struct.pack("<I", zlib.crc32(out)))


ARITY = {"text": 2, "drop": 1, "dup": 1, "value": 2}


def main():
    src, dst, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    recs = read(src)
    named = lambda n: [r for r in recs if r[0] == n.encode()]
    while args:
        op = args[0]
        if op not in ARITY or len(args) <= ARITY[op]:
            sys.exit(f"bad edit: {' '.join(args)}")
        (name, *rest), args = args[1:1 + ARITY[op]], args[1 + ARITY[op]:]
        if op == "text":
            raw = rest[0].encode("utf-8", "surrogateescape")
            raw += b"\0" * (4 - len(raw) % 4)  # at least one NUL, a whole number of floats
            if not named(name):
                recs.append([name.encode(), [], b""])
            for r in named(name):
                r[1], r[2] = [len(raw) // 4], raw
        elif op == "drop":
            recs[:] = [r for r in recs if r[0] != name.encode()]
        elif op == "dup":
            recs.append(list(named(name)[0]))
        elif op == "value":
            r = named(name)[0]
            r[2] = struct.pack("<f", float(rest[0])) + r[2][4:]
    write(dst, recs)


main()

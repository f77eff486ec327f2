#!/usr/bin/env python3
"""Reads every GGUF written by XCheck with gguf-py's GGUFReader and compares with the .expected listing."""
import glob, hashlib, sys
import numpy as np
import gguf
from gguf import GGUFValueType as T

def canon(parts, i, t):
    if t == T.STRING:
        return bytes(parts[i + 1]).hex(), i + 2
    if t == T.ARRAY:
        et, n = T(int(parts[i][0])), int(parts[i + 1][0])
        i += 2
        out = []
        for _ in range(n):
            s, i = canon(parts, i, et)
            out.append(s)
        return "ARRAY<%s>[%s]" % (et.name, ",".join(out)), i
    v = parts[i][0]
    if t == T.FLOAT32:
        return "%x" % int(np.float32(v).view(np.uint32)), i + 1
    if t == T.FLOAT64:
        return "%x" % int(np.float64(v).view(np.uint64)), i + 1
    if t == T.BOOL:
        return ("true" if bool(v) else "false"), i + 1
    return str(int(v)), i + 1

files = sorted(glob.glob(sys.argv[1] + "/*.gguf"))
bad = 0
for f in files:
    r = gguf.GGUFReader(f)
    got = []
    for name, fld in r.fields.items():
        if name.startswith("GGUF."):
            continue
        t = T(int(fld.parts[2][0]))
        s, end = canon(fld.parts, 3, t)
        assert end == len(fld.parts), (f, name)
        got.append("kv %s %s %s" % (name.encode().hex(), t.name, s))
    got.append("data_offset %d" % r.data_offset)
    for t in r.tensors:
        got.append("tensor %s %s [%s] %s" % (t.name, t.tensor_type.name, ", ".join(str(int(x)) for x in t.shape),
                                             hashlib.sha256(t.data.tobytes()).hexdigest()))
    exp = open(f + ".expected", encoding="utf-8").read().splitlines()
    if got != exp:
        bad += 1
        print("MISMATCH", f)
        for a, b in zip(exp, got):
            if a != b:
                print("  ours   :", a[:200]); print("  gguf-py:", b[:200]); break
        print("  lengths", len(exp), len(got))
print("%d files read by gguf-py %s, %d mismatches" % (len(files), "0.19.0", bad))

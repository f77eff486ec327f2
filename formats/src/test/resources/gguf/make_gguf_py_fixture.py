#!/usr/bin/env python3
"""Writes gguf-py-fixture.gguf with gguf-py's own GGUFWriter (gguf 0.19.0, numpy 2.4).

The Java test GgufPyFixtureTest regenerates every value below from the same formulas, checks
that our reader reads each KV (type and value) and tensor (type, shape, bytes) exactly, and that
GgufWriter given the same content reproduces this file byte for byte.

    /work/pyenv/bin/python make_gguf_py_fixture.py gguf-py-fixture.gguf
"""
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as T, GGMLQuantizationType as Q

out = sys.argv[1] if len(sys.argv) > 1 else "gguf-py-fixture.gguf"
w = gguf.GGUFWriter(out, arch="fixture")          # general.architecture = "fixture" first
w.add_custom_alignment(64)                        # general.alignment UINT32 64
w.add_uint8("fx.u8", 200)
w.add_int8("fx.i8", -100)
w.add_uint16("fx.u16", 60000)
w.add_int16("fx.i16", -30000)
w.add_uint32("fx.u32", 4000000000)
w.add_int32("fx.i32", -2000000000)
w.add_uint64("fx.u64", 18000000000000000000)
w.add_int64("fx.i64", -9000000000000000000)
w.add_float32("fx.f32", 3.25)
w.add_float64("fx.f64", -1.0e300)
w.add_bool("fx.bool", True)
w.add_string("fx.str", "héllo \"wörld\"\n✓")
w.add_array("fx.arr_i32", [1, -2, 3])             # python ints -> INT32
w.add_array("fx.arr_f32", [0.5, -0.25, 1e-7])     # python floats -> FLOAT32
w.add_array("fx.arr_str", ["a", "", "日本"])
w.add_array("fx.arr_bool", [True, False, True])
w.add_array("fx.nested", [[1, 2], [3], ["x", "yz"]])  # ARRAY of ARRAY (INT32, INT32, STRING)
w.add_key_value("fx.arr_u8", [0, 1, 255], T.ARRAY, sub_type=T.UINT8)
w.add_key_value("fx.arr_i64", [-(2**63), 2**63 - 1], T.ARRAY, sub_type=T.INT64)
w.add_key_value("fx.arr_f64", [0.1, -2.5], T.ARRAY, sub_type=T.FLOAT64)

w.add_tensor("t.f32", (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3))
w.add_tensor("t.f16", (np.arange(32, dtype=np.float32) / 8 - 2).astype(np.float16).reshape(4, 8))
w.add_tensor("t.i8", np.arange(-8, 8, dtype=np.int8))
w.add_tensor("t.i16", (np.arange(8, dtype=np.int16) * -300).reshape(2, 2, 2))
w.add_tensor("t.i32", np.array([7, -70000, 2**31 - 1], dtype=np.int32))
w.add_tensor("t.i64", np.array([-(2**40), 2**62], dtype=np.int64))
w.add_tensor("t.f64", (np.arange(4, dtype=np.float64) / 3).reshape(2, 1, 1, 2))
# raw quantized blocks: byte i of the tensor is (i * 7 + 3) % 256 (Q8_0) / (i * 13 + 1) % 256 (Q4_K)
w.add_tensor("t.q8_0", (np.arange(2 * 34) * 7 + 3).astype(np.uint8).reshape(2, 34), raw_dtype=Q.Q8_0)
w.add_tensor("t.q4_k", (np.arange(144) * 13 + 1).astype(np.uint8).reshape(1, 144), raw_dtype=Q.Q4_K)
w.add_tensor("t.bf16", (np.arange(8, dtype=np.uint16) * 0x1111).reshape(2, 4), raw_dtype=Q.BF16)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

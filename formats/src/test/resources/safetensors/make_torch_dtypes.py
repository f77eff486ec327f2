"""Writes torch-dtypes.safetensors: inputs of every dtype StConvert decodes, and what torch makes of them.

For each dtype D: `in.D` holds test values stored as D, `out.D` holds `in.D.to(torch.float32)`
as computed by torch. 8-bit types cover all 256 bit patterns; F16 and BF16 cover every sign/exponent (all 256 high
bytes) with 8 low bytes each (edges 00 01 7f 80 fe ff and two random), 2048 patterns.
Run (once; the output is committed): /work/pyenv/bin/python make_torch_dtypes.py
Produced with torch 2.13.0+cpu, safetensors 0.8.0.
"""
import torch
from safetensors.torch import save_file

g = torch.Generator().manual_seed(1234)
t = {}


def add(name, x):
    t["in." + name] = x.clone().contiguous()
    t["out." + name] = x.to(torch.float32).clone().contiguous()


all8 = torch.arange(0, 256, dtype=torch.int32).to(torch.uint8)
low = torch.tensor([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, 0x35, 0xC9], dtype=torch.int32)
all16 = ((torch.arange(0, 256, dtype=torch.int32)[:, None] << 8) | low[None, :]).flatten()
all16 = torch.where(all16 >= 32768, all16 - 65536, all16).to(torch.int16)
for name, dt in [("F8_E4M3", torch.float8_e4m3fn), ("F8_E5M2", torch.float8_e5m2),
                 ("F8_E4M3FNUZ", torch.float8_e4m3fnuz), ("F8_E5M2FNUZ", torch.float8_e5m2fnuz),
                 ("F8_E8M0", torch.float8_e8m0fnu)]:
    add(name, all8.view(dt))
add("U8", all8)
add("I8", all8.view(torch.int8))
add("BOOL", torch.tensor([True, False, True, True, False]))
add("F16", all16.view(torch.float16))
add("BF16", all16.view(torch.bfloat16))

# Wider types: edge values (rounding ties, overflow to inf, subnormals) plus random ones.
f64 = [0.0, -0.0, 1.0, -1.5, float("inf"), float("-inf"), float("nan"), 1e-320, 1e-45, 7e-46, 1.4e-45,
       3.4028235677973366e38, 3.4028236e38, 1e39, -1e39, 1 + 2 ** -24, 1 + 3 * 2 ** -24, 1 + 2 ** -24 + 2 ** -60,
       2 ** -149, 2 ** -150, 3 * 2 ** -151, 0.1, 1 / 3]
add("F64", torch.cat([torch.tensor(f64, dtype=torch.float64),
                      torch.randn(200, generator=g, dtype=torch.float64) * 1e3]))
add("F32", torch.cat([torch.tensor([0.0, -0.0, 1.5, float("inf"), float("nan"), 1e-45], dtype=torch.float32),
                      torch.randn(50, generator=g)]))
add("I16", torch.tensor([-32768, -1, 0, 1, 32767], dtype=torch.int16))
add("U16", torch.tensor([0, 1, 32768, 65535], dtype=torch.int32).to(torch.uint16))
i32 = [-2 ** 31, 2 ** 31 - 1, 2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24) - 1, 16777217, 0, -1]
add("I32", torch.cat([torch.tensor(i32, dtype=torch.int32),
                      torch.randint(-2 ** 31, 2 ** 31 - 1, (100,), generator=g, dtype=torch.int32)]))
add("U32", torch.tensor([0, 2 ** 32 - 1, 2 ** 31, 2 ** 24 + 1, 2 ** 32 - 129, 2 ** 32 - 128], dtype=torch.int64).to(torch.uint32))
i64 = [-2 ** 63, 2 ** 63 - 1, 2 ** 53 + 1, 2 ** 40 + 2 ** 16 + 1, 2 ** 40 + 2 ** 16, 2 ** 40 + 3 * 2 ** 16, -(2 ** 62) - 1, 0]
add("I64", torch.cat([torch.tensor(i64, dtype=torch.int64),
                      torch.randint(-2 ** 63, 2 ** 63 - 1, (100,), generator=g, dtype=torch.int64)]))
u64 = [0, 2 ** 64 - 1, 2 ** 63, 2 ** 63 + 2 ** 39, 2 ** 63 + 2 ** 39 + 1, 2 ** 63 + 3 * 2 ** 39, 2 ** 64 - 2 ** 39]
add("U64", torch.tensor([x - 2 ** 64 if x >= 2 ** 63 else x for x in u64], dtype=torch.int64).view(torch.uint64))

save_file(t, "torch-dtypes.safetensors", metadata={"format": "pt", "source": "make_torch_dtypes.py"})

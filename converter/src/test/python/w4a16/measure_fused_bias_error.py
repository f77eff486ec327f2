#!/usr/bin/env python3
"""Measures what a TurboMind-style fused (s, -z*s) fp16 dequantization would cost on the shared golden
W4A16 checkpoints, against the integer-zero path the W4A16 layout is built for.

Per weight, exact = (q - z) * s in fp32 (what the bundle stores exactly). The integer-zero kernel
path computes (q - z) exactly in fp16 (hsub2 of magic-number halves) and rounds once at the multiply
by s. The fused path computes fma(q, s, b) in fp16 with b = fp16(-z * s) pre-rounded. Prints the
max |error| / scale and the rms error of both, and how often they differ.

Run: /work/pyenv/bin/python converter/src/test/python/w4a16/measure_fused_bias_error.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_w4a16_fixtures as fx  # noqa: E402


def main():
    root = os.path.join(fx.find_shared(), "golden/models")
    for case, (kind, group, off, sym) in fx.GOLDENS.items():
        t = fx.load(os.path.join(root, case, "model.safetensors"))
        worst, n, differ, se_fused, se_int = 0.0, 0, 0, 0.0, 0.0
        for m in fx.packed_modules(t):
            q, z, s, goc = fx.unpack_module(t, m, kind, 4, group, off, sym)
            scale, zero = s[:, goc].astype(np.float32), z[:, goc]
            exact = (q - zero).astype(np.float32) * scale
            integer = ((q - zero).astype(np.float16) * scale.astype(np.float16)).astype(np.float32)
            bias = (-(zero.astype(np.float32)) * scale).astype(np.float16).astype(np.float32)
            fused = (q.astype(np.float32) * scale + bias).astype(np.float16).astype(np.float32)
            worst = max(worst, float((np.abs(fused - exact) / scale).max()))
            differ += int((fused != integer).sum())
            n += exact.size
            se_fused += float(((fused - exact) ** 2).sum())
            se_int += float(((integer - exact) ** 2).sum())
        print(f"{case}: fused max |err|/scale {worst:.4f}, rms {np.sqrt(se_fused / n):.3e}; "
              f"integer-zero rms {np.sqrt(se_int / n):.3e}; the paths differ on {100 * differ / n:.1f}% of {n} weights")


if __name__ == "__main__":
    main()

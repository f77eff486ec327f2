#!/usr/bin/env python3
"""Tiny W4A16 fixture checkpoints and expected dequantized digests for the converter tests.

Writes, under converter/src/test/resources/w4a16/:
  fixtures/<name>/{config.json, [quantization_config.json], model.safetensors}
      one-layer llama checkpoints packed the way each library packs them (compressed-tensors
      pack-quantized, AutoRound auto_round / auto_round:gptqmodel, AutoAWQ GEMM, GPTQ v1 / v2),
      with the quirks that matter: bf16 scales, per-channel, several config groups, act-order
      g_idx with whole groups relabelled, GPTQ v1's zero 0 stored as -1, a quantized lm_head,
      modules kept dense by ignore / modules_to_not_convert / bits 16.
  digests.json
      per fixture and per shared golden checkpoint (../shared/golden/models, when present): for every
      packed module, the sha256 of its dequantized weight, float32 little-endian [N, K], each value
      (q - z) * s computed in float32 from the stored scale. Plus, for the goldens, how many values
      the fp16 dequantization compressed-tensors / auto-round run ((q - z) * s rounded to fp16)
      would change (informational).

The packers here are written from the formats' own definitions (compressed-tensors pack_to_int32,
AutoRound qlinear_torch(_zp), AutoAWQ order_map) and checked first against the known-answer words
of compressed-tensors' tests and the formats' documented words; the unpackers that compute the
digests read the written files back, independently of the generated arrays, and both must agree.

Run: /work/pyenv/bin/python converter/src/test/python/w4a16/make_w4a16_fixtures.py [--shared DIR]
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../../../../.."))
OUT = os.path.join(ROOT, "converter/src/test/resources/w4a16")

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]        # AutoAWQ order_map: nibble i holds column ORDER[i]


# ---------------------------------------------------------------- packers (numpy, uint codes)

def pack_along_last(codes, bits):
    """compressed-tensors pack_to_int32(packed_dim=1) of unsigned codes [R, C]: field c % per of word c // per."""
    per = 32 // bits
    r, c = codes.shape
    w = (c + per - 1) // per
    padded = np.zeros((r, w * per), dtype=np.uint64)
    padded[:, :c] = codes
    out = np.zeros((r, w), dtype=np.uint64)
    for f in range(per):
        out |= padded[:, f::per] << np.uint64(f * bits)
    return out.astype(np.uint32).view(np.int32)


def pack_ct_zero_points(zeros, bits):
    """pack_to_int32(packed_dim=0) of unsigned zeros [N, G]: field n % per of word [n // per, g]."""
    return np.ascontiguousarray(pack_along_last(zeros.T, bits).T)


def pack_gptq_qweight(codes, bits):
    """GPTQ qweight [K/per, N] of codes [N, K]: field k % per of word [k // per, n]."""
    return np.ascontiguousarray(pack_along_last(codes, bits).T)


def pack_gptq_qzeros(stored_zeros, bits):
    """GPTQ qzeros [G, N/per] of stored zeros [N, G] (already minus the v1 offset, masked)."""
    return pack_along_last(np.ascontiguousarray(stored_zeros.T), bits)


def pack_awq(values_rows_by_n):
    """AutoAWQ order: values [X, N] -> words [X, N/8], nibble i holds column 8w + AWQ_ORDER[i]."""
    x, n = values_rows_by_n.shape
    out = np.zeros((x, n // 8), dtype=np.uint64)
    v = values_rows_by_n.astype(np.uint64)
    for i, col in enumerate(AWQ_ORDER):
        out |= v[:, col::8] << np.uint64(4 * i)
    return out.astype(np.uint32).view(np.int32)


# ---------------------------------------------------------------- unpackers (read files back)

def fields(words, bits):
    """int32 words [..., W] -> unsigned fields [..., W * per] in field order."""
    per = 32 // bits
    u = words.view(np.uint32).astype(np.uint64)
    mask = np.uint64((1 << bits) - 1)
    parts = [(u >> np.uint64(f * bits)) & mask for f in range(per)]
    return np.stack(parts, axis=-1).reshape(*words.shape[:-1], words.shape[-1] * per).astype(np.int64)


def awq_fields(words):
    """AWQ words [X, N/8] -> values [X, N] in column order."""
    u = words.view(np.uint32).astype(np.uint64)
    x, w = words.shape
    out = np.zeros((x, w * 8), dtype=np.int64)
    for i, col in enumerate(AWQ_ORDER):
        out[:, col::8] = ((u >> np.uint64(4 * i)) & np.uint64(15)).astype(np.int64)
    return out


def dequant(q, z, s, group_of_col):
    """q [N, K], z and s [N, G] (float32 s), group_of_col [K] -> float32 (q - z) * s."""
    g = np.asarray(group_of_col)
    return ((q - z[:, g]).astype(np.float32) * s[:, g].astype(np.float32)).astype(np.float32)


def fp16_rounded(q, z, s, group_of_col):
    """What a dequantization in fp16 (compressed-tensors, auto-round torch kernels) gives."""
    g = np.asarray(group_of_col)
    return ((q - z[:, g]).astype(np.float16) * s[:, g].astype(np.float16)).astype(np.float32)


def load(path):
    out = {}
    with safe_open(path, framework="pt") as f:
        for k in f.keys():
            t = f.get_tensor(k)
            out[k] = t.float().numpy() if t.dtype in (torch.bfloat16, torch.float16) else t.numpy()
    return out


def unpack_module(t, module, kind, bits, group, zero_offset=0, symmetric=False):
    """Returns (q, z, s, group_of_col) of a packed module read from tensors t."""
    if kind == "ct":
        n, k = (int(x) for x in t[module + ".weight_shape"])
        q = fields(t[module + ".weight_packed"], bits)[:, :k]
        s = t[module + ".weight_scale"].astype(np.float32)
        if module + ".weight_zero_point" in t:
            z = fields(np.ascontiguousarray(t[module + ".weight_zero_point"].T), bits)[:, :n].T
        else:
            z = np.full(s.shape, 1 << (bits - 1), dtype=np.int64)
        gi = t.get(module + ".weight_g_idx")
    elif kind == "gptq":
        qw = t[module + ".qweight"]
        q = fields(np.ascontiguousarray(qw.T), bits)           # [N, K]
        s = t[module + ".scales"].astype(np.float32).T           # [N, G]
        z = fields(t[module + ".qzeros"], bits).T + zero_offset  # [N, G]
        gi = t.get(module + ".g_idx")
        k = q.shape[1]
    elif kind == "awq":
        q = awq_fields(t[module + ".qweight"]).T                 # [N, K]
        s = t[module + ".scales"].astype(np.float32).T
        z = awq_fields(t[module + ".qzeros"]).T
        gi = None
        k = q.shape[1]
    else:
        raise ValueError(kind)
    gsize = k if group <= 0 else group
    goc = np.asarray(gi, dtype=np.int64) if gi is not None else np.arange(k) // gsize
    if symmetric:
        assert (z == 1 << (bits - 1)).all(), module + ": symmetric but zero points are " + str(np.unique(z))
    return q.astype(np.int64), z.astype(np.int64), s, goc


def sha256_f32(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


# ---------------------------------------------------------------- known answers first

def check_known_answers():
    # compressed-tensors tests/test_compressors/test_pack_quant.py::test_pack_to_int32 (signed values + 2^(bits-1))
    def ct(bits, signed, want):
        codes = np.array(signed, dtype=np.int64) + (1 << (bits - 1))
        got = pack_along_last(codes, bits)
        assert got.tolist() == want, (bits, signed, got.tolist(), want)
        assert (fields(got, bits)[:, :codes.shape[1]] == codes).all()
    ct(4, [[1]], [[9]])
    ct(8, [[1]], [[129]])
    ct(4, [[1, 2, 3, 4]], [[52137]])
    ct(4, [[-8, -7, -6, -5, -4, -3, -2, -1]], [[1985229328]])
    ct(8, [[1, 2, 3, 4]], [[-2071756159]])
    ct(8, [[-128, -127, -126, -125]], [[50462976]])
    ct(4, [[-8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4]], [[1985229328, 52137]])
    ct(4, [[-8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, -8, -8, -8, -8], [1, 2, 3, 4, -8, -8, -8, -8, -8, -7, -6, -5, -4, -3, -2, -1]],
       [[1985229328, 52137], [52137, 1985229328]])
    ct(8, [[1, 2, 3, 4], [-128, -127, -126, -125]], [[-2071756159], [50462976]])
    # zero points along dim 0: the column [1, 2, 3, 4] packs like the row
    assert pack_ct_zero_points(np.array([[1], [2], [3], [4]]) + 8, 4).tolist() == [[52137]]
    # GPTQ: codes 1..8 down K for one column -> 0x87654321; symmetric v1 zeros 7 -> 0x77777777, v2 8 -> 0x88888888
    qw = pack_gptq_qweight(np.arange(1, 9).reshape(1, 8), 4)
    assert qw.view(np.uint32).tolist() == [[0x87654321]], qw
    assert pack_gptq_qzeros(np.full((8, 1), 7), 4).view(np.uint32).tolist() == [[0x77777777]]
    assert pack_gptq_qzeros(np.full((8, 1), 8), 4).view(np.uint32).tolist() == [[0x88888888]]
    # AutoAWQ: columns 0..7 with codes 0..7 -> 0x75316420
    assert pack_awq(np.arange(8).reshape(1, 8)).view(np.uint32).tolist() == [[0x75316420]]
    assert (awq_fields(pack_awq(np.arange(8).reshape(1, 8))) == np.arange(8)).all()


# ---------------------------------------------------------------- fixtures

HIDDEN, FF, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 128, 128, 4, 2, 32, 32
LINEARS = [  # (module suffix, N, K)
    ("self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN),
    ("self_attn.k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
    ("self_attn.v_proj", KV_HEADS * HEAD_DIM, HIDDEN),
    ("self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM),
    ("mlp.gate_proj", FF, HIDDEN),
    ("mlp.up_proj", FF, HIDDEN),
    ("mlp.down_proj", HIDDEN, FF),
]


def llama_config(tied, quantization_config=None, dtype="float16"):
    c = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN, "intermediate_size": FF,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "num_hidden_layers": 1,
        "vocab_size": VOCAB, "rms_norm_eps": 1e-5, "max_position_embeddings": 256, "tie_word_embeddings": tied,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "torch_dtype": dtype,
    }
    if quantization_config is not None:
        c["quantization_config"] = quantization_config
    return c


def fp16_exact_scales(rng, shape, bf16=False):
    """Positive scales exact in fp16; with bf16, also exact in bf16 (8 significant bits, normal fp16 range)."""
    s = rng.uniform(2 ** -10, 2 ** -4, size=shape).astype(np.float16).astype(np.float32)
    if bf16:
        s = (s.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    return s


def group_labels(rng, k, group, order):
    g = np.arange(k) // group
    if order == "plain":
        return g
    if order == "permuted_groups":  # whole groups relabelled (static groups / group-aware reordering)
        labels = rng.permutation((k + group - 1) // group)
        return labels[g]
    raise ValueError(order)


class Fixture:
    def __init__(self, name, rng, dtype=torch.float16):
        self.name, self.rng, self.dtype = name, rng, dtype
        self.tensors = {}
        self.expected = {}   # module.weight -> float32 [N, K]

    def dense(self, name, shape, scale=0.05):
        self.tensors[name] = torch.from_numpy(self.rng.normal(0, scale, size=shape).astype(np.float32)).to(self.dtype)

    def common(self, lm_head=False):
        self.dense("model.embed_tokens.weight", (VOCAB, HIDDEN), 1.0)
        self.tensors["model.layers.0.input_layernorm.weight"] = torch.from_numpy(1 + self.rng.normal(0, 0.1, HIDDEN).astype(np.float32)).to(self.dtype)
        self.tensors["model.layers.0.post_attention_layernorm.weight"] = torch.from_numpy(1 + self.rng.normal(0, 0.1, HIDDEN).astype(np.float32)).to(self.dtype)
        self.tensors["model.norm.weight"] = torch.from_numpy(1 + self.rng.normal(0, 0.1, HIDDEN).astype(np.float32)).to(self.dtype)
        if lm_head:
            self.dense("lm_head.weight", (VOCAB, HIDDEN))

    def codes(self, n, k, bits=4):
        return self.rng.integers(0, 1 << bits, size=(n, k), dtype=np.int64)

    def ct(self, module, n, k, group, sym, order="plain", bf16=False):
        gs = k if group <= 0 else group
        q = self.codes(n, k)
        goc = group_labels(self.rng, k, gs, order)
        s = fp16_exact_scales(self.rng, (n, (k + gs - 1) // gs), bf16)
        z = np.full(s.shape, 8, dtype=np.int64) if sym else self.rng.integers(0, 16, size=s.shape)
        self.tensors[module + ".weight_packed"] = torch.from_numpy(pack_along_last(q, 4))
        self.tensors[module + ".weight_scale"] = torch.from_numpy(s).to(torch.bfloat16 if bf16 else torch.float16)
        self.tensors[module + ".weight_shape"] = torch.tensor([n, k], dtype=torch.int64)
        if not sym:
            self.tensors[module + ".weight_zero_point"] = torch.from_numpy(pack_ct_zero_points(z, 4))
        if order != "plain":
            self.tensors[module + ".weight_g_idx"] = torch.from_numpy(goc.astype(np.int32))
        self.expected[module + ".weight"] = dequant(q, z, s, goc)

    def gptq(self, module, n, k, group, sym, zero_offset, order="plain", g_idx=False, zero_zero=False):
        q = self.codes(n, k)
        goc = group_labels(self.rng, k, group, order)
        s = fp16_exact_scales(self.rng, (n, k // group))
        if sym:
            z = np.full(s.shape, 8, dtype=np.int64)
        else:
            z = self.rng.integers(zero_offset, 16 + zero_offset, size=s.shape)
        if zero_zero:  # AutoGPTQ v1 packs a true zero 0 as -1: the field reads 15, +1 = 16 (what v1 kernels compute)
            z[0, 0] = 16
        stored = (z - zero_offset) & 15
        self.tensors[module + ".qweight"] = torch.from_numpy(pack_gptq_qweight(q, 4))
        self.tensors[module + ".qzeros"] = torch.from_numpy(pack_gptq_qzeros(stored, 4))
        self.tensors[module + ".scales"] = torch.from_numpy(np.ascontiguousarray(s.T)).to(torch.float16)
        if g_idx or order != "plain":
            self.tensors[module + ".g_idx"] = torch.from_numpy(goc.astype(np.int32))
        self.expected[module + ".weight"] = dequant(q, z, s, goc)

    def awq(self, module, n, k, group):
        q = self.codes(n, k)
        s = fp16_exact_scales(self.rng, (n, k // group))
        z = self.rng.integers(0, 16, size=s.shape)
        self.tensors[module + ".qweight"] = torch.from_numpy(pack_awq(np.ascontiguousarray(q.T)))
        self.tensors[module + ".qzeros"] = torch.from_numpy(pack_awq(np.ascontiguousarray(z.T)))
        self.tensors[module + ".scales"] = torch.from_numpy(np.ascontiguousarray(s.T)).to(torch.float16)
        self.expected[module + ".weight"] = dequant(q, z, s, np.arange(k) // group)

    def write(self, config, quantization_config_json=None):
        d = os.path.join(OUT, "fixtures", self.name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        if quantization_config_json is not None:
            with open(os.path.join(d, "quantization_config.json"), "w") as f:
                json.dump(quantization_config_json, f, indent=2)
        save_file({k: v.contiguous() for k, v in self.tensors.items()}, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        return d


def ct_group(targets, group_size, sym, strategy="group", actorder=None, zp_dtype=None):
    return {"targets": targets, "format": "pack-quantized", "input_activations": None, "output_activations": None,
            "weights": {"num_bits": 4, "type": "int", "symmetric": sym, "strategy": strategy,
                        "group_size": group_size, "actorder": actorder, "dynamic": False, "block_structure": None,
                        "observer": "minmax", "observer_kwargs": {}, "scale_dtype": None, "zp_dtype": zp_dtype}}


def ct_config(groups, ignore):
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "config_groups": groups, "ignore": ignore, "kv_cache_scheme": None, "sparsity_config": {}, "version": "0.13.0"}


def make_fixtures():
    fixtures = {}
    L = "model.layers.0."

    # 1. compressed-tensors g32 asymmetric, bf16 model with bf16 scales, lm_head kept dense (ignore)
    fx = Fixture("ct-g32-asym-bf16", np.random.default_rng(101), torch.bfloat16)
    fx.common(lm_head=True)
    for m, n, k in LINEARS:
        fx.ct(L + m, n, k, 32, sym=False, bf16=True)
    fx.write(llama_config(False, ct_config({"group_0": ct_group(["Linear"], 32, False, zp_dtype="torch.int8")}, ["lm_head"]), "bfloat16"))
    fixtures[fx.name] = fx

    # 2. compressed-tensors with two config groups: attention per-channel symmetric; mlp g64 symmetric with
    #    actorder "group" whose g_idx relabels whole groups; down_proj ignored by regex (dense fp16)
    fx = Fixture("ct-channel-and-actorder-g64", np.random.default_rng(102))
    fx.common()
    for m, n, k in LINEARS:
        if m.startswith("self_attn"):
            fx.ct(L + m, n, k, -1, sym=True)
        elif m == "mlp.down_proj":
            fx.dense(L + m + ".weight", (n, k))
        else:
            fx.ct(L + m, n, k, 64, sym=True, order="permuted_groups")
    fx.write(llama_config(True, ct_config({
        "group_0": ct_group(["re:.*self_attn.*"], None, True, strategy="channel"),
        "group_1": ct_group(["re:.*mlp.*"], 64, True, actorder="group"),
    }, ["lm_head", "re:.*down_proj$"])))
    fixtures[fx.name] = fx

    # 3. AutoRound "auto_round" packing (GPTQ layout, zero stored as is), g32 asym, down_proj kept at 16 bits,
    #    quantization_config.json beside config.json
    fx = Fixture("ar-auto_round-g32-asym", np.random.default_rng(103), torch.bfloat16)
    fx.common()
    for m, n, k in LINEARS:
        if m == "mlp.down_proj":
            fx.dense(L + m + ".weight", (n, k))
        else:
            fx.gptq(L + m, n, k, 32, sym=False, zero_offset=0)
    q = {"quant_method": "auto-round", "packing_format": "auto_round", "bits": 4, "group_size": 32, "sym": False,
         "data_type": "int", "block_name_to_quantize": "model.layers", "autoround_version": "0.15.0",
         "extra_config": {L + "mlp.down_proj": {"bits": 16}}}
    fx.write(llama_config(True, q, "bfloat16"), q)
    fixtures[fx.name] = fx

    # 4. AutoRound auto_round:gptqmodel (GPTQ v2, g_idx present), g64 symmetric
    fx = Fixture("ar-gptqmodel-g64-sym", np.random.default_rng(104))
    fx.common()
    for m, n, k in LINEARS:
        fx.gptq(L + m, n, k, 64, sym=True, zero_offset=0, g_idx=True)
    fx.write(llama_config(True, {"quant_method": "auto-round", "packing_format": "auto_round:gptqmodel", "bits": 4, "group_size": 64,
                                 "sym": True, "data_type": "int", "block_name_to_quantize": "model.layers"}))
    fixtures[fx.name] = fx

    # 5. AutoAWQ GEMM g64, down_proj not converted
    fx = Fixture("awq-gemm-g64", np.random.default_rng(105))
    fx.common()
    for m, n, k in LINEARS:
        if m == "mlp.down_proj":
            fx.dense(L + m + ".weight", (n, k))
        else:
            fx.awq(L + m, n, k, 64)
    fx.write(llama_config(True, {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True, "version": "gemm",
                                 "modules_to_not_convert": ["down_proj"]}))
    fixtures[fx.name] = fx

    # 6. GPTQ v1 desc_act with whole groups relabelled, g32 asymmetric, one zero 0 (stored -1 -> reads 16),
    #    quantized lm_head
    fx = Fixture("gptq-v1-desc_act-g32-asym", np.random.default_rng(106))
    fx.common()
    for m, n, k in LINEARS + [("lm_head", VOCAB, HIDDEN)]:
        module = m if m == "lm_head" else L + m
        fx.gptq(module, n, k, 32, sym=False, zero_offset=1, order="permuted_groups", zero_zero=(m == "mlp.up_proj"))
    fx.write(llama_config(False, {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True, "sym": False,
                                  "checkpoint_format": "gptq", "lm_head": True, "true_sequential": True}))
    fixtures[fx.name] = fx

    # 7. GPTQ v2 g128 symmetric (GPTQModel's format)
    fx = Fixture("gptq-v2-g128-sym", np.random.default_rng(107))
    fx.common()
    for m, n, k in LINEARS:
        fx.gptq(L + m, n, k, 128, sym=True, zero_offset=0)
    fx.write(llama_config(True, {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True,
                                 "checkpoint_format": "gptq_v2"}))
    fixtures[fx.name] = fx
    return fixtures


FIXTURE_SCHEMES = {  # how to read each fixture back: module suffix -> (kind, group, zero_offset, symmetric)
    "ct-g32-asym-bf16": lambda m: ("ct", 32, 0, False),
    "ct-channel-and-actorder-g64": lambda m: ("ct", -1, 0, True) if "self_attn" in m else ("ct", 64, 0, True),
    "ar-auto_round-g32-asym": lambda m: ("gptq", 32, 0, False),
    "ar-gptqmodel-g64-sym": lambda m: ("gptq", 64, 0, True),
    "awq-gemm-g64": lambda m: ("awq", 64, 0, False),
    "gptq-v1-desc_act-g32-asym": lambda m: ("gptq", 32, 1, False),
    "gptq-v2-g128-sym": lambda m: ("gptq", 128, 0, True),
}

GOLDENS = {  # shared/golden/models case -> (kind, group, zero_offset, symmetric)
    "llama/ct-w4a16-g128-sym": ("ct", 128, 0, True),
    "granite/ct-w4a16-g32-asym": ("ct", 32, 0, False),
    "qwen35/ct-w4a16-g128-sym": ("ct", 128, 0, True),
    "llama/ar-w4g32-asym": ("awq", 32, 0, False),
    "qwen3/ar-w4g128-sym": ("gptq", 128, 1, True),
}


def packed_modules(t):
    mods = []
    for k in t:
        for suffix in (".weight_packed", ".qweight"):
            if k.endswith(suffix):
                mods.append(k[: -len(suffix)])
    return sorted(mods)


def find_shared():
    """shared/ beside the checkout or one of its parents, as SharedGolden.java looks for it."""
    d = ROOT
    while True:
        for cand in (os.path.join(d, "shared"), os.path.join(os.path.dirname(d), "shared")):
            if os.path.isdir(os.path.join(cand, "golden")):
                return cand
        if os.path.dirname(d) == d:
            return os.path.join(ROOT, "../shared")
        d = os.path.dirname(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=find_shared(), help="the team's shared folder (holds golden/models)")
    args = ap.parse_args()
    check_known_answers()
    digests = {"fixtures": {}, "goldens": {}}
    for name, fx in make_fixtures().items():
        t = load(os.path.join(OUT, "fixtures", name, "model.safetensors"))
        mods = packed_modules(t)
        assert sorted(m + ".weight" for m in mods) == sorted(fx.expected), (name, mods)
        d = {}
        for m in mods:
            kind, group, off, sym = FIXTURE_SCHEMES[name](m)
            got = dequant(*unpack_module(t, m, kind, 4, group, off, sym))
            want = fx.expected[m + ".weight"]
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (name, m)
            d[m + ".weight"] = sha256_f32(got)
        digests["fixtures"][name] = d
    golden_root = os.path.join(args.shared, "golden/models")
    if not os.path.isdir(golden_root):
        sys.exit("shared golden checkpoints not found at " + golden_root + " (pass --shared); digests.json not written")
    stats = {}
    for case, (kind, group, off, sym) in GOLDENS.items():
        t = load(os.path.join(golden_root, case, "model.safetensors"))
        d, changed, total = {}, 0, 0
        for m in packed_modules(t):
            q, z, s, goc = unpack_module(t, m, kind, 4, group, off, sym)
            exact = dequant(q, z, s, goc)
            d[m + ".weight"] = sha256_f32(exact)
            changed += int((fp16_rounded(q, z, s, goc) != exact).sum())
            total += exact.size
        digests["goldens"][case] = d
        stats[case] = {"modules": len(d), "values": total, "valuesFp16DequantRoundsDifferently": changed}
    digests["goldenFp16DequantStats"] = stats
    with open(os.path.join(OUT, "digests.json"), "w") as f:
        json.dump(digests, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(OUT) for fn in fns)
    print("wrote", OUT, total, "bytes")
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()

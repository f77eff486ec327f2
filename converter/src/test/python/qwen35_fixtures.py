#!/usr/bin/env python3
"""Tiny Qwen3.5 / Qwen3.5-MoE checkpoints for the qwen35 recipe tests, in HF form and in GGUF as
llama.cpp's convert_hf_to_gguf.py writes it.

The HF side is transformers' own Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM (random weights, every
norm non-zero so the +1 convention is visible), plus a random MTP block in the layout the published
checkpoints use (mtp.fc, mtp.pre_fc_norm_*, mtp.norm, mtp.layers.0.*). The GGUF side re-implements
the transforms of llama.cpp's conversion/qwen.py (Qwen3NextModel / _LinearAttentionVReorderBase /
_Qwen35MtpMixin / Qwen2MoeModel.modify_tensors) and conversion/base.py's type rules; run
`--check-golden DIR` to compare this script's output with the llama.cpp-written GGUFs in the shared
golden set (same keys, names, shapes, types, and values within bf16 + quantization noise).

K-quant files use a plain numpy encoder (below) checked against gguf-py's dequantizer.

Usage:
  python qwen35_fixtures.py OUT_DIR                 # writes the fixtures (converter/src/test/resources/qwen35)
  python qwen35_fixtures.py --check-golden GOLDEN   # GOLDEN = /work/shared/golden/models
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch
import gguf
from gguf.quants import quantize, dequantize
from safetensors.torch import save_file, load_file
from transformers import Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig

Q = gguf.GGMLQuantizationType

# ------------------------------------------------------------------------------------------- models

TINY = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=4, linear_value_head_dim=4)
TINY_MOE = dict(TINY, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=4, shared_expert_intermediate_size=4)
# Q8_0-friendly: every matrix row is a multiple of 32; tp 4 cuts of ssm_out / attn_output / ffn_down
# land on Q8_0 blocks and value heads (32 columns) are whole Q8_0 blocks; ssm_out / attn_output /
# ffn_down rows are 256 long, one K-quant super-block spanning 8 value heads
SMALL = dict(vocab_size=32, hidden_size=32, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
             linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=8, linear_value_head_dim=32)
COMMON = dict(num_hidden_layers=4, layer_types=["linear_attention"] * 3 + ["full_attention"], linear_conv_kernel_dim=4,
              max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False,
              rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                                   mrope_interleaved=True))


def build(dims, moe, seed, mtp):
    """A transformers model with every parameter random, and its checkpoint tensors (HF names)."""
    torch.manual_seed(seed)
    kw = dict(COMMON, **dims)
    rot = int(kw["head_dim"] * 0.25)
    kw["rope_parameters"] = dict(kw["rope_parameters"], mrope_section=mrope_section(rot))
    cfg = (Qwen3_5MoeTextConfig if moe else Qwen3_5TextConfig)(**kw)
    model = (Qwen3_5MoeForCausalLM if moe else Qwen3_5ForCausalLM)(cfg).eval()
    tensors = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape) * (0.5 if p.ndim == 1 else 0.3))
            tensors[name] = p.detach().clone()
    if mtp:
        h = cfg.hidden_size
        full = cfg.layer_types.index("full_attention")
        tensors["mtp.fc.weight"] = torch.randn(h, 2 * h) * 0.3
        for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            tensors[f"mtp.{n}.weight"] = torch.randn(h) * 0.5
        for name, t in list(tensors.items()):   # an MTP layer is a full-attention decoder layer
            prefix = f"model.layers.{full}."
            if name.startswith(prefix):
                tensors["mtp.layers.0." + name[len(prefix):]] = torch.randn(t.shape) * (0.5 if t.ndim == 1 else 0.3)
    return cfg, tensors


def mrope_section(rotary):
    half = rotary // 2
    a = (half + 2) // 3
    b = (half - a + 1) // 2
    return [a, b, half - a - b]


def hf_config(cfg, moe, mtp, multimodal):
    text = json.loads(cfg.to_json_string(use_diff=False))
    text.pop("transformers_version", None)
    text["architectures"] = ["Qwen3_5MoeForCausalLM" if moe else "Qwen3_5ForCausalLM"]
    if mtp:
        text["mtp_num_hidden_layers"] = 1
    if not multimodal:
        return text
    text.pop("architectures")
    return {"architectures": ["Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"],
            "model_type": "qwen3_5_moe" if moe else "qwen3_5", "tie_word_embeddings": False,
            "text_config": text, "vision_config": {"model_type": "qwen3_5_vision", "depth": 1, "hidden_size": 8}}


def hf_tensors(tensors, moe_layout, multimodal, dtype):
    """Checkpoint names as published checkpoints spell them: experts fused or per expert, text under
    model.language_model. and a (fake, tiny) vision tower under model.visual. for multimodal ones."""
    out = {}
    for name, t in tensors.items():
        if moe_layout == "per-expert" and name.endswith("mlp.experts.gate_up_proj"):
            base = name[: -len("gate_up_proj")]
            i = t.shape[1] // 2
            for j in range(t.shape[0]):
                out[f"{base}{j}.gate_proj.weight"] = t[j, :i]
                out[f"{base}{j}.up_proj.weight"] = t[j, i:]
            continue
        if moe_layout == "per-expert" and name.endswith("mlp.experts.down_proj"):
            base = name[: -len("down_proj")]
            for j in range(t.shape[0]):
                out[f"{base}{j}.down_proj.weight"] = t[j]
            continue
        if multimodal and name.startswith("model."):
            name = "model.language_model." + name[len("model."):]
        out[name] = t
    if multimodal:
        g = torch.Generator().manual_seed(5)
        out["model.visual.patch_embed.proj.weight"] = torch.randn(8, 3, 2, 2, 2, generator=g)
        out["model.visual.blocks.0.norm1.weight"] = torch.randn(8, generator=g)
        out["model.visual.merger.linear_fc1.weight"] = torch.randn(16, 32, generator=g)
    return {k: v.to(dtype).contiguous() for k, v in out.items()}


def write_hf(dirpath, cfg_json, tensors):
    dirpath.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dirpath / "model.safetensors"), metadata={"format": "pt"})
    (dirpath / "config.json").write_text(json.dumps(cfg_json, indent=2) + "\n")

# ------------------------------------------------------------------ llama.cpp's conversion, re-done


def reorder_v_heads(t, dim, hk, rho, head_dim):
    """conversion/qwen.py _LinearAttentionVReorderBase._reorder_v_heads: grouped -> tiled."""
    shape = list(t.shape)
    t = t.reshape(*shape[:dim], hk, rho, head_dim, *shape[dim + 1:])
    perm = list(range(t.ndim))
    perm[dim], perm[dim + 1] = perm[dim + 1], perm[dim]
    return t.permute(*perm).contiguous().reshape(shape)


def llama_cpp_tensors(hf, hp):
    """(gguf name, float tensor) in llama.cpp's order and layout, from checkpoint tensors."""
    n_layers = hp["num_hidden_layers"]
    mtp_layers = hp.get("mtp_num_hidden_layers", 0) if any(k.startswith(("mtp.", "model.mtp.")) for k in hf) else 0
    arch = gguf.MODEL_ARCH.QWEN35MOE if hp.get("num_experts") else gguf.MODEL_ARCH.QWEN35
    tmap = gguf.get_tensor_name_map(arch, n_layers + mtp_layers)
    hk, hv = hp["linear_num_key_heads"], hp["linear_num_value_heads"]
    dk, dv = hp["linear_key_head_dim"], hp["linear_value_head_dim"]
    rho = hv // hk
    experts = {}
    out = []

    def emit(name, t):
        if name.endswith(("eh_proj.weight", "enorm.weight", "hnorm.weight", "shared_head.norm.weight")):
            bid = int(name.split(".")[2])
            role = name.split(".", 3)[3].replace("shared_head.norm", "shared_head_norm")
            out.append((f"blk.{bid}.nextn.{role}", t))
            return
        new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ValueError(f"cannot map {name}")
        out.append((new, t))

    for name, t in hf.items():
        if name.startswith("model.visual."):
            continue   # goes to the mmproj file
        if name.startswith("model.language_model."):
            name = "model." + name[len("model.language_model."):]
        if name.startswith("model.mtp."):
            name = name[len("model."):]
        if name.startswith("mtp."):   # _Qwen35MtpMixin.filter_tensors
            parts = name.split(".", 3)
            remap = {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm", "norm": "shared_head.norm"}
            if parts[1] == "layers":
                name = f"model.layers.{n_layers + int(parts[2])}.{parts[3]}"
            else:
                name = f"model.layers.{n_layers}.{remap[parts[1]]}.{name.split('.', 2)[2]}"
        if t.dtype not in (torch.float16, torch.float32):
            t = t.to(torch.float32)
        # _LinearAttentionVReorderBase.modify_tensors
        if hk != hv and "linear_attn." in name:
            if ".in_proj_qkv." in name:
                t = torch.cat([t[:2 * hk * dk], reorder_v_heads(t[2 * hk * dk:], 0, hk, rho, dv)], 0)
            elif ".in_proj_z." in name:
                t = reorder_v_heads(t, 0, hk, rho, dv)
            elif ".in_proj_b." in name or ".in_proj_a." in name:
                t = reorder_v_heads(t, 0, hk, rho, 1)
            elif ".A_log" in name or ".dt_bias" in name:
                t = reorder_v_heads(t.unsqueeze(-1), 0, hk, rho, 1).squeeze(-1)
            elif ".conv1d" in name:
                d = t.squeeze()
                t = torch.cat([d[:2 * hk * dk], reorder_v_heads(d[2 * hk * dk:], 0, hk, rho, dv)], 0)
            elif ".out_proj." in name:
                t = reorder_v_heads(t, 1, hk, rho, dv)
        # Qwen3NextModel.modify_tensors
        if name.endswith(".A_log"):
            t = -torch.exp(t)
        elif name.endswith(".dt_bias"):
            name = name.rpartition(".dt_bias")[0] + ".dt_proj.bias"
        elif "conv1d" in name:
            t = t.squeeze()
        elif name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            t = t + 1
        # Qwen2MoeModel.modify_tensors
        if name.endswith("mlp.experts.down_proj"):
            emit(name + ".weight", t)
            continue
        if name.endswith("mlp.experts.gate_up_proj"):
            i = t.shape[-2] // 2
            base = name[: -len(".gate_up_proj")]
            emit(base + ".gate_proj.weight", t[..., :i, :].contiguous())
            emit(base + ".up_proj.weight", t[..., i:, :].contiguous())
            continue
        if "experts" in name and "shared_expert" not in name:
            bid = int(name.split(".")[2])
            experts.setdefault(bid, {})[name] = t
            if len(experts[bid]) == hp["num_experts"] * 3:
                for w in ("down_proj", "gate_proj", "up_proj"):
                    stack = torch.stack([experts[bid][f"model.layers.{bid}.mlp.experts.{x}.{w}.weight"] for x in range(hp["num_experts"])])
                    emit(f"model.layers.{bid}.mlp.experts.{w}.weight", stack)
                del experts[bid]
            continue
        emit(name, t)
    if experts:
        raise ValueError(f"unprocessed experts in layers {sorted(experts)}")
    return arch, mtp_layers, out


F32_ALWAYS = ("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", "ssm_conv1d.weight")


def tensor_type(name, t, ftype, layer_k):
    """conversion/base.py prepare_tensors: vectors, norms, routers, conv and non-.weight tensors stay
    F32; Q8_0 falls back to F16 for rows that are not whole blocks. The K mix (ours, in the spirit of
    llama-quantize's fallbacks) puts a K type on every quantizable matrix whose rows are whole 256
    super-blocks and Q8_0 on the others."""
    if t.ndim <= 1 or name.endswith("_norm.weight") or name.endswith(F32_ALWAYS) or not name.endswith(".weight"):
        return Q.F32
    if ftype in (Q.F32, Q.F16):
        return ftype
    cols = t.shape[-1]
    if ftype == "kmix":
        bid = int(name.split(".")[1]) if name.startswith("blk.") else 0
        if cols % 256 == 0:
            return layer_k[bid % len(layer_k)]
        return Q.Q8_0 if cols % 32 == 0 else Q.F16
    return Q.Q8_0 if cols % 32 == 0 else Q.F16


def write_gguf(path, hf, hp, ftype, name="Qwen35", split_max_tensors=0, layer_k=(Q.Q4_K, Q.Q6_K)):
    arch, mtp_layers, tensors = llama_cpp_tensors(hf, hp)
    a = gguf.MODEL_ARCH_NAMES[arch]
    moe = arch == gguf.MODEL_ARCH.QWEN35MOE
    w = gguf.GGUFWriter(str(path), a, split_max_tensors=split_max_tensors)
    n = hp["num_hidden_layers"] + mtp_layers
    w.add_type("model")
    w.add_name(name)
    w.add_block_count(n)
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    if not moe:
        w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    w.add_head_count_kv(hp["num_key_value_heads"])
    rp = hp["rope_parameters"]
    w.add_rope_dimension_sections(list(rp["mrope_section"]) + [0])
    w.add_rope_freq_base(rp["rope_theta"])
    w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
    if moe:
        w.add_expert_count(hp["num_experts"])
        w.add_expert_used_count(hp["num_experts_per_tok"])
    w.add_key_length(hp["head_dim"])
    w.add_value_length(hp["head_dim"])
    file_type = {Q.F32: 0, Q.F16: 1, Q.Q8_0: 7, "kmix": 15}[ftype]
    w.add_file_type(file_type)
    if moe:
        w.add_expert_feed_forward_length(hp["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(hp["shared_expert_intermediate_size"])
    w.add_ssm_conv_kernel(hp["linear_conv_kernel_dim"])
    w.add_ssm_state_size(hp["linear_key_head_dim"])
    w.add_ssm_group_count(hp["linear_num_key_heads"])
    w.add_ssm_time_step_rank(hp["linear_num_value_heads"])
    w.add_ssm_inner_size(hp["linear_value_head_dim"] * hp["linear_num_value_heads"])
    w.add_array(f"{a}.attention.recurrent_layers", [t == "linear_attention" for t in hp["layer_types"]])
    w.add_full_attention_interval(4)
    w.add_rope_dimension_count(int(hp["head_dim"] * rp["partial_rotary_factor"]))
    if mtp_layers:
        w.add_nextn_predict_layers(mtp_layers)
    if ftype != Q.F32 and ftype != Q.F16:
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    types = {}
    for tname, t in tensors:
        qt = tensor_type(tname, t, ftype, layer_k)
        data = t.to(torch.float32).numpy()
        if qt == Q.F32:
            w.add_tensor(tname, data.astype(np.float32))
        elif qt == Q.F16:
            w.add_tensor(tname, data.astype(np.float16))
        else:
            raw = quantize(data, qt) if qt == Q.Q8_0 else kquantize(data, qt)
            w.add_tensor(tname, raw, raw_dtype=qt)
        types[tname] = qt.name
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return types

# ------------------------------------------------------------------------ K-quant numpy encoders


def kquantize(x, qt):
    rows = x.reshape(-1, 256).astype(np.float32)
    blocks = np.stack([q6_k_block(r) if qt == Q.Q6_K else q4_k_block(r) for r in rows])
    out = blocks.reshape(*x.shape[:-1], x.shape[-1] // 256 * blocks.shape[-1])
    back = dequantize(out, qt).reshape(x.shape)   # gguf-py's dequantizer is the judge
    err = np.abs(back - x).max()
    limit = np.abs(x).max() * (0.02 if qt == Q.Q6_K else 0.09)
    if err > limit:
        raise AssertionError(f"{qt.name} encoder error {err} > {limit}")
    return out


def q6_k_block(x):
    """block_q6_K: ql[128], qh[64], scales int8[16], d fp16; y = d * sc[e/16] * (q - 32)."""
    sub = x.reshape(16, 16)
    amax = np.abs(sub).max(axis=1)
    scale = amax / 31.0
    d = np.float16(scale.max() / 127.0) if scale.max() > 0 else np.float16(0)
    sc = np.clip(np.round(scale / np.float32(d)), -128, 127).astype(np.int8) if d != 0 else np.zeros(16, np.int8)
    q = np.zeros((16, 16), np.int32)
    for j in range(16):
        s = np.float32(d) * sc[j]
        if s != 0:
            q[j] = np.clip(np.round(sub[j] / s), -32, 31)
    q = (q.reshape(256) + 32).astype(np.uint8)
    ql = np.zeros(128, np.uint8)
    qh = np.zeros(64, np.uint8)
    for n in range(2):
        b = 128 * n
        for l in range(32):
            ql[64 * n + l] = (q[b + l] & 0xF) | ((q[b + l + 64] & 0xF) << 4)
            ql[64 * n + l + 32] = (q[b + l + 32] & 0xF) | ((q[b + l + 96] & 0xF) << 4)
            qh[32 * n + l] = (q[b + l] >> 4) | ((q[b + l + 32] >> 4) << 2) | ((q[b + l + 64] >> 4) << 4) | ((q[b + l + 96] >> 4) << 6)
    return np.concatenate([ql, qh, sc.view(np.uint8), np.array([d], np.float16).view(np.uint8)])


def q4_k_block(x):
    """block_q4_K: d, dmin fp16, scales[12] (6-bit sc and m), qs[128]; y = d*sc*q - dmin*m per 32."""
    sub = x.reshape(8, 32)
    lo = np.minimum(sub.min(axis=1), 0)
    scale = (sub.max(axis=1) - lo) / 15.0
    mins = -lo
    d = np.float16(scale.max() / 63.0)
    dmin = np.float16(mins.max() / 63.0)
    sc = np.clip(np.round(scale / np.float32(d)), 0, 63).astype(np.uint8) if d != 0 else np.zeros(8, np.uint8)
    m = np.clip(np.round(mins / np.float32(dmin)), 0, 63).astype(np.uint8) if dmin != 0 else np.zeros(8, np.uint8)
    q = np.zeros((8, 32), np.uint8)
    for j in range(8):
        s = np.float32(d) * sc[j]
        if s != 0:
            q[j] = np.clip(np.round((sub[j] + np.float32(dmin) * m[j]) / s), 0, 15)
    scales = np.zeros(12, np.uint8)
    for j in range(4):
        scales[j] = sc[j] | ((sc[j + 4] >> 4) << 6)
        scales[j + 4] = m[j] | ((m[j + 4] >> 4) << 6)
        scales[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4)
    q = q.reshape(256)
    qs = np.zeros(128, np.uint8)
    for c in range(4):
        qs[32 * c:32 * c + 32] = q[64 * c:64 * c + 32] | (q[64 * c + 32:64 * c + 64] << 4)
    return np.concatenate([np.array([d, dmin], np.float16).view(np.uint8), scales, qs])

# ------------------------------------------------------------------------------------ fixtures


def fixtures(out):
    out.mkdir(parents=True, exist_ok=True)
    written = []
    # tiny dense: HF F32 (text-only CausalLM, MTP block), GGUF F32 and F16 (the F16 one split in two)
    cfg, t = build(TINY, moe=False, seed=11, mtp=True)
    hp = hf_config(cfg, moe=False, mtp=True, multimodal=False)
    hf = hf_tensors(t, None, False, torch.float32)
    write_hf(out / "tiny-dense-hf", hp, hf)
    write_gguf(out / "tiny-dense-f32.gguf", hf, hp, Q.F32)
    write_gguf(out / "tiny-dense-f16.gguf", hf, hp, Q.F16, split_max_tensors=40)
    written += ["tiny-dense-hf", "tiny-dense-f32.gguf", "tiny-dense-f16-0000{1,2}-of-00002.gguf"]
    # tiny MoE: multimodal wrapper, fused experts, vision tower, MTP block; GGUF F32 and F16
    cfg, t = build(TINY_MOE, moe=True, seed=12, mtp=True)
    hp_mm = hf_config(cfg, moe=True, mtp=True, multimodal=True)
    hf = hf_tensors(t, "fused", True, torch.float32)
    write_hf(out / "tiny-moe-hf", hp_mm, hf)
    hp = dict(hp_mm["text_config"])
    write_gguf(out / "tiny-moe-f32.gguf", hf, hp, Q.F32, name="Qwen35Moe")
    write_gguf(out / "tiny-moe-f16.gguf", hf, hp, Q.F16, name="Qwen35Moe")
    written += ["tiny-moe-hf", "tiny-moe-f32.gguf", "tiny-moe-f16.gguf"]
    # small dense: HF bf16 as published, GGUF Q8_0 and a K mix (Q4_K / Q6_K by layer parity)
    cfg, t = build(SMALL, moe=False, seed=13, mtp=False)
    hp = hf_config(cfg, moe=False, mtp=False, multimodal=False)
    hf = hf_tensors(t, None, False, torch.bfloat16)
    write_hf(out / "small-dense-hf", hp, hf)
    write_gguf(out / "small-dense-q8_0.gguf", hf, hp, Q.Q8_0)
    types = write_gguf(out / "small-dense-kmix.gguf", hf, hp, "kmix")
    written += ["small-dense-hf", "small-dense-q8_0.gguf", "small-dense-kmix.gguf"]
    print("K mix types:", {k: v for k, v in types.items() if v not in ("F32",)})
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {written} ({total} bytes)")

# ------------------------------------------------------------------ check against llama.cpp


def check_golden(golden):
    """This script's GGUF for the golden HF bf16 checkpoints vs the GGUF llama.cpp wrote from their
    float32 originals: same metadata (but general.*), names, order, shapes, types; values within
    bf16 rounding plus the file's quantization step."""
    ok = True
    for arch, files in (("qwen35", ["qwen35-q8_0.gguf", "qwen35-q6_k.gguf"]), ("qwen35moe", ["qwen35moe-q8_0.gguf"])):
        src = golden / arch / "hf-bfloat16"
        hp = json.loads((src / "config.json").read_text())
        hf = load_file(str(src / "model.safetensors"))
        _, _, ours = llama_cpp_tensors(hf, hp)
        ours = dict(ours)
        for fname in files:
            ref = gguf.GGUFReader(str(golden / arch / fname))
            ftype = Q.Q6_K if "q6_k" in fname else Q.Q8_0
            tmp = pathlib.Path("/tmp") / ("check-" + fname)
            write_gguf(tmp, hf, hp, ftype if ftype == Q.Q8_0 else "kmix", layer_k=(Q.Q6_K,))
            mine = gguf.GGUFReader(str(tmp))
            rk = {k: v.contents() for k, v in ref.fields.items() if not k.startswith(("general.", "GGUF.", "tokenizer."))}
            mk = {k: v.contents() for k, v in mine.fields.items() if not k.startswith(("general.", "GGUF.", "tokenizer."))}
            if set(rk) != set(mk):
                print(f"{fname}: keys differ: only llama.cpp {set(rk) - set(mk)}, only ours {set(mk) - set(rk)}")
                ok = False
            for k in rk:
                if k in mk and not close(rk[k], mk[k]):
                    print(f"{fname}: {k} = {rk[k]} (llama.cpp) vs {mk[k]} (ours)")
                    ok = False
            rnames = [t.name for t in ref.tensors]
            if sorted(rnames) != sorted(t.name for t in mine.tensors):
                print(f"{fname}: tensor names differ")
                ok = False
            mt = {t.name: t for t in mine.tensors}
            worst = 0.0
            for t in ref.tensors:
                m = mt[t.name]
                if list(t.shape) != list(m.shape) or t.tensor_type != m.tensor_type:
                    print(f"{fname}: {t.name} {t.tensor_type.name}{list(t.shape)} (llama.cpp) vs {m.tensor_type.name}{list(m.shape)} (ours)")
                    ok = False
                    continue
                shape = [int(x) for x in reversed(t.shape)]
                theirs = dequantize(t.data, t.tensor_type).reshape(shape)
                exact = ours[t.name].to(torch.float32).numpy().reshape(shape)
                amax = np.abs(exact).max()
                step = {Q.F32: 0, Q.Q8_0: 1 / 127, Q.Q6_K: 1 / 31}[t.tensor_type]
                tol = amax * (2 ** -8 + step)   # bf16 rounding of the HF copy + half a step each way
                diff = np.abs(theirs - exact).max()
                worst = max(worst, diff / max(amax, 1e-30))
                if diff > tol:
                    print(f"{fname}: {t.name} differs by {diff} > {tol}")
                    ok = False
            print(f"{fname}: {len(rnames)} tensors, {len(rk)} keys checked, worst relative difference {worst:.4g}")
    return ok


def close(a, b):
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-6 * max(1.0, abs(a))
    return a == b


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--check-golden")
    args = ap.parse_args()
    if args.check_golden:
        sys.exit(0 if check_golden(pathlib.Path(args.check_golden)) else 1)
    fixtures(pathlib.Path(args.out))

#!/usr/bin/env python3
# Baseline for docs/BENCHMARKS.md: Hugging Face transformers' EAGER forward speed for a full-size Llama
# (LlamaForCausalLM), Qwen3.6-35B-A3B-shaped MoE (Qwen3_5MoeForCausalLM) or Qwen3.5-27B-shaped dense hybrid
# (Qwen3_5ForCausalLM; both with their Gated-DeltaNet in transformers' torch form, fla absent), attn_implementation="eager", random weights, no download, no network, measured the
# way our CUDA bench (`v100-run bench BUNDLE --backend cuda`, CudaBench.java) measures ours, so the two
# tables can stand side by side:
#   prefill N tokens   N random tokens from position 0 at batch 1 (one forward, use_cache=True, the last
#                      token's logits only, as generate() asks), median of 3 timed runs after 1 warm-up
#   decode batch B     prefill --start random tokens for B sequences (DynamicCache), --decode-warmup
#                      untimed greedy steps, then --decode-steps timed single-token steps feeding each
#                      sequence's argmax back; every step reads the tokens back to the host (as our bench
#                      reads the logits back). tok/s per sequence, aggregate tok/s (B x steps / time), ms/step
#   roofline           weight bytes x steps/s; and, like our bench, (weights but the embedding table + the
#                      K and V of the mean cached length of every sequence) x steps/s over the device-copy
#                      bandwidth (read + write) measured in the same run (ours also counts the hybrids'
#                      Gated-DeltaNet state, 1-3 % of a step's bytes; this one does not)
# It runs ON the GPU machine (python3 with torch + transformers there), launched through the device tool the
# same way as tools/device/run.sh, e.g. command:
#   python3 tools/device/hf_eager_bench.py --geometry llama8B            (fp16 on cuda, about a minute)
#   python3 tools/device/hf_eager_bench.py --geometry llama1B --batches 1,8
# Local smoke test (CPU):
#   python3 tools/device/hf_eager_bench.py --geometry tiny --device cpu --dtype float32 --prefill 64 \
#       --decode-steps 8 --batches 1,2 --start 32
#   python3 tools/device/hf_eager_bench.py --geometry qwen35moe-tiny --device cpu --dtype float32 --prefill 64 \
#       --decode-steps 8 --batches 1,2 --start 32
#   (and qwen35-tiny, the dense hybrid)
# Options: --geometry llama8B|llama1B|tiny|qwen36-35B-A3B|qwen35moe-tiny|qwen35-27B|qwen35-tiny, --device cuda|cpu, --dtype float16|bfloat16|float32,
# --prefill 512,4096, --decode-steps 64, --decode-warmup 8, --batches 1,8, --start 512, --seed 7.
# A measurement that runs out of memory or past max_position_embeddings is printed as "skipped: ...".
import argparse
import gc
import os
import platform
import statistics
import sys
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

# the hybrid MoE family (Qwen3.5/3.6-MoE: Gated-DeltaNet and gated attention layers, routed + shared experts); an
# older transformers without it still runs the llama geometries
try:
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig, Qwen3_5ForCausalLM, Qwen3_5TextConfig
except ImportError:  # pragma: no cover
    Qwen3_5MoeForCausalLM = Qwen3_5MoeTextConfig = Qwen3_5ForCausalLM = Qwen3_5TextConfig = None

# geometries of the hybrid MoE family (Qwen3_5MoeTextConfig keyword arguments); the rest are Llama's
MOE_GEOMETRIES = {
    # Qwen3.6-35B-A3B: transformers' own defaults for Qwen3_5MoeTextConfig are that model's geometry (hidden 2048,
    # 40 layers three GDN to one attention, 16/2 heads of 256, GDN 16/32 heads of 128, 256 experts top-8 of 512 + a
    # shared 512, vocab 248320), like our synthetic qwen36-35B-A3B bench bundles
    "qwen36-35B-A3B": dict(),
    # quick CPU smoke test of the same architecture
    "qwen35moe-tiny": dict(vocab_size=512, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=32, linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=32,
                           linear_value_head_dim=32, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
                           shared_expert_intermediate_size=64, max_position_embeddings=2048,
                           layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"]),
}

# geometries of the dense hybrid (Qwen3_5TextConfig keyword arguments: Gated-DeltaNet and gated attention, a SwiGLU MLP)
HYBRID_GEOMETRIES = {
    # Qwen3.5-27B / Qwen3.6-27B: hidden 5120, 64 layers three GDN to one attention, MLP 17408, 24/4 heads of 256 (rotary
    # a quarter), GDN 16/48 heads of 128, vocab 248320, untied head: our synthetic qwen35-27B bench bundles
    "qwen35-27B": dict(vocab_size=248320, hidden_size=5120, num_hidden_layers=64, intermediate_size=17408, num_attention_heads=24,
                       num_key_value_heads=4, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=48,
                       linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4, tie_word_embeddings=False,
                       max_position_embeddings=262144),
    # quick CPU smoke test of the same architecture
    "qwen35-tiny": dict(vocab_size=512, hidden_size=128, num_hidden_layers=4, intermediate_size=256, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=32, linear_num_key_heads=4, linear_num_value_heads=12, linear_key_head_dim=32,
                        linear_value_head_dim=32, max_position_embeddings=2048,
                        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"]),
}

GEOMETRIES = {
    # Llama-3.2-1B geometry, untied lm_head (like our synthetic llama1B bench bundles)
    "llama1B": dict(vocab_size=128256, hidden_size=2048, num_hidden_layers=16, intermediate_size=8192,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=64, rope_theta=500000.0,
                    max_position_embeddings=131072, tie_word_embeddings=False),
    # Llama-3.1-8B geometry
    "llama8B": dict(vocab_size=128256, hidden_size=4096, num_hidden_layers=32, intermediate_size=14336,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=128, rope_theta=500000.0,
                    max_position_embeddings=131072, tie_word_embeddings=False),
    # quick CPU smoke test
    "tiny": dict(vocab_size=512, hidden_size=256, num_hidden_layers=2, intermediate_size=512,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64, rope_theta=500000.0,
                 max_position_embeddings=2048, tie_word_embeddings=False),
}

DTYPES = {"float16": torch.float16, "fp16": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float32": torch.float32, "fp32": torch.float32}

OOM_ERRORS = tuple({getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), torch.cuda.OutOfMemoryError})


def int_list(s):
    return [int(x) for x in s.split(",") if x.strip()]


def is_oom(e):
    return isinstance(e, OOM_ERRORS) or (isinstance(e, RuntimeError) and "out of memory" in str(e).lower()) \
        or (isinstance(e, RuntimeError) and "can't allocate memory" in str(e).lower())


def free_memory(dev):
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def make_config(geometry, dtype):
    if geometry in MOE_GEOMETRIES or geometry in HYBRID_GEOMETRIES:
        if Qwen3_5MoeTextConfig is None:
            raise SystemExit(f"{geometry}: this transformers ({transformers.__version__}) has no Qwen3_5MoeForCausalLM / Qwen3_5ForCausalLM")
        if geometry in MOE_GEOMETRIES:
            cfg = Qwen3_5MoeTextConfig(**MOE_GEOMETRIES[geometry], use_cache=True, attn_implementation="eager")
        else:
            cfg = Qwen3_5TextConfig(**HYBRID_GEOMETRIES[geometry], use_cache=True, attn_implementation="eager")
        cfg._attn_implementation = "eager"
        cfg.dtype = dtype
        return cfg
    g = dict(GEOMETRIES[geometry])
    # keep the rope parameters in the form this transformers version expects: v5 reads rope_parameters,
    # older versions rope_theta; passing rope_theta works for both (v5 folds it into rope_parameters)
    cfg = LlamaConfig(**g, hidden_act="silu", rms_norm_eps=1e-5, attention_bias=False, mlp_bias=False,
                      bos_token_id=128000 if g["vocab_size"] > 128000 else 1,
                      eos_token_id=128001 if g["vocab_size"] > 128001 else 2,
                      use_cache=True, attn_implementation="eager")
    cfg._attn_implementation = "eager"
    cfg.dtype = dtype
    return cfg


def build_model(cfg, dev, dtype):
    """Random weights made directly on the device in the dtype: no CPU init of billions of parameters."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(dev):
            model = Qwen3_5MoeForCausalLM(cfg) if is_moe(cfg) else Qwen3_5ForCausalLM(cfg) if is_hybrid(cfg) else LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    # no model.to(dtype): that would also cast the float32 RoPE inv_freq buffers (from_pretrained keeps them fp32)
    stray = [n for n, p in model.named_parameters() if p.dtype != dtype or p.device.type != dev.type]
    if stray:
        raise RuntimeError(f"parameters not made as {dtype} on {dev}: {stray[:5]}")
    model.eval()
    model.config._attn_implementation = "eager"
    return model


def is_moe(cfg):
    return getattr(cfg, "num_experts", 0) > 0


def is_hybrid(cfg):
    """The Qwen3.5 family (dense or MoE): Gated-DeltaNet layers beside full attention."""
    return getattr(cfg, "layer_types", None) is not None and "linear_attention" in cfg.layer_types


def full_attention_layers(cfg):
    """Layers with a KV cache: every layer of a Llama, the full-attention ones of the hybrid family."""
    types = getattr(cfg, "layer_types", None)
    return sum(1 for t in types if t == "full_attention") if types else cfg.num_hidden_layers


def routed_expert_bytes(model):
    """Bytes of the routed experts' weights (a decode row reads num_experts_per_tok of num_experts of them a layer)."""
    return sum(p.numel() * p.element_size() for n, p in model.named_parameters() if ".mlp.experts." in n)


def device_copy_gbps(dev, iters=10):
    """Device-to-device copy, (bytes read + bytes written) / time, like our bench's 'device copy bandwidth'."""
    free, _ = torch.cuda.mem_get_info(dev)
    n = max(16 << 20, min(1 << 30, free // 8))
    a = torch.empty(n, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    b.copy_(a)
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(iters):
        b.copy_(a)
    sync(dev)
    s = time.perf_counter() - t0
    del a, b
    free_memory(dev)
    return 2.0 * n * iters / s / 1e9, n


def main():
    ap = argparse.ArgumentParser(description="transformers eager Llama forward speed, random weights")
    ap.add_argument("--geometry", required=True, choices=sorted(GEOMETRIES) + sorted(MOE_GEOMETRIES) + sorted(HYBRID_GEOMETRIES))
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="float16", choices=sorted(DTYPES))
    ap.add_argument("--prefill", type=int_list, default=[512, 4096])
    ap.add_argument("--decode-steps", type=int, default=64)
    ap.add_argument("--decode-warmup", type=int, default=8)
    ap.add_argument("--batches", type=int_list, default=[1, 8])
    ap.add_argument("--start", type=int, default=512)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    t_script = time.perf_counter()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device visible to torch; use --device cpu", file=sys.stderr)
        return 2
    dev = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    dtype = DTYPES[args.dtype]
    torch.manual_seed(args.seed)

    print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}")
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        print(f"device: {torch.cuda.get_device_name(dev)} ({p.total_memory / 2**30:.1f} GiB, "
              f"CUDA {torch.version.cuda}, capability {p.major}.{p.minor})")
    else:
        print(f"device: cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)")

    table = {}
    cfg = make_config(args.geometry, dtype)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    try:
        model = build_model(cfg, dev, dtype)
        sync(dev)
    except Exception as e:  # noqa: BLE001
        if is_oom(e):
            print(f"model build ran out of memory: {e}", file=sys.stderr)
            return 3
        raise
    build_s = time.perf_counter() - t0
    attn = getattr(model.config, "_attn_implementation", None)
    n_params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())   # tied ones counted once
    embed = model.get_input_embeddings().weight
    decode_weight_bytes = weight_bytes - embed.numel() * embed.element_size()    # a step reads one row of it
    if is_moe(cfg):   # a decode row reads its top-k experts of a layer's (as our bench counts a MoE's step)
        experts = routed_expert_bytes(model)
        decode_weight_bytes -= experts - experts * cfg.num_experts_per_tok // cfg.num_experts
    kv_bytes_per_pos = 2 * full_attention_layers(cfg) * cfg.num_key_value_heads * cfg.head_dim * torch.tensor([], dtype=dtype).element_size()
    vocab, maxpos = cfg.vocab_size, cfg.max_position_embeddings
    if is_moe(cfg):
        print(f"model: Qwen3_5MoeForCausalLM ({args.geometry}), {cfg.num_hidden_layers} layers ({full_attention_layers(cfg)} full "
              f"attention), hidden {cfg.hidden_size}, {cfg.num_experts} experts top-{cfg.num_experts_per_tok} of "
              f"{cfg.moe_intermediate_size} + shared {cfg.shared_expert_intermediate_size}, heads {cfg.num_attention_heads}/"
              f"{cfg.num_key_value_heads} kv of {cfg.head_dim}, GDN {cfg.linear_num_key_heads}/{cfg.linear_num_value_heads} "
              f"heads, vocab {vocab}, max positions {maxpos}, {args.dtype}, attention {attn}")
    elif is_hybrid(cfg):
        print(f"model: Qwen3_5ForCausalLM ({args.geometry}), {cfg.num_hidden_layers} layers ({full_attention_layers(cfg)} full "
              f"attention), hidden {cfg.hidden_size}, intermediate {cfg.intermediate_size}, heads {cfg.num_attention_heads}/"
              f"{cfg.num_key_value_heads} kv of {cfg.head_dim}, GDN {cfg.linear_num_key_heads}/{cfg.linear_num_value_heads} "
              f"heads, vocab {vocab}, max positions {maxpos}, {args.dtype}, attention {attn}")
    else:
        print(f"model: LlamaForCausalLM ({args.geometry}), {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
              f"intermediate {cfg.intermediate_size}, heads {cfg.num_attention_heads}/{cfg.num_key_value_heads} kv, "
              f"head_dim {cfg.head_dim}, vocab {vocab}, max positions {maxpos}, {args.dtype}, attention {attn}")
    print(f"{n_params / 1e9:.3f} B parameters, {weight_bytes / 1e9:.3f} GB of weights "
          f"({decode_weight_bytes / 1e9:.3f} GB without the embedding table); built in {build_s:.2f} s")
    if attn != "eager":
        print(f"WARNING: attention implementation is {attn!r}, not 'eager'")
    table["weights"] = (f"{weight_bytes / 1e9:.3f} GB ({n_params / 1e9:.3f} B parameters, {args.dtype}; "
                        f"{decode_weight_bytes / 1e9:.3f} GB without the embedding table)")
    table["build"] = f"{build_s:.2f} s (random weights made on {dev.type}, attention {attn})"

    copy_bw = None
    if dev.type == "cuda":
        try:
            copy_bw, copy_n = device_copy_gbps(dev)
            table["device copy bandwidth"] = f"{copy_bw:.0f} GB/s (read + write, {copy_n >> 20} MiB buffers)"
        except Exception as e:  # noqa: BLE001
            if not is_oom(e):
                raise
            table["device copy bandwidth"] = "skipped: out of memory"
            free_memory(dev)

    gen = torch.Generator(device=dev).manual_seed(args.seed)

    def rand_tokens(b, n):
        return torch.randint(0, vocab, (b, n), generator=gen, device=dev)

    with torch.inference_mode():
        # prefill: batch 1, fresh cache each run, median of 3 after one warm-up
        for n in args.prefill:
            key = f"prefill {n} tokens"
            if n > maxpos:
                table[key] = f"skipped: {n} > max_position_embeddings {maxpos}"
                print(table[key])
                continue
            try:
                ids = rand_tokens(1, n)
                runs = []
                for r in range(4):
                    sync(dev)
                    p0 = time.perf_counter()
                    out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
                    sync(dev)
                    if r > 0:
                        runs.append(time.perf_counter() - p0)
                    del out
                s = statistics.median(runs)
                table[key] = f"{n / s:,.0f} tok/s ({s:.3f} s, median of {len(runs)})"
            except Exception as e:  # noqa: BLE001
                if not is_oom(e):
                    raise
                table[key] = f"skipped: out of memory ({str(e).splitlines()[0][:120]})"
                out = ids = None
                free_memory(dev)
            print(f"{key}: {table[key]}", flush=True)

        # decode: prefill --start tokens per sequence, warm-up steps, timed greedy steps
        steps, warm = args.decode_steps, args.decode_warmup
        for b in args.batches:
            key = f"decode batch {b}"
            last = args.start + warm + steps
            if args.start < 1 or steps < 1:
                table[key] = "skipped: --start and --decode-steps must be at least 1"
                continue
            if last > maxpos:
                table[key] = f"skipped: positions up to {last} > max_position_embeddings {maxpos}"
                print(table[key])
                continue
            cache = out = nxt = None
            try:
                out = model(input_ids=rand_tokens(b, args.start), use_cache=True, logits_to_keep=1)
                cache = out.past_key_values
                nxt = out.logits[:, -1, :].argmax(-1)
                del out
                for _ in range(warm):
                    out = model(input_ids=nxt[:, None], past_key_values=cache, use_cache=True, logits_to_keep=1)
                    nxt = out.logits[:, -1, :].argmax(-1)
                    nxt.tolist()
                    del out
                sync(dev)
                d0 = time.perf_counter()
                for _ in range(steps):
                    out = model(input_ids=nxt[:, None], past_key_values=cache, use_cache=True, logits_to_keep=1)
                    nxt = out.logits[:, -1, :].argmax(-1)
                    nxt.tolist()   # read the tokens back, as a generation loop (and our bench) does
                    del out
                sync(dev)
                ds = time.perf_counter() - d0
                cached = cache.get_seq_length() if hasattr(cache, "get_seq_length") else None
                sps = steps / ds
                first_pos = args.start + warm
                mean_pos = first_pos + (steps - 1) / 2.0 + 0.5   # mean number of cached positions read
                bytes_step = decode_weight_bytes + kv_bytes_per_pos * mean_pos * b
                achieved = bytes_step * sps / 1e9
                table[key] = (f"{sps:,.2f} tok/s per sequence, {b * sps:,.2f} tok/s aggregate "
                              f"({1000 * ds / steps:.2f} ms/step, {steps} steps at positions {first_pos}..{first_pos + steps - 1}"
                              f"{'' if cached is None else f', cache {type(cache).__name__} of {cached}'})")
                roof = f"{weight_bytes * sps / 1e9:,.1f} GB/s of weights (weight bytes x steps/s)"
                roof += (f"; {bytes_step / 1e9:.3f} GB per step = {decode_weight_bytes / 1e9:.3f} GB weights but embedding"
                         f" + {kv_bytes_per_pos * mean_pos * b / 1e9:.3f} GB KV: {achieved:,.1f} GB/s")
                if copy_bw:
                    roof += f", ratio {achieved / copy_bw:.3f} of {copy_bw:.0f} GB/s device copy"
                table[f"roofline, decode batch {b}"] = roof
            except Exception as e:  # noqa: BLE001
                if not is_oom(e):
                    raise
                table[key] = f"skipped: out of memory ({str(e).splitlines()[0][:120]})"
            finally:
                cache = out = nxt = None
                free_memory(dev)
            print(f"{key}: {table[key]}", flush=True)

    if dev.type == "cuda":
        table["peak GPU memory"] = f"{torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB allocated by torch"
    table["total wall time"] = f"{time.perf_counter() - t_script:.1f} s (after imports)"

    print()
    print(f"transformers {transformers.__version__} eager, {args.geometry}, {args.dtype}, {dev.type}"
          + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""))
    print()
    print("| metric | value |")
    print("|---|---|")
    for k, v in table.items():
        print(f"| {k} | {v} |")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

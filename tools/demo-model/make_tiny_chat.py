#!/usr/bin/env python3
"""Builds models/tiny-chat: a ~1 M parameter Qwen3 chat model trained from scratch on a generated corpus.

Steps (all seeded, one CPU thread):
1. corpus.documents(seed): template stories and ChatML chats about a tiny world (see corpus.py).
2. A byte-level BPE tokenizer shaped like Qwen2's (NFC, the Qwen2 split regex, ByteLevel without regex),
   special tokens <|endoftext|> <|im_start|> <|im_end|> appended after the BPE vocabulary.
3. A Qwen3ForCausalLM (hidden 128, 4 layers, 4 heads / 2 KV heads, head_dim 32, FFN 384, tied embeddings,
   vocab padded to a multiple of 64 as Qwen pads it) trained with AdamW on 256-token windows that start at
   document boundaries.
4. save_pretrained in bfloat16 (model.safetensors), tokenizer files, generation_config.json; then
   reference.json: for three prompts, transformers' greedy continuation of REFERENCE_NEW_TOKENS tokens
   computed in float32 from the saved bf16 weights (no EOS stop), with the top-1/top-2 logit margin of
   each step so a runtime test can tell a real divergence from a near-tie.

Usage: /work/pyenv/bin/python tools/demo-model/make_tiny_chat.py [--out models/tiny-chat] [--seed 1234] [--steps N]
       ... make_tiny_chat.py --reference-only   (rewrite reference.json from the weights already in --out)
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # tokenizers' trainer: the machine is shared
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers
import torch
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import GenerationConfig, Qwen2Tokenizer, Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
QWEN2_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIALS = [ENDOFTEXT, IM_START, IM_END]

# ChatML as Qwen writes it, without Qwen2's default system prompt and without tools / thinking
CHAT_TEMPLATE = (
    "{%- for message in messages %}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)

BPE_VOCAB = 1200          # BPE tokens incl. the 256 byte symbols; the 3 special tokens come after
VOCAB_PAD_MULTIPLE = 64   # embedding rows beyond the tokenizer, as Qwen checkpoints have them
OUTPUT_FILES = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                "chat_template.jinja", "reference.json"}
CORPUS_DOCS = 60000
VALID_DOCS = 500
SEQ_LEN = 256
BATCH = 16
PEAK_LR, MIN_LR, WARMUP = 3e-3, 3e-4, 100
REFERENCE_NEW_TOKENS = 32
# Prompts whose greedy path has no near-tie in its first REFERENCE_NEW_TOKENS steps (smallest top1-top2 logit
# margin about 0.1 or more), so a runtime that is right cannot flip a token by rounding; story requests in chat
# pick an adjective and a name among equals (margins near 0.005), so they are samples only.
REFERENCE_PROMPTS = [
    ("text", "There once was a brave girl named Lily. Lily wanted to ride a bike, but she could not."),
    ("chat", [{"role": "user", "content": "Can you count to ten?"}]),
    ("chat", [{"role": "user", "content": "What is the opposite of hot?"},
              {"role": "assistant", "content": "The opposite of hot is cold."},
              {"role": "user", "content": "Can a fish fly?"}]),
]
EXTRA_GREEDY_PROMPTS = [
    ("chat", [{"role": "user", "content": "What color is the sky?"}]),
    ("chat", [{"role": "user", "content": "Tell me a story about a cat."}]),
    ("text", "Once upon a time"),
]
SAMPLE_PROMPTS = [("text", "Once upon a time")] + [
    ("chat", [{"role": "user", "content": q}]) for q in
    ["What does a cow say?", "Tell me a story about a fox.", "Can a bird swim?", "What is two plus three?"]]


def render_chat(messages, add_generation_prompt=False):
    s = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return s + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def doc_text(doc):
    return doc if isinstance(doc, str) else render_chat(doc)


def build_tokenizer(texts):
    tok = Tokenizer(models.BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    special = re.compile("|".join(re.escape(s) for s in SPECIALS))
    # the trainer sees the text between special tokens; the specials are added whole afterwards
    tok.train_from_iterator((piece for t in texts for piece in special.split(t) if piece), trainer=trainer)
    spec = json.loads(tok.to_str())
    spec["model"].update(continuing_subword_prefix="", end_of_word_suffix="")  # the trainer nulls them; Qwen has ""
    spec["decoder"].update(add_prefix_space=False, trim_offsets=False, use_regex=False)  # as in Qwen2's tokenizer.json
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return tok


def save_tokenizer(tok, out):
    hf = Qwen2Tokenizer(tokenizer_object=tok, bos_token=None, eos_token=IM_END, pad_token=ENDOFTEXT, unk_token=None,
                        model_max_length=512, clean_up_tokenization_spaces=False, split_special_tokens=False)
    hf.chat_template = CHAT_TEMPLATE
    hf.save_pretrained(out)
    return hf


def windows(doc_ids, seq_len):
    """Flat token stream of documents (each followed by <|endoftext|>) and the offsets where one starts
    with at least seq_len + 1 tokens after it."""
    stream, starts = [], []
    for ids in doc_ids:
        starts.append(len(stream))
        stream.extend(ids)
    stream = torch.tensor(stream, dtype=torch.long)
    starts = torch.tensor([s for s in starts if s + seq_len + 1 <= len(stream)], dtype=torch.long)
    return stream, starts


def batch_at(stream, starts, idx, seq_len):
    rows = torch.stack([stream[s:s + seq_len + 1] for s in starts[idx].tolist()])
    return rows[:, :-1], rows[:, 1:]


def lr_at(step, steps):
    if step < WARMUP:
        return PEAK_LR * (step + 1) / WARMUP
    p = (step - WARMUP) / max(1, steps - WARMUP)
    return MIN_LR + 0.5 * (PEAK_LR - MIN_LR) * (1 + math.cos(math.pi * p))


@torch.no_grad()
def mean_loss(model, stream, starts, seq_len, n_batches):
    model.eval()
    total = 0.0
    for b in range(n_batches):
        idx = torch.arange(b * BATCH, (b + 1) * BATCH) % len(starts)
        x, y = batch_at(stream, starts, idx, seq_len)
        logits = model(input_ids=x).logits
        total += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    model.train()
    return total / n_batches


@torch.no_grad()
def greedy_reference(model, prompt_ids, new_tokens):
    """Full-recompute greedy decoding (no KV cache, no EOS stop); returns ids and each step's top1-top2 margin."""
    ids = list(prompt_ids)
    out, margins = [], []
    for _ in range(new_tokens):
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        top = torch.topk(logits, 2)
        nxt = int(top.indices[0])
        out.append(nxt)
        margins.append(round(float(top.values[0] - top.values[1]), 4))
        ids.append(nxt)
    return out, margins


def prompt_text(kind, p):
    return p if kind == "text" else render_chat(p, add_generation_prompt=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(REPO, "models", "tiny-chat"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=1100)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--reference-only", action="store_true",
                    help="skip training: rewrite reference.json and print the samples from the model already in --out")
    args = ap.parse_args()

    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.reference_only:
        write_reference_and_samples(args.out, args.seed)
        return
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    t_wall, t_cpu = time.time(), time.process_time()

    docs = corpus.documents(args.seed, CORPUS_DOCS)
    valid_docs = corpus.documents(args.seed + 1, VALID_DOCS)
    texts = [doc_text(d) for d in docs]
    tok = build_tokenizer(texts)
    eot, ims, ime = (tok.token_to_id(t) for t in SPECIALS)
    n_tok = tok.get_vocab_size(with_added_tokens=True)
    vocab_size = -(-n_tok // VOCAB_PAD_MULTIPLE) * VOCAB_PAD_MULTIPLE

    enc = lambda ts: [e.ids + [eot] for e in tok.encode_batch(ts)]  # noqa: E731
    stream, starts = windows(enc(texts), SEQ_LEN)
    v_stream, v_starts = windows(enc([doc_text(d) for d in valid_docs]), SEQ_LEN)
    print(f"tokenizer: {n_tok} tokens (BPE {n_tok - len(SPECIALS)} + {len(SPECIALS)} special), embedding rows {vocab_size}; "
          f"corpus {len(stream)} tokens in {len(docs)} docs, {len(starts)} window starts", flush=True)

    config = Qwen3Config(
        vocab_size=vocab_size, hidden_size=128, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, hidden_act="silu", max_position_embeddings=512, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True,
        attention_bias=False, use_sliding_window=False, bos_token_id=eot, eos_token_id=ime, pad_token_id=eot,
    )
    model = Qwen3ForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=PEAK_LR, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)
    model.train()
    recent = []
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps)
        idx = torch.randint(len(starts), (BATCH,), generator=gen)
        x, y = batch_at(stream, starts, idx, SEQ_LEN)
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        recent = (recent + [loss.item()])[-50:]
        if step % args.log_every == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  avg50 {sum(recent) / len(recent):.4f}  lr {lr_at(step, args.steps):.2e}  "
                  f"cpu {time.process_time() - t_cpu:7.1f}s  wall {time.time() - t_wall:7.1f}s", flush=True)
    train_cpu_s = time.process_time() - t_cpu
    final_train = sum(recent) / len(recent)
    valid = mean_loss(model, v_stream, v_starts, SEQ_LEN, 8)
    print(f"final: train loss (mean of last {len(recent)} steps) {final_train:.4f}, valid loss {valid:.4f}, "
          f"cpu {train_cpu_s:.1f}s", flush=True)

    # save: bf16 weights, tokenizer files, generation defaults
    if os.path.isdir(args.out):
        stray = sorted(set(os.listdir(args.out)) - OUTPUT_FILES)
        if stray:
            sys.exit(f"refusing to replace {args.out}: it holds files this script does not write: {stray}")
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    save_tokenizer(tok, args.out)
    GenerationConfig(bos_token_id=eot, eos_token_id=[ime, eot], pad_token_id=eot, do_sample=True, temperature=0.7,
                     top_k=20, top_p=0.95, max_new_tokens=256).save_pretrained(args.out)

    write_reference_and_samples(args.out, args.seed)
    print(f"\ntotal cpu {time.process_time() - t_cpu:.1f}s wall {time.time() - t_wall:.1f}s; params {n_params}; "
          f"train loss {final_train:.4f}; valid loss {valid:.4f}")


def write_reference_and_samples(out, seed):
    """reference.json and the printed samples, from the saved bf16 weights computed in float32."""
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    eot, ime = tok.token_to_id(ENDOFTEXT), tok.token_to_id(IM_END)
    model = Qwen3ForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    loaded_tok = transformers.AutoTokenizer.from_pretrained(out)
    cases = []
    for kind, p in REFERENCE_PROMPTS:
        text = prompt_text(kind, p)
        ids = tok.encode(text).ids
        assert loaded_tok(text)["input_ids"] == ids, f"AutoTokenizer disagrees with the trained tokenizer on {text!r}"
        if kind == "chat":
            templ = loaded_tok.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
            assert templ == text, f"chat template renders {templ!r}, expected {text!r}"
        cont, margins = greedy_reference(model, ids, REFERENCE_NEW_TOKENS)
        gen_ids = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=REFERENCE_NEW_TOKENS,
                                 eos_token_id=None, pad_token_id=eot)[0, len(ids):].tolist()
        assert gen_ids == cont, f"generate() and the full-recompute loop disagree: {gen_ids} vs {cont}"
        first_eos = next((i for i, t in enumerate(cont) if t in (ime, eot)), None)
        cases.append({"kind": kind, "prompt": p, "prompt_text": text, "prompt_ids": ids, "greedy_ids": cont,
                      "greedy_text": tok.decode(cont, skip_special_tokens=False), "first_eos_index": first_eos,
                      "top1_top2_logit_margin": margins, "min_margin": min(margins)})
    reference = {
        "model": "models/tiny-chat", "dtype": "float32 compute from the saved bfloat16 weights", "decoding":
        f"greedy argmax, {REFERENCE_NEW_TOKENS} new tokens, no EOS stop, full recompute (no KV cache)",
        "eos_ids": [ime, eot], "transformers": transformers.__version__, "torch": torch.__version__,
        "tokenizers": tokenizers.__version__, "seed": seed, "cases": cases,
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1, ensure_ascii=False)
        f.write("\n")

    print("\n== greedy (transformers, float32 from bf16, stop at EOS) ==")
    for kind, p in REFERENCE_PROMPTS + EXTRA_GREEDY_PROMPTS:
        ids = torch.tensor([tok.encode(prompt_text(kind, p)).ids])
        cont = model.generate(ids, do_sample=False, max_new_tokens=200)[0, ids.shape[1]:].tolist()
        print(f"--- {prompt_text(kind, p)!r}\n{tok.decode(cont, skip_special_tokens=False)!r}")
    print("\n== temperature 0.7 (seeded) ==")
    torch.manual_seed(seed)
    for kind, p in SAMPLE_PROMPTS:
        ids = torch.tensor([tok.encode(prompt_text(kind, p)).ids])
        cont = model.generate(ids, do_sample=True, temperature=0.7, top_k=0, top_p=1.0,
                              max_new_tokens=200)[0, ids.shape[1]:].tolist()
        print(f"--- {prompt_text(kind, p)!r}\n{tok.decode(cont, skip_special_tokens=False)!r}")

if __name__ == "__main__":
    main()

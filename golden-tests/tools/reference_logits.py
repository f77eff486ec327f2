#!/usr/bin/env python3
"""Reference logits for the golden check on your own checkpoint: transformers, float32, eager attention.

    python reference_logits.py MODEL_DIR --tokens 1,2,3,... --out ref.npy [--gguf FILE.gguf]

MODEL_DIR is an HF checkpoint directory (any dtype; quantized checkpoints load through their
transformers integration when it is installed). With --gguf, transformers' own GGUF loader is used
(llama, qwen2, qwen3 and a few more architectures). Writes float32 [n_tokens, vocab].
"""
import argparse

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="HF checkpoint directory (or the directory holding --gguf)")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids, e.g. from your tokenizer")
    ap.add_argument("--out", required=True, help="where to write the float32 logits (.npy)")
    ap.add_argument("--gguf", help="GGUF file name inside MODEL to load with transformers' GGUF loader")
    a = ap.parse_args()
    torch.manual_seed(0)
    kw = {"gguf_file": a.gguf} if a.gguf else {}
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32, attn_implementation="eager", **kw)
    model.eval()
    ids = torch.tensor([[int(t) for t in a.tokens.split(",")]])
    with torch.no_grad():
        logits = model(ids).logits[0].float().numpy()
    np.save(a.out, logits.astype(np.float32))
    print(f"wrote {a.out}: float32 {list(logits.shape)}")


if __name__ == "__main__":
    main()

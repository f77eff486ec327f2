#!/usr/bin/env python3
"""Recomputes a shared reference checkpoint's logits with transformers (float32, eager) when its
stored ref_logits.npy was found not to match transformers itself. The result goes to
golden-tests/src/test/resources/shared-overrides/<source with / as _>.ref_logits.npy and is used by
SharedGoldenTest instead of the stored file; README.md there says which and why.

    python golden-tests/tools/recompute_shared_ref.py /work/shared/golden/models llama/hf-bfloat16
"""
import json
import pathlib
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

root = pathlib.Path(sys.argv[1])
source = sys.argv[2]
tokens = json.loads((root / "manifest.json").read_text())["tokens"]
model = AutoModelForCausalLM.from_pretrained(root / source, dtype=torch.float32, attn_implementation="eager").eval()
with torch.no_grad():
    logits = model(torch.tensor([tokens])).logits[0].float().numpy()
stored = np.load(root / source / "ref_logits.npy")
nmse = float(((logits - stored) ** 2).sum() / (stored ** 2).sum())
out = pathlib.Path(__file__).resolve().parents[1] / "src/test/resources/shared-overrides" / (source.replace("/", "_") + ".ref_logits.npy")
np.save(out, logits.astype(np.float32))
print(f"{source}: stored reference vs transformers recomputation NMSE {nmse:.3g}; wrote {out}")

#!/usr/bin/env python3
"""Recomputes a shared reference checkpoint's logits with transformers (float32, eager) when its
stored ref_logits.npy was found not to match transformers itself. For a compressed-tensors /
AutoRound directory the weights are the file's packed values dequantized in float32 by the fixture
generator's own numpy unpacker (golden-tests/fixtures/fixturegen/w4a16.py, checked against the
formats' known-answer vectors by check_packers.py), independent of the Java code under test. The result goes to
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
if (root / source / "model.safetensors").exists() and "quantization_config" in json.loads((root / source / "config.json").read_text()):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
    from fixturegen import archs, reference, w4a16
    cfg, w = w4a16.read_checkpoint(root / source)
    cfg.pop("quantization_config")
    model = archs.load_hf(archs.config_from_dict(cfg), w)
else:
    model = AutoModelForCausalLM.from_pretrained(root / source, dtype=torch.float32, attn_implementation="eager")
model = model.float().eval()
with torch.no_grad():
    logits = model(torch.tensor([tokens])).logits[0].float().numpy()
    n_greedy = len(next(c for c in json.loads((root / "manifest.json").read_text())["cases"] if c["source"] == source)["greedy"])
    gen = model.generate(torch.tensor([tokens]), max_new_tokens=n_greedy, min_new_tokens=n_greedy, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
greedy = gen[0, len(tokens):].tolist()
stored = np.load(root / source / "ref_logits.npy")
nmse = float(((logits - stored) ** 2).sum() / (stored ** 2).sum())
out = pathlib.Path(__file__).resolve().parents[1] / "src/test/resources/shared-overrides" / (source.replace("/", "_") + ".ref_logits.npy")
np.save(out, logits.astype(np.float32))
out.with_name(out.name.replace(".ref_logits.npy", ".greedy.json")).write_text(json.dumps(greedy) + "\n")
print(f"{source}: stored reference vs transformers recomputation NMSE {nmse:.3g}; wrote {out} and its greedy tokens")

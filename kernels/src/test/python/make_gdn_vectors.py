"""Known-answer vectors for kernels.ref.RefGdn / RefMoe, computed by transformers' own Qwen3.5 code.

Writes kernels/src/test/resources/gdn/*.npy (float32, a few KiB). Run with /work/pyenv/bin/python
(torch 2.13 cpu, transformers 5.17.0); the output is the same on every run (seeded, fp32, one thread).
"""
import pathlib

import numpy as np
import torch
import torch.nn.functional as F
from transformers.models.qwen3_5 import modeling_qwen3_5 as q35

torch.manual_seed(20260701)
torch.set_num_threads(1)
OUT = pathlib.Path(__file__).resolve().parents[1] / "resources" / "gdn"
OUT.mkdir(parents=True, exist_ok=True)


def save(name, t):
    np.save(OUT / f"{name}.npy", np.ascontiguousarray(t.detach().float().numpy()))


# the delta rule: Hk 2 key heads of 8, Hv 4 value heads of 16, 70 rows (two chunks of 64), an initial state
n, hk, hv, dk, dv = 70, 2, 4, 8, 16
q = torch.randn(1, n, hk, dk)
k = torch.randn(1, n, hk, dk)
v = torch.randn(1, n, hv, dv)
a = torch.randn(1, n, hv) * 2
b = torch.randn(1, n, hv) * 2
a_log = torch.log(torch.empty(hv).uniform_(0.01, 16))
dt_bias = torch.randn(hv)
state0 = torch.randn(1, hv, dk, dv) * 0.3
beta = b.sigmoid()
g = -a_log.float().exp() * F.softplus(a.float() + dt_bias)
rep = hv // hk
qr, kr = q.repeat_interleave(rep, dim=2), k.repeat_interleave(rep, dim=2)
rec, rec_state = q35.torch_recurrent_gated_delta_rule(qr, kr, v, g=g, beta=beta, initial_state=state0.clone(),
                                                      output_final_state=True, use_qk_l2norm_in_kernel=True)
chk, chk_state = q35.torch_chunk_gated_delta_rule(qr, kr, v, g=g, beta=beta, initial_state=state0.clone(),
                                                  output_final_state=True, use_qk_l2norm_in_kernel=True)
save("rule_q", q.reshape(n, hk * dk))
save("rule_k", k.reshape(n, hk * dk))
save("rule_v", v.reshape(n, hv * dv))
save("rule_alpha", a.reshape(n, hv))
save("rule_beta_logits", b.reshape(n, hv))
save("rule_a_log", a_log)
save("rule_dt_bias", dt_bias)
save("rule_state0", state0.reshape(hv, dk, dv))
save("rule_decay", g.reshape(n, hv))
save("rule_beta", beta.reshape(n, hv))
save("rule_q_l2", q35.l2norm(q, dim=-1, eps=1e-6).reshape(n, hk * dk))
save("rule_recurrent_out", rec.reshape(n, hv * dv))
save("rule_recurrent_state", rec_state.reshape(hv, dk, dv))
save("rule_chunked_out", chk.reshape(n, hv * dv))
save("rule_chunked_state", chk_state.reshape(hv, dk, dv))

# the causal conv with SiLU: 13 channels, kernel 4, a prefill of 9 rows from zero history, then a
# decode step from a remembered history (causal_conv1d_update keeps K inputs; the oldest one is unused)
c, kern, rows = 13, 4, 9
x = torch.randn(1, c, rows)
w = torch.randn(c, kern) * 0.5
save("conv_x", x[0].T)
save("conv_w", w)
save("conv_prefill", q35.causal_conv1d_fn(x, w, None, activation="silu")[0].T)
hist = torch.randn(1, c, kern)
step = torch.randn(1, c, 1)
save("conv_hist", hist[0].T)
save("conv_step_x", step[0].T)
save("conv_step", q35.causal_conv1d_update(step, hist.clone(), w, None, activation="silu")[0].T)

# the gated RMSNorm over value heads of 16
norm = q35.Qwen3_5RMSNormGated(dv, eps=1e-6)
with torch.no_grad():
    norm.weight.copy_(torch.randn(dv))
xo = torch.randn(5, 3 * dv)
zo = torch.randn(5, 3 * dv)
save("norm_x", xo)
save("norm_z", zo)
save("norm_w", norm.weight)
save("norm_out", norm(xo.reshape(-1, dv), zo.reshape(-1, dv)).reshape(5, 3 * dv))

# softmax top-k routing with renormalization (Qwen3_5MoeTopKRouter)
logits = torch.randn(6, 8) * 2
probs = F.softmax(logits, dtype=torch.float, dim=-1)
top, idx = torch.topk(probs, 2, dim=-1)
top /= top.sum(dim=-1, keepdim=True)
save("route_logits", logits)
save("route_weights", top)
save("route_ids", idx.float())

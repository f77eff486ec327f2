import sys, json, struct
from safetensors import safe_open
from safetensors.torch import load_file
p = sys.argv[1]
n = struct.unpack('<Q', open(p,'rb').read(8))[0]
print('header bytes', n, '(8+n)%8 =', (8+n) % 8)
with safe_open(p, 'pt') as f:
    print('metadata', f.metadata())
    keys = list(f.keys())
    print(len(keys), 'tensors')
    for k in keys:
        s = f.get_slice(k)
        print(' ', k, s.get_dtype(), s.get_shape())
with safe_open(p, 'pt') as f:
    t = {k: f.get_tensor(k) for k in f.keys() if not k.startswith(('t.F4', 't.F6'))}
from safetensors.numpy import load_file as npload

print('torch loaded', len(t), 'tensors; f32.values =', t['f32.values'].tolist(), 'scalar =', t['scalar'].item(), 'empty', tuple(t['empty'].shape))
print('F16 t =', t['t.F16'].flatten().tolist())
raw = open(p,'rb').read()
import torch
assert t['t.I32'].flatten().view(torch.uint8).tolist() == [(i*37+3) & 255 for i in range(24)]
print('OK')

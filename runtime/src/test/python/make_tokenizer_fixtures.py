#!/usr/bin/env python3
"""Writes the tokenizer fixtures under runtime/src/test/resources/tokenizer/.

1. Trains small byte-level BPE tokenizers with the HF `tokenizers` library, shaped like the real
   families: Qwen2/Qwen3 (NFC + Qwen2 Split regex + ByteLevel without regex), Qwen3.5 (the same with
   the \\p{M}-aware regex) and Llama-3 (Llama-3 regex, ignore_merges, BOS via TemplateProcessing),
   each with the family's special tokens and some non-special added tokens, plus added tokens that
   exercise lstrip / rstrip / single_word / normalized.
2. Copies the shared 512-token tokenizer (GPT-2 regex via ByteLevel use_regex=true).
3. Encodes a corpus of a few hundred strings with the real library and writes the ids, the decoded
   strings and a few variants (BOS template, special tokens not parsed, skip_special decode,
   prefix decodes that cut UTF-8 characters) to cases.json.gz.
4. Writes charclasses.json: the code points the Oniguruma engine used by `tokenizers` puts in
   \\p{L}, \\p{N}, \\p{M} and \\s, and the code points NFC changes, so the Java side can check its
   regex translation and normalizer over all of Unicode.

Deterministic: run it twice and the output is byte-identical (checked by --check).
Usage: /work/pyenv/bin/python make_tokenizer_fixtures.py [--shared /work/shared] [--check]
"""
import argparse
import gzip
import hashlib
import inspect
import json
import os
import random
import shutil
import sys
import textwrap

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "resources", "tokenizer"))

QWEN2_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN35_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
LLAMA_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|finetune_right_pad_id|>",
                 "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]

MULTILINGUAL = """
The quick brown fox jumps over the lazy dog. It's 2024; we're testing what they'll do, and I'd say you've seen it.
Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. Straße, Maß, Fußgänger, Ärger, Öl, Übermut.
Portez ce vieux whisky au juge blond qui fume. Ça déjà été l'œuvre de l'été à Noël; français, garçon, naïve, coïncidence.
El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío, añoraba a su querido cachorro. ¿Qué? ¡Sí!
Съешь же ещё этих мягких французских булок, да выпей чаю. Москва, Россия, привет мир.
Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε, ελληνικά γράμματα.
نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق. مرحبا بالعالم.
नमस्ते दुनिया, यह एक परीक्षण है। हिन्दी भाषा में वाक्य।
我能吞下玻璃而不伤身体。你好，世界！中文分词测试，人工智能与机器学习。今天天气很好，我们去公园散步吧。
いろはにほへと ちりぬるを わかよたれそ つねならむ。こんにちは世界、日本語のテキストです。カタカナもある。
다람쥐 헌 쳇바퀴에 타고파. 안녕하세요 세계, 한국어 문장입니다.
สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ
Emoji: 😀 😃 😄 😁 👍 👍🏽 👨‍👩‍👧‍👦 🇩🇪 🇯🇵 ❤️ 🔥 ✨ 🎉 🤖 🧠 1️⃣ #️⃣
Numbers: 0 1 12 123 1234 12345 3.14159 2,718 1e-9 0x1F 100% $42.50 €3,99 ¥1000 ½ ² ³ Ⅻ ٣ ४ ๕
Whitespace:    four spaces	tab		two tabs
new line and CRLF\r\nend.
"""

CODE = '''
def fibonacci(n: int) -> list[int]:
    """Return the first n Fibonacci numbers."""
    a, b = 0, 1
    out = []
    for _ in range(n):
        out.append(a)
        a, b = b, a + b
    return out

public static int[] encode(String text) { return tokenizer.encode(text, false); }
{"role": "user", "content": "Hello, world!", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
<html><body class="main"><p>Hello &amp; welcome</p></body></html>
SELECT id, name FROM users WHERE age >= 18 ORDER BY name;
for (int i = 0; i < n; i++) { sum += a[i] * b[i]; }  // dot product
'''


def training_corpus():
    import contextlib, io, json as json_mod, textwrap as textwrap_mod
    with contextlib.redirect_stdout(io.StringIO()):
        import this  # prints the Zen of Python on import
    zen = "".join(this.d.get(c, c) for c in this.s)
    stdlib = inspect.getsource(json_mod.encoder) + inspect.getsource(textwrap_mod)
    lines = []
    for block in (MULTILINGUAL, CODE, zen, stdlib):
        lines.extend(block.splitlines(keepends=True))
    return lines * 3


def trained_bpe(normalizer, split_regex, vocab_size, extra_vocab, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_corpus(), trainer=trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    # tokens no merge sequence produces: with ignore_merges a pre-token equal to one is one token (as in Llama-3)
    for t in extra_vocab:
        if t not in vocab:
            vocab[t] = len(vocab)
    return Tokenizer.from_str(json.dumps(spec))


def byte_level(s):
    table = {}
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return "".join(chr(table[b]) for b in s.encode("utf-8"))


def make_qwen(regex, name):
    extra = [byte_level(w) for w in (" unbelievable", " tokenization", "Wörterbuch")]
    tok = trained_bpe(normalizers.NFC(), regex, 1500, extra, ignore_merges=False)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_ADDED])
    # flag coverage: lstrip / rstrip on a special token, single_word and normalized on non-special ones
    tok.add_special_tokens([AddedToken("<mask>", special=True, normalized=False, lstrip=True, rstrip=True)])
    tok.add_tokens([AddedToken("[[word]]", special=False, normalized=False, single_word=True),
                    AddedToken("Cafe\u0301", special=False, normalized=True)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    return tok, config


def make_llama3():
    extra = [byte_level(w) for w in (" unbelievable", " tokenization", " internationalization", "1234")]
    tok = trained_bpe(None, LLAMA3_REGEX, 1500, extra, ignore_merges=True)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LLAMA_SPECIAL])
    bos = "<|begin_of_text|>"
    bos_id = tok.token_to_id(bos)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                                      special_tokens=[(bos, bos_id)]),
    ])
    config = {"bos_token": bos, "eos_token": "<|eot_id|>"}
    return tok, config


def make_bytefallback():
    """BPE over raw characters (no ByteLevel step) with byte_fallback and a fused unknown token: characters
    missing from the vocabulary become <0xHH> byte tokens, or <unk> when a byte token is missing too
    (bytes F0-F4, i.e. 4-byte characters such as emoji). The ByteLevel decoder then maps what it can."""
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False)
    tok.decoder = decoders.ByteLevel()
    # trained on the ASCII part of the corpus only, so every other character takes the fallback path
    # (limit_alphabet would do the same but breaks frequency ties in hash order: not reproducible)
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False, special_tokens=["<unk>"])
    tok.train_from_iterator(["".join(c for c in line if ord(c) < 0x80) for line in training_corpus()], trainer=trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        if 0xF0 <= b <= 0xF4:
            continue
        t = f"<0x{b:02X}>"
        if t not in vocab:
            vocab[t] = len(vocab)
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL])
    return tok, {"bos_token": None, "eos_token": "<|im_end|>"}


def corpus(special_strings):
    s = []
    s += ["", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\t \t", "a", "A", "ab", "hello", " hello", "hello ",
          "  hello  ", "Hello, world!", "Hello  world", "Hello\tworld", "Hello\nworld", "Hello\r\nworld", "Hello\n\n\nworld",
          "line one\nline two\n", "trailing newline\n", "\nleading newline", "ends with spaces   ", "   starts with spaces",
          "a \n b", "a  \n\n  b", "x\u00a0y", "x\u00a0\u00a0y", "x\u2003y", "x\u3000y", "x\u200by", "x\u2028y", "x\u0085y", "x\u000by\u000cz"]
    for w in ("s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "Ve", "M", "LL", "D", "x"):
        s.append(f"it'{w} fine")
    s += ["I'm", "I'M", "you're", "YOU'RE", "we've", "they'll", "He'd", "don't", "DON'T", "don’t", "it’s", "'s", "''s", "' s",
          "rock 'n' roll", "'ſ", "'K", "O'Neil's", "'tis"]
    for n in range(1, 26):
        s.append("".join(str((i * 7 + n) % 10) for i in range(n)))
    s += ["3.14159", "1,000,000", "-42", "+7", "1e10", "0x1F", "v1.2.3", "2024-06-01", "12:30:45", "$1,234.56", "50%",
          "٣٤٥", "४२", "๕๖", "½", "²³", "Ⅻ", "①②③", "１２３", "a1b2c3", "abc123def", "1st 2nd 3rd 4th"]
    s += ["café", "cafe\u0301", "Cafe\u0301", "naïve", "nai\u0308ve", "Å", "A\u030a", "\u212b", "ﬁ", "ǅ", "ß", "ẞ", "İstanbul", "ı",
          "\u1100\u1161\u11a8", "각", "e\u0301\u0301", "o\u0308\u0304", "\u0301leading mark", "z\u0335\u0321a\u0336\u0322l\u0337g\u0338o",
          "Tiếng Việt có dấu", "Ελληνικά", "Русский текст", "עברית", "العربية", "हिन्दी", "नमस्ते", "ไทย", "中文", "日本語", "한국어",
          "混合 mixed テキスト 텍스트 text", "English中文English", "αβγ ABC абв", "Ω≈ç√∫˜µ≤≥÷"]
    s += ["😀", "👍", "👍🏽", "👍🏿👍🏻", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🇩🇪🇫🇷", "1️⃣", "❤️", "❤", "✨🎉🔥", "a😀b", " 😀 ", "😀😀😀",
          "emoji at end 🤖", "🤖 emoji at start", "🧑‍🤝‍🧑", "\U0001F600\U0001F3FD", "text 🇯🇵 flag", "\U0001F9D1\u200D\U0001F680"]
    s += ["{\"key\": \"value\", \"n\": [1, 2, 3]}", "def f(x):\n    return x * 2\n", "if (a && b) { c(); }",
          "<div class=\"x\">hi</div>", "SELECT * FROM t;", "print('hello')", "x = y + z  # comment", "#include <stdio.h>",
          "    indented code\n        more", "a->b", "a=>b", "!==", "...", "?!", "---", "___", "***", "~~~", "@user #tag",
          "https://example.com/path?q=1&r=2", "user@example.com", "C:\\path\\to\\file.txt", "/usr/bin/env python3",
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababababab", "!!!!!!!!!!!!", "            ",
          "\t\t\t\t", "\n\n\n\n\n\n", "\r\n\r\n\r\n", " \t \n \r\n "]
    s += CODE.strip("\n").split("\n\n")
    s += [p.strip() for p in MULTILINGUAL.strip().split("\n")]
    # special-token strings inside text, at edges, repeated, broken
    for t in special_strings:
        s += [t, f"a{t}b", f" {t} ", f"{t}{t}", f"x {t}\ny", t[:-1], t[1:]]
    s += ["<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "<think>\nreasoning\n</think>\n\nanswer",
          "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
          "word <mask> word", "word<mask>word", "  <mask>  ", "[[word]]", "a [[word]] b", "a[[word]]b", "_[[word]]", "Cafe\u0301 au lait",
          "Café au lait", "<|im_end|", "<|im_end|>>", "<<|im_end|>"]
    rng = random.Random(20240601)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        " \t\n\r  \u00a0",
        ".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`",
        "äöüßéèêçñåøæœÀÉÎÕÜ",
        "\u0301\u0308\u0327\u030a",
        "中文字测试日本語한국어",
        "😀👍🏽🎉🇩🇪‍❤️",
        "αβγδΑΒΓΔабвгАБВГ",
    ]
    for _ in range(120):
        n = rng.randint(1, 40)
        s.append("".join(rng.choice(rng.choice(pools)) for _ in range(n)))
    s.append(" ".join(["lorem ipsum dolor sit amet, consectetur adipiscing elit"] * 20))
    s.append("x" * 1500)
    s.append("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 20)
    s.append("9" * 400)
    seen = set()
    out = []
    for x in s:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def special_affixes(tok):
    """The ids TemplateProcessing puts around a sequence (from a one-token probe)."""
    probe = tok.encode("a", add_special_tokens=False).ids
    full = tok.encode("a", add_special_tokens=True).ids
    at = full.index(probe[0])
    return full[:at], full[at + len(probe):]


def encode_all(tok, strings, name):
    prefix, suffix = special_affixes(tok)
    res = []
    for text in strings:
        enc = tok.encode(text, add_special_tokens=False)
        ids = enc.ids
        r = {"ids": ids}
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != text:  # omitted when it is the input itself, to keep the fixture small
            r["decoded"] = decoded
        skip = tok.decode(ids, skip_special_tokens=True)
        if skip != decoded:
            r["decoded_skip_special"] = skip
        with_special = tok.encode(text, add_special_tokens=True).ids
        if with_special != prefix + ids + suffix:  # the post-processor template, recorded once per tokenizer
            r["ids_add_special"] = with_special
        tok.encode_special_tokens = True
        plain = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        if plain != ids:
            r["ids_special_not_parsed"] = plain
        # decodes cut inside characters (one decoder for all tokenizers: two suffice, keeping the fixture small)
        if name in ("qwen2", "bytefallback") and any(ord(c) > 0x7F for c in text) and 1 < len(ids) <= 24:
            r["prefix_decodes"] = [tok.decode(ids[:k], skip_special_tokens=False) for k in range(1, len(ids))]
        res.append(r)
    return res


def char_classes():
    """Code points (no surrogates) the `tokenizers` regex engine puts in each class, as [start, end] ranges."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    text = "".join(chr(c) for c in cps)
    out = {}
    for name, pattern in (("L", r"\p{L}"), ("N", r"\p{N}"), ("M", r"\p{M}"), ("s", r"\s")):
        split = pre_tokenizers.Split(Regex(pattern), behavior="removed", invert=False)
        kept = set()
        for piece, (a, b) in split.pre_tokenize_str(text):
            kept.update(ord(ch) for ch in piece)
        ranges = []
        for c in cps:
            if c in kept:
                continue
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
        out[name] = ranges
    nfc = normalizers.NFC()
    changed = []
    for c in cps:
        n = nfc.normalize_str(chr(c))
        if n != chr(c):
            changed.append([c, [ord(x) for x in n]])
    out["nfc_changed"] = changed
    return out


def dump(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def dump_gz(path, obj):
    """As dump, gzip-compressed with no name or time in the header (deterministic): the large cases file travels with
    every GPU call, whose transfer cap the repository shares."""
    data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
        f.write(data)


def write_all(out_dir, shared):
    os.makedirs(out_dir, exist_ok=True)
    toks = {}
    toks["qwen2"] = make_qwen(QWEN2_REGEX, "qwen2")
    toks["qwen35"] = make_qwen(QWEN35_REGEX, "qwen35")
    toks["llama3"] = make_llama3()
    toks["bytefallback"] = make_bytefallback()
    shared_dir = os.path.join(shared, "golden", "models", "tokenizer")
    toks["shared512"] = (Tokenizer.from_file(os.path.join(shared_dir, "tokenizer.json")),
                         json.load(open(os.path.join(shared_dir, "tokenizer_config.json"))))
    specials = QWEN_SPECIAL + QWEN_ADDED + LLAMA_SPECIAL
    strings = corpus(specials)
    cases = {"tokenizers_version": tokenizers.__version__, "strings": strings, "results": {}}
    for name, (tok, config) in toks.items():
        if name == "shared512":
            shutil.copyfile(os.path.join(shared_dir, "tokenizer.json"), os.path.join(out_dir, f"{name}.tokenizer.json"))
        else:
            with open(os.path.join(out_dir, f"{name}.tokenizer.json"), "w", encoding="utf-8", newline="\n") as f:
                f.write(tok.to_str(pretty=False))
                f.write("\n")
        dump(os.path.join(out_dir, f"{name}.tokenizer_config.json"), {k: v for k, v in config.items() if k in ("bos_token", "eos_token", "pad_token")})
        cases["results"][name] = encode_all(tok, strings, name)
        cases.setdefault("add_special", {})[name] = dict(zip(("prefix", "suffix"), special_affixes(tok)))
    dump_gz(os.path.join(out_dir, "cases.json.gz"), cases)
    dump(os.path.join(out_dir, "charclasses.json"), char_classes())


def digest(d):
    h = hashlib.sha256()
    for f in sorted(os.listdir(d)):
        h.update(f.encode())
        h.update(open(os.path.join(d, f), "rb").read())
    return h.hexdigest()


def big_tokenizer(path, vocab_size):
    """A Qwen2-shaped tokenizer with a realistic vocabulary size, trained on the Python installation's
    own source and text files, for the throughput benchmark (too large to commit)."""
    import glob
    files = sorted(glob.glob(os.path.join(sys.prefix, "lib", "python3*", "**", "*.py"), recursive=True))
    files += sorted(glob.glob(os.path.join(sys.prefix, "lib", "python3*", "**", "*.txt"), recursive=True))
    def lines():
        for f in files:
            try:
                with open(f, encoding="utf-8") as fh:
                    yield from fh
            except (UnicodeDecodeError, OSError):
                continue
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_ADDED])
    tok.save(path)
    print(f"wrote {path}: vocab {tok.get_vocab_size()} from {len(files)} files")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big-tokenizer", metavar="PATH", help="instead: train a ~150k-vocab tokenizer for the benchmark to PATH")
    ap.add_argument("--big-vocab", type=int, default=150000)
    ap.add_argument("--shared", default=os.environ.get("V100_SHARED", "/work/shared"))
    ap.add_argument("--check", action="store_true", help="build twice in temp dirs and compare (determinism)")
    args = ap.parse_args()
    if args.big_tokenizer:
        big_tokenizer(args.big_tokenizer, args.big_vocab)
        return
    if args.check:
        import tempfile
        a, b = tempfile.mkdtemp(), tempfile.mkdtemp()
        write_all(a, args.shared)
        write_all(b, args.shared)
        da, db = digest(a), digest(b)
        print("deterministic" if da == db else "NOT deterministic", da, db)
        sys.exit(0 if da == db else 1)
    write_all(OUT, args.shared)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()

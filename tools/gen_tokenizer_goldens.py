#!/usr/bin/env python3
# Golden token ids from Hugging Face tokenizers, the independent reference for
# tests/test_tokenizer_smollm2.cpp, tests/test_tokenizer_stories260k.cpp and
# tests/test_cli_tokenize.cpp. Writes tests/data/tokenizer/smollm2_hf.jsonl (one {"text", "ids",
# "ids_special"} object per line) and tests/data/tokenizer/stories260k_hf.jsonl ({"text", "ids"}).
#
# Run with the reference environment:  /opt/refenv/bin/python tools/gen_tokenizer_goldens.py
#
# The tokenizer is built from the same GGUF file ridge reads, two ways that must agree:
#  1. transformers.AutoTokenizer.from_pretrained(models_dir, gguf_file=...). Its GGUF converter
#     gives a plain ByteLevel pre-tokenizer and drops SmolLM2's digit splitting
#     (tokenizer.ggml.pre = "smollm": Digits(individual_digits=True) then ByteLevel), so the
#     pre-tokenizer is replaced by that sequence.
#  2. A tokenizers BPE built directly from tokenizer.ggml.tokens / merges with the same
#     pre-tokenizer and the control tokens as special added tokens.
# "ids": add_special_tokens=False with special tokens NOT recognised in the text
# (encode_special_tokens=True, i.e. ridge's parse_special=false); "ids_special": the same with
# special tokens recognised (HF's default, ridge's parse_special=true). Neither adds BOS.
#
# stories260K (SentencePiece-style "llama" vocabulary of 512 tokens, the GGUF in the shared test
# data) goes through transformers' GGUF converter too (Metaspace + BPE with byte fallback, merges
# derived from the scores), with the normalizer of Llama 2's own tokenizer.json (see
# stories260k_via_transformers). transformers rejects that file's padding/separator ids 0xFFFFFFFF
# ("none"), so a copy without those two keys is written to a temporary directory first. Its
# "ids" are add_special_tokens=True (BOS, as llama2.c and SentencePiece add) with special tokens
# as plain text.
import argparse
import json
import os
import random
import sys
import tempfile

import gguf
import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
STORIES_GGUF = os.path.join(os.path.dirname(ROOT), "shared", "testdata", "gguf-stories260K", "stories260K.gguf")


def byte_symbols():
    """GPT-2's byte -> printable character table (printable Latin-1 bytes map to themselves)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_SYMBOLS = byte_symbols()


def smollm_pre_tokenizer():
    return pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])


def via_transformers(models_dir):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(models_dir, gguf_file=MODEL)
    backend = tok.backend_tokenizer
    backend.pre_tokenizer = smollm_pre_tokenizer()
    return backend


def via_tokenizers(gguf_path):
    reader = gguf.GGUFReader(gguf_path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = smollm_pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t == 3]
    tok.add_special_tokens(specials)
    return tok


def stories260k_via_transformers(gguf_path, tmp_dir):
    from transformers import AutoTokenizer
    reader = gguf.GGUFReader(gguf_path)
    copy = os.path.join(tmp_dir, "stories260K.gguf")
    writer = gguf.GGUFWriter(copy, arch="llama")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key in ("tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id"):
            continue  # 0xFFFFFFFF ("none"), which transformers cannot take
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, field.contents(), field.types[0], sub_type=field.types[-1])
        else:
            writer.add_key_value(key, field.contents(), field.types[0])
    for t in reader.tensors:
        writer.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tok = AutoTokenizer.from_pretrained(tmp_dir, gguf_file="stories260K.gguf").backend_tokenizer
    # The converter's Metaspace(prepend_scheme="first") skips the "▁" prefix when the text already
    # starts with a space; SentencePiece's dummy prefix (llama2.c, llama.cpp, and Llama 2's own
    # tokenizer.json: Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer) always adds it.
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.pre_tokenizer = None
    return tok


def test_strings():
    """A few hundred varied strings; fixed, plus seeded random mixtures."""
    s = [
        # English prose and contractions
        "Hello world", " Hello world", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
        "It's a dog's life; they're sure we've seen what I'm saying, and you'll agree he'd go.",
        "IT'S LOUD. THEY'RE HERE. WE'VE GOT IT. I'M OUT. YOU'LL SEE. HE'D KNOW.",
        "don't can't won't shouldn't y'all o'clock rock'n'roll 'quoted' \"double\"",
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
        "In 1492, Columbus sailed the ocean blue. In 2024 the population was 8,045,311,447 people.",
        "Mr. Smith's e-mail: john.smith@example.com -- visit https://example.org/path?q=1&r=two#frag",
        "A sentence with trailing space ", "  leading spaces", "multiple   inner    spaces", "tab\tseparated\tvalues",
        "line one\nline two\n\nline four\r\nwindows line\r\n", "\n", "\n\n\n", " \n \n", "\t\t\t", "   ",
        " ", "", "a", "I", "?", "...", "!!!???", "----====", "'s", "'", "''", "'''", "''''", "'S", "'ll've",
        # numbers
        "0", "7", "42", "123", "2024", "3.14159", "1,000,000", "-273.15", "1e-9", "0x1F", "0b1011",
        "12345678901234567890", "9" * 64, "3 33 333 3333 33333 333333", "3.3 3..3 3...3",
        "Version 2.0.1-beta+exp.sha.5114f85", "Call 555-0100 or +1 (800) 555-0199", "x1 y22 z333 a1b2c3",
        "  1", "   12", "\t3", "\n4", "a 5 b", "½ ¾ ⅓ ² ³ ¹ ٣ ४ 三 Ⅻ", "①②③",
        # code
        "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
        "import numpy as np\nx = np.arange(10, dtype=np.float32)  # comment\nprint(f\"{x.sum():.2f}\")\n",
        "class Foo(Bar):\n\tdef __init__(self, *args, **kwargs):\n\t\tsuper().__init__(*args, **kwargs)\n",
        "#include <stdio.h>\n\nint main(int argc, char** argv) {\n    printf(\"%d\\n\", argc);\n    return 0;\n}\n",
        "for (size_t i = 0; i < n; ++i) { y[i] += a * x[i]; }",
        "template <typename T> constexpr T max(T a, T b) noexcept { return a > b ? a : b; }",
        '{"name": "ridge", "version": [0, 1], "nested": {"ok": true, "n": null, "pi": 3.14}}',
        '[\n  {\n    "id": 1,\n    "tags": ["a", "b"]\n  }\n]',
        "SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC LIMIT 10;",
        "<div class=\"x\"><p>Hello &amp; welcome</p></div>", "$ ls -la | grep '^d' > out.txt 2>&1",
        "x=>x*2; a!==b && c||d; i++; j--; k**=2; m<<=1; n>>>=3;", "    \n        \n    ",
        # accents, other scripts, CJK
        "Führer", "café naïve résumé coöperate Ångström", "cafe\u0301 (decomposed) vs caf\u00e9 (composed)",
        "Cửa Việt", "Straße", "ﬁ ligature", "İstanbul ıi", "нещо на Български", "Привет, мир!",
        "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया", "ကမ္ဘာ", "កាន់តែពិសេសអាចខលចេញ",
        "สวัสดีชาวโลก", "こんにちは世界", "カタカナとひらがな", "我想在apple工作1314151天～", "你好，世界！",
        "안녕하세요 세계", "中文English混合mixed文本", "日本語の文章です。句読点、も。",
        # emoji and ZWJ sequences
        "🦙", "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
        "👨‍👩‍👧‍👦 family", "🏳️‍🌈", "👍🏽", "🇺🇸🇫🇷", "emoji🙂inside🙃words", "😁 ?", "🦙🦙🦙",
        # unusual whitespace and controls
        "nbsp\u00a0here", "nel\u0085here", "en\u2002em\u2003thin\u2009", "ideographic\u3000space",
        "line\u2028sep", "zero\u200bwidth", "soft\u00adhyphen", "bell\u0007char", "del\u007fchar", "nul\u0000byte",
        "\u0085", "\u00a0\u00a0", "\u3000\u3000a",
        # bytes whose byte-level symbol SmolLM2 lacks (0x04, 0x06, 0x13, 0x14, 0x16, 0x1d, lead byte
        # 0xF1): Hugging Face drops them
        "ctrl\u0004\u0006\u0013\u0014\u0016\u001d chars", "plane four \U00040000 \U0004fffd end",
        # chat-template text and special-token-looking text
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nhi<|im_end|>", "<|im_end|>", "<|endoftext|>", "text<|endoftext|>more",
        "<|im_start|><|im_start|>", "< |im_start| >", "<|im_start", "im_start|>", "<|unknown|>",
        "<repo_name>ridge<file_sep>tokenizer.cpp\n<filename>x.py", "<jupyter_code>print(1)<jupyter_output>1",
        "<s> </s> <unk> [INST] [/INST] <<SYS>>", "<|im_start|>  spaced  <|im_end|>  ",
        "<fim_prefix>def f():<fim_suffix>\n<fim_middle>", "<gh_stars>100",
    ]
    # Runs of whitespace of many lengths and kinds, alone and before words and digits.
    for n in [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100]:
        s += [" " * n, " " * n + "word", "\t" * n + "x", "\n" * n, "x" + " " * n + "1", ("\n" + " " * 4) * (n % 5 + 1)]
    # Long digit runs and long words.
    s += ["1234567890" * 20, "a" * 300, "ab" * 200, "The " * 150, "?!" * 100, "😀" * 50, "\u00e9" * 80]
    # Seeded random mixtures of the pieces above and of character classes.
    rng = random.Random(20261129)
    pieces = [p for p in s if p] + list("aZ09 \t\n.,;:'\"-_/\\()[]{}<>|@#$%^&*+=~`") + [
        "é", "ß", "ø", "ж", "λ", "中", "ア", "한", "🙂", "‍", "️", "\u0301", "\u00a0", "’", "“", "”", "…", "—"]
    for _ in range(220):
        k = rng.randint(1, 12)
        s.append("".join(rng.choice(pieces) for _ in range(k)))
    for _ in range(40):
        k = rng.randint(5, 60)
        s.append("".join(chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x24F), rng.randint(0x370, 0x52F),
                                          rng.randint(0x4E00, 0x4FFF), rng.randint(0x1F300, 0x1F64F), 0x20, 0x0A, 0x09]))
                         for _ in range(k)))
    # No lone surrogates (not encodable as UTF-8); keep order, drop duplicates.
    seen, out = set(), []
    for t in s:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def encode(tok, text, parse_special, add_special_tokens=False):
    tok.encode_special_tokens = not parse_special
    return tok.encode(text, add_special_tokens=add_special_tokens).ids


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "tokenizer", "smollm2_hf.jsonl"))
    ap.add_argument("--stories-gguf", default=STORIES_GGUF)
    ap.add_argument("--stories-out", default=os.path.join(ROOT, "tests", "data", "tokenizer", "stories260k_hf.jsonl"))
    ap.add_argument("--skip-transformers", action="store_true", help="only the tokenizers-built SmolLM2 reference")
    args = ap.parse_args()

    gguf_path = os.path.join(args.models_dir, MODEL)
    built = via_tokenizers(gguf_path)
    refs = [("tokenizers from GGUF vocab+merges", built)]
    if not args.skip_transformers:
        refs.insert(0, ("transformers AutoTokenizer(gguf_file=...) + smollm pre-tokenizer", via_transformers(args.models_dir)))

    texts = test_strings()
    vocab = built.get_vocab()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    n_disagree = 0
    with open(args.out, "w", encoding="utf-8") as f:
        for text in texts:
            rows = [(encode(t, text, False), encode(t, text, True)) for _, t in refs]
            if any(r != rows[0] for r in rows[1:]):
                n_disagree += 1
                print(f"references disagree on {text!r}: {rows}", file=sys.stderr)
                continue
            ids, ids_special = rows[0]
            # Byte-level BPE round-trips, except for bytes whose symbol is not in the vocabulary.
            if all(BYTE_SYMBOLS[b] in vocab for b in text.encode()):
                assert built.decode(ids, skip_special_tokens=False) == text, text
            f.write(json.dumps({"text": text, "ids": ids, "ids_special": ids_special}, ensure_ascii=False) + "\n")
    print(f"wrote {len(texts) - n_disagree} strings to {args.out} using: " + "; ".join(name for name, _ in refs))

    if not args.skip_transformers:
        with tempfile.TemporaryDirectory() as tmp:
            stories = stories260k_via_transformers(args.stories_gguf, tmp)
            with open(args.stories_out, "w", encoding="utf-8") as f:
                for text in texts:
                    ids = encode(stories, text, False, add_special_tokens=True)
                    f.write(json.dumps({"text": text, "ids": ids}, ensure_ascii=False) + "\n")
        print(f"wrote {len(texts)} strings to {args.stories_out} using transformers AutoTokenizer(gguf_file=...)")
    return 1 if n_disagree else 0


if __name__ == "__main__":
    sys.exit(main())

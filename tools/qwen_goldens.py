#!/usr/bin/env python3
"""Reference goldens for the tiny random Qwen2 and Qwen3 models, from Hugging Face transformers.

What it makes: tests/data/tiny-qwen/tiny-qwen2.json and tiny-qwen3.json, the expected outputs
of tiny-random-qwen2.Q8_0.gguf and tiny-random-qwen3.Q8_0.gguf (shared test data, tiny-qwen/;
SOURCES.md there says how they were made). The weights are random, so only agreement with this
independent implementation counts; nothing here comes from ridge.

From what: transformers loads each GGUF (every tensor dequantized to float32 by gguf-py) and its
own Qwen2ForCausalLM / Qwen3ForCausalLM runs in float32 on the CPU, eager attention, eval mode,
no_grad. Before anything is recorded, every parameter of the loaded model is compared with the
GGUF's tensor dequantized here by gguf-py (they must be identical), so a loader that dropped,
re-initialized or permuted a tensor cannot slip into the goldens.

How to run (from the repository root; needs torch, transformers 5.x, accelerate, gguf, numpy):
    /tmp/qwen-ref-venv/bin/python tools/qwen_goldens.py [--testdata DIR] [--out DIR]
--testdata defaults to $RIDGE_TESTDATA_DIR, else ../shared/testdata beside the repository;
--out defaults to tests/data/tiny-qwen. Nothing is fetched from a model hub (HF_HUB_OFFLINE=1).

Each JSON file:
  "source":      {"file", "sha256"} of the GGUF
  "reference":   "transformers X.Y.Z, torch A.B.C, float32, dequantized from GGUF"
  "config":      hidden, layers, heads, kv_heads, head_dim, intermediate, rope_theta, rope_type,
                 rms_norm_eps, tie_word_embeddings, vocab_size, q/k/v bias, q/k norm
  "tokenizer":   {"adds_bos": whether the tokenizer adds a BOS by default, "bos_id", "eos_id"}
  "prompt_text", "prompt_ids" (tokenized with add_special_tokens=False; feed exactly these)
  "positions":   one entry per prompt position, for the logits that predict the next token:
                 {"top_ids": 8 highest-logit ids, descending, "top_logits",
                  "probe_ids": fixed ids below the vocabulary size, "probe_logits"}
  "margins":     top1 - top2 logit at each prompt position (small = near tie)
  "greedy_ids":  24 argmax ids after the prompt (KV-cache loop, EOS not a stop, no processors)
  "greedy_margins": top1 - top2 logit at each greedy step
  "float64_max_abs_diff": largest |logit| difference, over all prompt positions and the whole
                 vocabulary, between this float32 run and a float64 run of the same weights
Logits are rounded to 6 significant digits.
"""
import argparse
import inspect
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gguf  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_logits_goldens import sha256_of  # noqa: E402  (the same file hash as the SmolLM2 goldens)
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

MODELS = [("tiny-random-qwen2.Q8_0.gguf", "tiny-qwen2.json"),
          ("tiny-random-qwen3.Q8_0.gguf", "tiny-qwen3.json")]
PROMPT = "The quick brown fox jumps over the lazy dog. Once upon a time"
TOP_K = 8
PROBE_IDS = [0, 1, 2, 100, 1000, 10000, 100000, 151643]  # 151643 = <|endoftext|>
N_GREEDY = 24

# GGUF tensor name (after "blk.N.") -> transformers parameter name (after "model.layers.N.").
LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def r6(x):
    return float(f"{float(x):.6g}")


def hf_name(gguf_name):
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    blk, layer, base, kind = gguf_name.split(".")
    assert blk == "blk", gguf_name
    return f"model.layers.{layer}.{LAYER_NAMES[base]}.{kind}"


def check_weights(model, gguf_path):
    """Every model parameter must equal the GGUF tensor as gguf-py dequantizes it."""
    params = dict(model.named_parameters(remove_duplicate=False))
    seen = set()
    for t in gguf.GGUFReader(gguf_path).tensors:
        want = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        name = hf_name(t.name)
        got = params[name].detach().numpy()
        want = want.reshape(got.shape)
        if not np.array_equal(got, want):
            sys.exit(f"{gguf_path}: {t.name} -> {name} differs (max {np.abs(got - want).max()})")
        seen.add(name)
    missing = set(params) - seen
    if model.config.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        missing.discard("lm_head.weight")
    if missing:
        sys.exit(f"{gguf_path}: parameters not in the GGUF: {sorted(missing)}")
    return len(seen)


def config_of(model):
    c = model.config
    attn = model.model.layers[0].self_attn
    rope = getattr(c, "rope_parameters", None) or {}
    return {
        "architecture": type(model).__name__,
        "hidden": c.hidden_size,
        "layers": c.num_hidden_layers,
        "heads": c.num_attention_heads,
        "kv_heads": c.num_key_value_heads,
        "head_dim": attn.head_dim,
        "intermediate": c.intermediate_size,
        "rope_theta": rope.get("rope_theta", getattr(c, "rope_theta", None)),
        "rope_type": rope.get("rope_type", "default"),
        "rms_norm_eps": c.rms_norm_eps,
        "tie_word_embeddings": c.tie_word_embeddings,
        "vocab_size": c.vocab_size,
        "qkv_bias": [attn.q_proj.bias is not None, attn.k_proj.bias is not None,
                     attn.v_proj.bias is not None],
        "o_bias": attn.o_proj.bias is not None,
        "qk_norm": hasattr(attn, "q_norm") and hasattr(attn, "k_norm"),
        "hidden_act": c.hidden_act,
    }


def margin(row):
    top2 = torch.topk(row, 2).values
    return float(top2[0] - top2[1])


def make(gguf_dir, gguf_file, out_path):
    path = os.path.join(gguf_dir, gguf_file)
    tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(
        gguf_dir, gguf_file=gguf_file, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    n_checked = check_weights(model, path)
    cfg = config_of(model)
    print(f"== {gguf_file}: {n_checked} tensors identical to gguf-py's dequantization")
    print("config:", json.dumps(cfg))

    ids = tok(PROMPT, add_special_tokens=False).input_ids
    ids_default = tok(PROMPT).input_ids
    adds_bos = ids_default != ids
    print("prompt ids:", ids, "(tokenizer adds BOS by default: %s)" % adds_bos)

    vocab = cfg["vocab_size"]
    probe = [i for i in PROBE_IDS if i < vocab]
    with torch.no_grad():
        x = torch.tensor([ids])
        logits = model(x).logits[0]                     # (T, vocab)
        logits64 = model.to(torch.float64)(x).logits[0]
        model.to(torch.float32)
        diff64 = float((logits.double() - logits64).abs().max())

        positions, margins = [], []
        for row in logits:
            top = torch.topk(row, TOP_K)
            positions.append({
                "top_ids": top.indices.tolist(),
                "top_logits": [r6(v) for v in top.values],
                "probe_ids": probe,
                "probe_logits": [r6(row[i]) for i in probe],
            })
            margins.append(r6(margin(row)))

        # Greedy with the KV cache, EOS not a stop. (The cache argument is "cache" in newer
        # transformers, "past_key_values" in older ones.)
        key = "cache" if "cache" in inspect.signature(model.forward).parameters \
            else "past_key_values"
        out = model(x, use_cache=True)
        past, row = getattr(out, key), out.logits[0, -1]
        greedy, greedy_margins = [], []
        for _ in range(N_GREEDY):
            nxt = int(torch.argmax(row))
            greedy.append(nxt)
            greedy_margins.append(r6(margin(row)))
            out = model(torch.tensor([[nxt]]), use_cache=True, **{key: past})
            past, row = getattr(out, key), out.logits[0, -1]

        # Cross-check: one forward over prompt + greedy without a cache picks the same ids.
        full = model(torch.tensor([ids + greedy])).logits[0]
        again = torch.argmax(full[len(ids) - 1:-1], dim=-1).tolist()
        if again != greedy:
            sys.exit(f"{gguf_file}: cached and uncached greedy disagree: {greedy} vs {again}")

    result = {
        "source": {"file": gguf_file, "sha256": sha256_of(path)},
        "reference": f"transformers {transformers.__version__}, torch "
                     f"{torch.__version__.split('+')[0]}, float32, dequantized from GGUF",
        "config": cfg,
        "tokenizer": {"adds_bos": adds_bos, "bos_id": tok.bos_token_id,
                      "eos_id": tok.eos_token_id},
        "prompt_text": PROMPT,
        "prompt_ids": ids,
        "positions": positions,
        "margins": margins,
        "greedy_ids": greedy,
        "greedy_margins": greedy_margins,
        "float64_max_abs_diff": r6(diff64),
    }
    with open(out_path, "w") as f:
        json.dump(result, f, separators=(",", ":"))
        f.write("\n")
    print("greedy ids:", greedy)
    print("greedy text:", repr(tok.decode(greedy)))
    print("top-1 margins at prompt positions:", margins)
    print("float32 vs float64 max |logit diff|: %.3g" % diff64)
    print(f"wrote {out_path} ({os.path.getsize(out_path)} bytes)")


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    default_data = os.environ.get("RIDGE_TESTDATA_DIR") or os.path.join(repo, "..", "shared",
                                                                         "testdata")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--testdata", default=default_data, help="shared test data directory")
    ap.add_argument("--out", default=os.path.join(repo, "tests", "data", "tiny-qwen"))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for gguf_file, json_name in MODELS:
        make(os.path.join(args.testdata, "tiny-qwen"), gguf_file, os.path.join(args.out, json_name))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Reference logits goldens for ridge, from Hugging Face transformers' own Llama.

Independent reference for the C++ engine's end-to-end tests: transformers loads
the GGUF (dequantizing every tensor to float32 with gguf-py, un-permuting q/k to
its rotate-half rope convention) and runs its eager Llama forward in float32 on
the CPU. Nothing comes from a model hub (HF_HUB_OFFLINE=1). Needs torch,
transformers (5.x), accelerate (transformers requires it to load a GGUF), gguf, numpy.

Invocation (from the repository root):
    HF_HUB_OFFLINE=1 /opt/refenv/bin/python tools/gen_logits_goldens.py
        [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--out tests/data/smollm2]
        [--dump DIR [--dump-prompt NAME]]

Output (--out, default tests/data/smollm2/):
  goldens.json
    {"model": gguf file name, "sha256": of the gguf file,
     "generator": {"script", "python", "torch", "transformers", "gguf", "numpy"},
     "config": {the loaded model config: layers, d, heads, rope_theta, rms_eps, ...},
     "tokenizer": {"add_bos": false, "pre": "smollm", "note": ...},
     "prompts": [{
        "name": str, "text": str (exact text that was tokenized),
        "ids": [int] (prompt token ids, no BOS added; feed exactly these),
        "top5": [[[id, logit] x5] per prompt position] (descending logit),
        "max_abs": [max |logit| over the whole vocabulary, per prompt position],
        "last_logits_file": "<name>.last.f32",
        "greedy": [64 ids] (argmax 64 times after the prompt; no EOS stop,
                  no repetition penalty or any other logits processor),
        "greedy_gap": [64 floats] (top1 - top2 logit at each greedy step;
                  small values mark near ties where a C++ engine may diverge),
        "greedy_top1": [64 floats] (the winning logit at each greedy step),
        "greedy_text": str (decoded continuation, for humans),
        "ids_hf_gguf_tokenizer": [int] (only where transformers' GGUF tokenizer
                  disagrees with "ids"; see tokenizer.note)}]}
    Logits are float32 values written with 9 significant digits (exact round trip).
  <name>.last.f32
    The full logits of the last prompt position: vocab_size (49152) float32,
    raw little-endian, no header.

--dump DIR (not committed; for debugging the C++ engine tensor by tensor) writes,
for one prompt (--dump-prompt, default "english"), raw little-endian float32
row-major files DIR/<name>.f32 and DIR/index.json {"prompt", "ids", "tensors":
[{"name", "file", "shape"}]}. Names (T = prompt tokens):
  embed                       (T, d)       token embeddings = HF hidden_states[0]
  layer.{i}.attn_norm         (T, d)       input_layernorm(x)
  layer.{i}.q / .k / .v       (T, n_heads*64) / (T, n_kv*64)   projections, before rope
  layer.{i}.q_rope / .k_rope  same         after rope
  layer.{i}.attn_out          (T, d)       o_proj output (before the residual add)
  layer.{i}.attn_resid        (T, d)       x + attn_out
  layer.{i}.ffn_norm          (T, d)       post_attention_layernorm(attn_resid)
  layer.{i}.ffn_gate / .ffn_up (T, d_ff)   gate_proj / up_proj outputs
  layer.{i}.ffn_out           (T, d)       down_proj(silu(gate) * up)
  layer.{i}.out               (T, d)       residual stream after layer i
                                           = HF hidden_states[i+1] for i < n_layers-1
  final_norm                  (T, d)       model.norm(layer.{n-1}.out) = HF hidden_states[n]
                                           (transformers overwrites the last hidden
                                           state with the normed one)
  logits                      (T, vocab)
q, k, q_rope, k_rope are stored in the GGUF / llama.cpp layout (the layout the
C++ engine sees when it multiplies by the weights as stored in the file), i.e.
HF's rows re-permuted within each head; there the rope rotates adjacent pairs
(x[2i], x[2i+1]) by pos * theta^(-2i/head_dim). The script checks this.
"""

import argparse
import hashlib
import json
import os
import platform
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import gguf  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

N_GREEDY = 64

# ---------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------

ENGLISH = (
    "The water cycle describes how water moves between the oceans, the air and "
    "the land. It begins when"
)

CHAT_USER = "Explain in two sentences why the sky is blue."

CODE = '''def fibonacci(n):
    """Return the first n Fibonacci numbers."""
    a, b = 0, 1
    result = []
    for _ in range(n):
        result.append(a)
        a, b = b, a + b
    return result


def is_prime(n):
'''

# Digits after several spaces / tabs / newlines exercise the "smollm"
# pre-tokenizer (digits split before the GPT-2 regex); see tokenizer note.
NUMBERS = (
    "Invoice #4821 (due 2024-03-15):\n"
    "  - 3 x widgets @ $12.50   =  $37.50;\n"
    "\t- 12 x bolts  @ $0.075\t=   $0.90!!\n"
    "Subtotal:\t\t38.40   |  tax (8.25%) ->   3.17...\n\n"
    "TOTAL  =  41.57?  [ok]  {ref: A-7/b_9}  ~~  page   2 of  3\n\n"
    "    1. Pay by"
)

LONG = """The river begins as a thin thread of water high in the mountains, where snow lingers long after the valleys below have turned green. In early spring the sun warms the slopes, and the meltwater gathers in small channels that trickle between stones and roots. Nobody who stands beside that first cold stream would guess that it will one day carry barges, turn mill wheels and water the fields of a whole province.

As it descends, the stream is joined by others. Each tributary brings its own character: one is cloudy with clay from a collapsing bank, another is clear and fast from a spring that rises out of limestone. By the time the water reaches the foothills it has become a real river, wide enough that a child could not throw a stone across it. Here the first villages appear. Their people built low walls of fitted stone to keep the spring floods out of their gardens, and they learned to read the colour of the water as a warning of storms far upstream.

Further down, the valley opens into a broad plain. The river slows and begins to wander, looping back on itself in great bends that slowly shift over the centuries. Old channels are cut off and left behind as quiet lakes, where herons wait among the reeds. Farmers prize the soil of the plain, because every flood leaves behind a fresh layer of silt, rich and dark and easy to plough. Yet the same floods that feed the fields can also destroy them, and the history of the plain is a long negotiation between the people and the water.

Towns grew at the places where the river could be crossed. First there were fords, then ferries, then bridges of timber and finally of stone. Markets gathered at the bridges, because every traveller had to pass that way, and merchants learned that a good crossing was worth more than a gold mine. Some of those towns became cities, with cathedrals, libraries and universities, and their citizens began to think of the river less as a force of nature and more as a road.

At last the river reaches the sea. It spreads into a delta of marshes and sandbanks, splitting into many mouths, each one lined with mud and tall grass. The fresh water meets the salt tide, and for a few miles the two mix in a restless, brackish zone that is home to creatures found nowhere else. Standing on the shore, it is hard to believe that all this began as a trickle of snowmelt, and harder still to imagine how"""


def build_prompts(tok):
    chat_text = tok.apply_chat_template(
        [{"role": "user", "content": CHAT_USER}], tokenize=False, add_generation_prompt=True
    )
    return [
        ("english", ENGLISH),
        ("chat", chat_text),
        ("code", CODE),
        ("numbers", NUMBERS),
        ("long", LONG),
    ]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def f9(x):
    """float32 -> Python float printed with 9 significant digits (round-trips float32)."""
    return float(f"{float(x):.9g}")


def llama_cpp_permute(w, n_head):
    """The q/k row permutation convert_hf_to_gguf.py applies (HF layout -> GGUF layout).

    Within each head the HF rows [0..hd/2) and [hd/2..hd) (rotate-half pairs
    (j, j+hd/2)) are interleaved so that pairs become adjacent (2j, 2j+1).
    Works on the first axis of a weight (rows) or the last axis of activations
    if they are transposed first.
    """
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def perm_act(x, n_head):
    """Apply llama_cpp_permute to the feature axis of activations (T, n_head*hd)."""
    return llama_cpp_permute(x.T, n_head).T


def rope_interleaved(x, n_head, head_dim, theta):
    """llama.cpp 'normal' rope on GGUF-layout activations (T, n_head*head_dim):
    rotate adjacent pairs (2i, 2i+1) of each head by pos * theta^(-2i/head_dim)."""
    T = x.shape[0]
    x = x.reshape(T, n_head, head_dim // 2, 2).astype(np.float64)
    inv = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (hd/2)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]  # (T, hd/2)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[..., 0], x[..., 1]
    out = np.stack([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)
    return out.reshape(T, n_head * head_dim)


def dequant_q4_1_row(raw_row_bytes):
    """Hand-written Q4_1 decode of one row (independent of gguf-py):
    block of 32 = f16 d, f16 m, 16 bytes qs; x[j] = (qs[j] & 15)*d + m,
    x[j+16] = (qs[j] >> 4)*d + m."""
    b = np.frombuffer(raw_row_bytes, dtype=np.uint8).reshape(-1, 20)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)  # (nb, 1)
    m = b[:, 2:4].copy().view(np.float16).astype(np.float32)
    qs = b[:, 4:20]
    lo = (qs & 15).astype(np.float32)
    hi = (qs >> 4).astype(np.float32)
    return (np.concatenate([lo, hi], axis=1) * d + m).reshape(-1)


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------

def check_config(cfg):
    info = {
        "n_layers": cfg.num_hidden_layers,
        "d_model": cfg.hidden_size,
        "n_heads": cfg.num_attention_heads,
        "n_kv_heads": cfg.num_key_value_heads,
        "head_dim": getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads),
        "d_ff": cfg.intermediate_size,
        "vocab_size": cfg.vocab_size,
        "rope_theta": None,
        "rope_type": None,
        "rms_norm_eps": cfg.rms_norm_eps,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "hidden_act": cfg.hidden_act,
        "max_position_embeddings": cfg.max_position_embeddings,
    }
    rp = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    info["rope_theta"] = rp.get("rope_theta", getattr(cfg, "rope_theta", None))
    info["rope_type"] = rp.get("rope_type", "default")
    print("loaded config:", json.dumps(info, indent=1))
    expect = {"n_layers": 30, "d_model": 576, "n_heads": 9, "n_kv_heads": 3, "head_dim": 64,
              "d_ff": 1536, "vocab_size": 49152, "rope_theta": 100000.0, "rope_type": "default",
              "tie_word_embeddings": True, "hidden_act": "silu"}
    bad = {k: (info[k], v) for k, v in expect.items() if info[k] != v}
    if abs(info["rms_norm_eps"] - 1e-5) > 1e-9:
        bad["rms_norm_eps"] = (info["rms_norm_eps"], 1e-5)
    if bad:
        sys.exit(f"config mismatch (got, expected): {bad}")
    return info


def check_weights(model, reader, cfg):
    """Compare a few HF parameters with gguf-py's own dequantization of the file."""
    t_by_name = {t.name: t for t in reader.tensors}
    sd = model.state_dict()
    H, KV = cfg["n_heads"], cfg["n_kv_heads"]
    cases = [
        ("token_embd.weight", "model.embed_tokens.weight", None),
        ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", H),
        ("blk.7.attn_k.weight", "model.layers.7.self_attn.k_proj.weight", KV),
        ("blk.29.ffn_down.weight", "model.layers.29.mlp.down_proj.weight", None),
        ("blk.3.attn_norm.weight", "model.layers.3.input_layernorm.weight", None),
    ]
    print("weight check (HF parameter vs gguf.quants.dequantize of the GGUF tensor):")
    for gname, hname, perm in cases:
        t = t_by_name[gname]
        g = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        h = sd[hname].detach().cpu().numpy()
        if perm is not None:
            diff_raw = float(np.abs(g - h).max())
            h = llama_cpp_permute(h, perm)
        diff = float(np.abs(g - h).max())
        extra = f" (without the q/k permutation: {diff_raw:.3g})" if perm is not None else ""
        print(f"  {gname:24s} {t.tensor_type.name:5s} {str(g.shape):12s} max|diff| = {diff:.3g}{extra}")
        if diff != 0.0:
            sys.exit(f"weight mismatch for {gname}")
    # One row decoded by hand, to check gguf-py itself on Q4_1.
    t = t_by_name["blk.0.attn_q.weight"]
    assert t.tensor_type == gguf.GGMLQuantizationType.Q4_1
    row0 = dequant_q4_1_row(np.asarray(t.data)[0].tobytes())
    g0 = gguf.quants.dequantize(t.data, t.tensor_type)[0]
    print(f"  hand-written Q4_1 decode of blk.0.attn_q row 0 vs gguf-py: max|diff| = "
          f"{float(np.abs(row0 - g0).max()):.3g}")
    if not np.array_equal(row0, g0):
        sys.exit("hand Q4_1 decode disagrees with gguf-py")


def check_rope_convention(model, cfg):
    """HF rope (rotate-half on HF rows) == interleaved rope on GGUF-layout rows."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    H, hd = cfg["n_heads"], cfg["head_dim"]
    T = 7
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, H, T, hd, generator=g)
    pos = torch.arange(T)[None]
    cos, sin = model.model.rotary_emb(q, pos)
    q_rot, _ = apply_rotary_pos_emb(q, q, cos, sin)
    hf_pre = q[0].permute(1, 0, 2).reshape(T, H * hd).numpy()
    hf_post = q_rot[0].permute(1, 0, 2).reshape(T, H * hd).numpy()
    ours = rope_interleaved(perm_act(hf_pre, H), H, hd, cfg["rope_theta"])
    diff = float(np.abs(ours - perm_act(hf_post, H)).max())
    print(f"rope check: interleaved-pair rope on GGUF layout vs HF rotate-half: max|diff| = {diff:.3g}")
    if diff > 1e-4:
        sys.exit("rope convention check failed")


# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------

def smollm_tokenizer(hf_tok):
    """transformers' GGUF tokenizer with llama.cpp's 'smollm' pre-tokenizer restored.

    GGUF says tokenizer.ggml.pre = "smollm": llama.cpp splits every digit
    (\\p{N}) first, then applies the GPT-2 regex (the original SmolLM2
    tokenizer.json: Digits(individual_digits) + ByteLevel). transformers' GGUF
    converter builds a plain ByteLevel pre-tokenizer and drops the digit split,
    which changes ids where digits follow several spaces ("  1" -> "Ġ","Ġ","1"
    instead of "ĠĠ","1").
    """
    from tokenizers import pre_tokenizers
    tk = hf_tok.backend_tokenizer.__class__.from_str(hf_tok.backend_tokenizer.to_str())
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    return tk


# ---------------------------------------------------------------------------
# Forward passes
# ---------------------------------------------------------------------------

@torch.no_grad()
def prompt_forward(model, ids):
    out = model(torch.tensor([ids]), use_cache=False)
    return out.logits[0].float()  # (T, vocab)


@torch.no_grad()
def greedy(model, ids, n):
    """Plain argmax decoding with transformers' KV cache: n steps, no EOS stop,
    no logits processors. Returns ids, top1-top2 gaps, top1 logits."""
    out = model(torch.tensor([ids]), use_cache=True)
    cache = out.cache if hasattr(out, "cache") else out.past_key_values
    logits = out.logits[0, -1].float()
    toks, gaps, tops = [], [], []
    for step in range(n):
        top2 = torch.topk(logits, 2)
        nxt = int(top2.indices[0])
        toks.append(nxt)
        gaps.append(float(top2.values[0] - top2.values[1]))
        tops.append(float(top2.values[0]))
        if step == n - 1:
            break
        out = model(torch.tensor([[nxt]]), cache=cache, use_cache=True)
        cache = out.cache if hasattr(out, "cache") else out.past_key_values
        logits = out.logits[0, -1].float()
    return toks, gaps, tops


@torch.no_grad()
def check_generate(model, ids, ours, n):
    """Cross-check the hand loop against model.generate(do_sample=False)."""
    gc = model.generation_config
    saved = (gc.eos_token_id, model.config.eos_token_id)
    gc.eos_token_id = None
    model.config.eos_token_id = None
    try:
        seq = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=n,
                             repetition_penalty=1.0, eos_token_id=None, pad_token_id=2,
                             attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    finally:
        gc.eos_token_id, model.config.eos_token_id = saved
    gen = seq[0, len(ids):].tolist()
    return gen == ours, len(gen)


@torch.no_grad()
def dump_intermediates(model, ids, cfg, out_dir, prompt_name):
    """Named per-layer tensors for one prompt, via output_hidden_states + hooks."""
    os.makedirs(out_dir, exist_ok=True)
    H, KV, hd, L = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["n_layers"]
    rec = {}
    hooks = []

    def keep(name, post=None):
        def hook(mod, inp, out):
            t = out[0] if isinstance(out, tuple) else out
            rec[name] = t[0].detach().float().numpy().copy()
        return hook

    for i, layer in enumerate(model.model.layers):
        a, m = layer.self_attn, layer.mlp
        hooks += [
            layer.input_layernorm.register_forward_hook(keep(f"layer.{i}.attn_norm")),
            a.q_proj.register_forward_hook(keep(f"layer.{i}.q")),
            a.k_proj.register_forward_hook(keep(f"layer.{i}.k")),
            a.v_proj.register_forward_hook(keep(f"layer.{i}.v")),
            a.o_proj.register_forward_hook(keep(f"layer.{i}.attn_out")),
            layer.post_attention_layernorm.register_forward_hook(keep(f"layer.{i}.ffn_norm")),
            m.gate_proj.register_forward_hook(keep(f"layer.{i}.ffn_gate")),
            m.up_proj.register_forward_hook(keep(f"layer.{i}.ffn_up")),
            m.down_proj.register_forward_hook(keep(f"layer.{i}.ffn_out")),
            layer.register_forward_hook(keep(f"layer.{i}.out")),
        ]
    try:
        out = model(torch.tensor([ids]), use_cache=False, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    hs = [h[0].float().numpy() for h in out.hidden_states]
    assert len(hs) == L + 1
    T = len(ids)
    tensors = [("embed", hs[0])]
    for i in range(L):
        if i < L - 1:
            d = float(np.abs(hs[i + 1] - rec[f"layer.{i}.out"]).max())
            assert d == 0.0, f"hidden_states[{i + 1}] != layer.{i}.out ({d})"
        x_in = hs[0] if i == 0 else rec[f"layer.{i - 1}.out"]
        rec[f"layer.{i}.attn_resid"] = x_in + rec[f"layer.{i}.attn_out"]
        q = perm_act(rec[f"layer.{i}.q"], H)
        k = perm_act(rec[f"layer.{i}.k"], KV)
        rec[f"layer.{i}.q"], rec[f"layer.{i}.k"] = q, k
        rec[f"layer.{i}.q_rope"] = rope_interleaved(q, H, hd, cfg["rope_theta"]).astype(np.float32)
        rec[f"layer.{i}.k_rope"] = rope_interleaved(k, KV, hd, cfg["rope_theta"]).astype(np.float32)
        for part in ("attn_norm", "q", "k", "v", "q_rope", "k_rope", "attn_out", "attn_resid",
                     "ffn_norm", "ffn_gate", "ffn_up", "ffn_out", "out"):
            tensors.append((f"layer.{i}.{part}", rec[f"layer.{i}.{part}"]))
    # transformers replaces hidden_states[-1] with the final-normed state.
    fn = model.model.norm(torch.from_numpy(rec[f"layer.{L - 1}.out"])[None])[0].numpy()
    assert float(np.abs(fn - hs[L]).max()) == 0.0
    tensors.append(("final_norm", hs[L]))
    tensors.append(("logits", out.logits[0].float().numpy()))
    index = {"prompt": prompt_name, "ids": ids, "tensors": []}
    for name, arr in tensors:
        arr = np.ascontiguousarray(arr, dtype="<f4")
        assert arr.shape[0] == T
        arr.tofile(os.path.join(out_dir, name + ".f32"))
        index["tensors"].append({"name": name, "file": name + ".f32", "shape": list(arr.shape)})
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"dumped {len(tensors)} tensors for prompt '{prompt_name}' ({T} tokens) to {out_dir}")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(root, "tests", "data", "smollm2"))
    ap.add_argument("--dump", metavar="DIR", help="also dump named per-layer tensors for one prompt")
    ap.add_argument("--dump-prompt", default="english")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    models_dir, name = os.path.split(os.path.abspath(args.model))
    t0 = time.time()

    tok = AutoTokenizer.from_pretrained(models_dir, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        models_dir, gguf_file=name, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    if model.config._attn_implementation != "eager" or model.dtype != torch.float32:
        sys.exit(f"unexpected attn={model.config._attn_implementation} dtype={model.dtype}")
    cfg = check_config(model.config)
    if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        sys.exit("lm_head is not tied to embed_tokens")

    reader = gguf.GGUFReader(args.model)
    add_bos = bool(reader.fields["tokenizer.ggml.add_bos_token"].contents())
    pre = reader.fields["tokenizer.ggml.pre"].contents()
    print(f"GGUF: add_bos_token={add_bos} pre={pre!r} bos_id="
          f"{reader.fields['tokenizer.ggml.bos_token_id'].contents()}")
    print(f"HF tokenizer: bos={tok.bos_token!r}({tok.bos_token_id}) eos={tok.eos_token!r}({tok.eos_token_id}) "
          f"add_bos_token={getattr(tok, 'add_bos_token', None)}; "
          f"tok('Hi') = {tok('Hi').input_ids}")
    check_weights(model, reader, cfg)
    check_rope_convention(model, cfg)
    smol = smollm_tokenizer(tok)

    prompts = build_prompts(tok)
    os.makedirs(args.out, exist_ok=True)
    result = {
        "model": name,
        "sha256": sha256_of(args.model),
        "generator": {
            "script": "tools/gen_logits_goldens.py",
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "gguf": getattr(gguf, "__version__", None) or _dist_version("gguf"),
            "numpy": np.__version__,
            "dtype": "float32", "attn_implementation": "eager", "device": "cpu",
        },
        "config": cfg,
        "tokenizer": {
            "add_bos": add_bos, "pre": pre,
            "note": "ids are tokenized without adding BOS/EOS (GGUF add_bos_token=false; the HF "
                    "tokenizer adds none either); special tokens in the text (<|im_start|>=1, "
                    "<|im_end|>=2) are single tokens. Pre-tokenizer = llama.cpp 'smollm' "
                    "(each digit split first, then the GPT-2 regex); transformers' GGUF tokenizer "
                    "omits the digit split, and where that changes the ids they are given as "
                    "ids_hf_gguf_tokenizer.",
        },
        "prompts": [],
    }

    dump_done = False
    for pname, text in prompts:
        ids = smol.encode(text, add_special_tokens=False).ids
        ids_hf = tok(text, add_special_tokens=False).input_ids
        assert tok.decode(ids) == text, f"{pname}: ids do not decode back to the text"
        if pname == "chat":
            for sid, s in ((1, "<|im_start|>"), (2, "<|im_end|>")):
                assert tok.convert_tokens_to_ids(s) == sid
                assert ids.count(sid) == text.count(s), f"{s} not a single token"

        logits = prompt_forward(model, ids)  # (T, V)
        top = torch.topk(logits, 5, dim=-1)
        top5 = [[[int(i), f9(v)] for i, v in zip(ri.tolist(), rv.tolist())]
                for ri, rv in zip(top.indices, top.values)]
        max_abs = [f9(v) for v in logits.abs().max(dim=-1).values.tolist()]
        last_file = f"{pname}.last.f32"
        logits[-1].numpy().astype("<f4").tofile(os.path.join(args.out, last_file))

        g_ids, g_gap, g_top = greedy(model, ids, N_GREEDY)
        assert g_ids[0] == top5[-1][0][0], "first greedy token != argmax of prompt forward"
        same, n_gen = check_generate(model, ids, g_ids, N_GREEDY)
        cont = tok.decode(g_ids)
        entry = {
            "name": pname, "text": text, "ids": ids,
            "top5": top5, "max_abs": max_abs, "last_logits_file": last_file,
            "greedy": g_ids, "greedy_gap": [f9(x) for x in g_gap],
            "greedy_top1": [f9(x) for x in g_top], "greedy_text": cont,
        }
        if ids_hf != ids:
            entry["ids_hf_gguf_tokenizer"] = ids_hf
        result["prompts"].append(entry)

        print(f"\n=== {pname}: {len(ids)} prompt tokens"
              f"{'' if ids_hf == ids else f' (transformers GGUF tokenizer differs: {len(ids_hf)} ids)'}")
        print(f"  last-position top5: {top5[-1]}  max|logit| {max_abs[-1]:.4g}")
        print(f"  generate(do_sample=False) agrees with the argmax loop: {same} ({n_gen} tokens)")
        print(f"  smallest greedy gap: {min(g_gap):.4g} at step {int(np.argmin(g_gap))}")
        print(f"  continuation: {cont!r}")

        if args.dump and pname == args.dump_prompt:
            dump_intermediates(model, ids, cfg, args.dump, pname)
            dump_done = True

    if args.dump and not dump_done:
        sys.exit(f"--dump-prompt {args.dump_prompt!r} is not one of {[p for p, _ in prompts]}")

    with open(os.path.join(args.out, "goldens.json"), "w") as f:
        json.dump(result, f, separators=(",", ":"))
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(args.out, x)) for x in os.listdir(args.out))
    print(f"\nwrote {args.out}/goldens.json + {len(prompts)} .f32 files ({total / 1e6:.2f} MB in the folder)"
          f" in {time.time() - t0:.0f} s")


def _dist_version(pkg):
    from importlib.metadata import version
    return version(pkg)


if __name__ == "__main__":
    main()

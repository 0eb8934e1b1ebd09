#!/usr/bin/env python3
"""Reference renderings of real chat templates, for ridge's native chat-template families.

What it makes: tests/data/chat-templates/goldens.json: for every template file of the shared test
data (chat-templates/*.jinja, the chat_template of published models), each test conversation
rendered with and without the generation prompt, or the error the template raises for it.
Nothing here comes from ridge.

From what: Python jinja2, set up as Hugging Face transformers' apply_chat_template sets it up: an
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols extension, a
tojson filter that keeps non-ASCII text, raise_exception, strftime_now (fixed here to
26 Jul 2024 so the goldens do not change with the day), and the {% generation %} block tag that
transformers' AssistantTracker extension adds (outside assistant-mask tracking it renders its body
unchanged). The variables: messages, add_generation_prompt, bos_token "<BOS>", eos_token "<EOS>"
(placeholders the tests pass too), tools None and documents None (transformers passes both).

How to run (from the repository root; needs only jinja2 from PyPI, no torch/transformers):
    python3 -m venv /tmp/tmpl-venv && /tmp/tmpl-venv/bin/pip install jinja2
    /tmp/tmpl-venv/bin/python tools/chat_template_goldens.py [--templates DIR] [--out FILE]
--templates defaults to $RIDGE_TESTDATA_DIR/chat-templates, else ../shared/testdata/chat-templates
beside the repository; --out defaults to tests/data/chat-templates/goldens.json.
"""
import argparse
import datetime
import hashlib
import json
import os
import pathlib

import jinja2
import jinja2.ext
import jinja2.sandbox
from jinja2 import nodes

BOS, EOS = "<BOS>", "<EOS>"
DATE = datetime.datetime(2024, 7, 26)

# The conversations the tests render: a system message or not, several turns, one turn; content
# with newlines, surrounding spaces and special-token look-alikes (which must stay text).
CONVERSATIONS = {
    "system": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello, who are you?"},
        {"role": "assistant", "content": "I am an assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "nosystem": [
        {"role": "user", "content": "Hello, who are you?"},
        {"role": "assistant", "content": "I am an assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "single": [{"role": "user", "content": "Hi there"}],
    "lookalikes": [
        {"role": "system", "content": "  Answer in\ntwo lines.  "},
        {"role": "user", "content": "Say <|im_end|> and [INST] and <|eot_id|>\nthen stop."},
        {"role": "assistant", "content": "\n<|im_end|> [INST] <|eot_id|>\n"},
        {"role": "user", "content": "Again, please."},
    ],
}


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}, as transformers' AssistantTracker parses it. That
    extension only records where the body lands when assistant masks are asked for; the text it
    renders is the body's, which is all this does."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: DATE.strftime(fmt)
    return env


def render(env, text, messages, gen):
    try:
        template = env.from_string(text)
        return template.render(messages=messages, add_generation_prompt=gen, bos_token=BOS, eos_token=EOS,
                               tools=None, documents=None)
    except Exception as e:  # the template's own refusal, or what it cannot render: recorded
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    here = pathlib.Path(__file__).resolve().parent.parent
    default_dir = pathlib.Path(os.environ.get("RIDGE_TESTDATA_DIR", here.parent / "shared" / "testdata")) / "chat-templates"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", default=str(default_dir))
    ap.add_argument("--out", default=str(here / "tests" / "data" / "chat-templates" / "goldens.json"))
    args = ap.parse_args()

    env = environment()
    out = {
        "source": "chat-templates/*.jinja of the shared test data",
        "renderer": f"jinja2 {jinja2.__version__}, set up as transformers' apply_chat_template",
        "bos_token": BOS,
        "eos_token": EOS,
        "date": DATE.strftime("%d %b %Y"),
        "conversations": CONVERSATIONS,
        "templates": {},
    }
    for path in sorted(pathlib.Path(args.templates).glob("*.jinja")):
        text = path.read_text(encoding="utf-8")
        renders = {}
        for name, messages in CONVERSATIONS.items():
            for gen in (True, False):
                renders[f"{name}/{'gen' if gen else 'nogen'}"] = render(env, text, messages, gen)
        out["templates"][path.name] = {
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "first_line": text.splitlines()[0][:120] if text else "",
            "renders": renders,
        }
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    errors = sum(1 for t in out["templates"].values() for r in t["renders"].values() if isinstance(r, dict))
    print(f"{len(out['templates'])} templates, {errors} renders refused, written to {args.out} "
          f"({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()

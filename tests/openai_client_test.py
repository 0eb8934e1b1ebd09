#!/usr/bin/env python3
"""`ridge serve` driven by the official `openai` Python package, as a user's program would drive it.

Starts the server (loopback, any free port, an API key), then with openai.OpenAI: chat and
completions, streamed and not, at temperature 0 (the streamed text must be the whole text); chat
logprobs with top_logprobs; stop=[]
taken as none, a stop sequence ending the answer before it, five refused with a 400 naming 'stop';
a wrong key refused with a 401. Exits 0 when every check holds, 1 on the first that does not.
Without the package it prints why and exits 77 (CTest's skip), unless RIDGE_REQUIRE_OPENAI=1 (CI,
which installs it), where that is a failure.

Usage: openai_client_test.py RIDGE_BINARY MODEL.gguf
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

try:
    import openai
except ImportError as e:
    print(f"openai_client_test: the openai package is not installed ({e}); pip install openai")
    sys.exit(1 if os.environ.get("RIDGE_REQUIRE_OPENAI") == "1" else 77)


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def main():
    ridge, model = sys.argv[1], sys.argv[2]
    if not os.path.exists(model):
        print(f"openai_client_test: {model} is missing (tools/fetch_model.sh)")
        sys.exit(1 if os.environ.get("RIDGE_REQUIRE_OPENAI") == "1" else 77)
    err = tempfile.NamedTemporaryFile(prefix="ridge-serve-", suffix=".log", delete=False)
    env = dict(os.environ, OMP_NUM_THREADS="2")
    server = subprocess.Popen([ridge, "serve", "-m", model, "--port", "0", "-c", "256", "--max-batch", "2",
                               "--api-key", "test-key", "--no-probe"], stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        port = None
        for _ in range(1200):  # up to 2 minutes (sanitizer builds load slowly)
            with open(err.name) as f:
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", f.read())
            if m:
                port = int(m.group(1))
                break
            if server.poll() is not None:
                break
            time.sleep(0.1)
        check(port is not None, "ridge serve starts listening")
        base = f"http://127.0.0.1:{port}/v1"
        client = openai.OpenAI(base_url=base, api_key="test-key", max_retries=0, timeout=300)

        models = client.models.list()
        check(len(models.data) == 1, "models.list() names the one model")

        messages = [{"role": "user", "content": "What is the capital of France?"}]
        chat = client.chat.completions.create(model="any", messages=messages, max_tokens=12, temperature=0)
        text = chat.choices[0].message.content
        check(chat.choices[0].finish_reason in ("stop", "length") and text, "chat, not streamed")
        check(chat.usage.completion_tokens > 0 and chat.usage.prompt_tokens > 0, "chat usage")
        parts = [c.choices[0].delta.content or "" for c in
                 client.chat.completions.create(model="any", messages=messages, max_tokens=12, temperature=0,
                                                stream=True) if c.choices]
        check("".join(parts) == text, "chat streamed gives the same text")

        lp = client.chat.completions.create(model="any", messages=messages, max_tokens=6, temperature=0,
                                            logprobs=True, top_logprobs=2)
        entries = lp.choices[0].logprobs.content
        check(len(entries) == lp.usage.completion_tokens and
              b"".join(bytes(e.bytes) for e in entries).decode("utf-8", "replace") == lp.choices[0].message.content,
              "chat logprobs: one entry a token, their bytes the text")
        check(all(e.logprob <= 0 and len(e.top_logprobs) == 2 and e.top_logprobs[0].logprob == e.logprob
                  for e in entries), "chat logprobs: greedy takes the most likely, two alternatives each")

        done = client.completions.create(model="any", prompt="The capital of France is", max_tokens=8, temperature=0)
        check(done.choices[0].text and done.usage.prompt_tokens > 0, "completion, not streamed")
        streamed = "".join(c.choices[0].text for c in client.completions.create(
            model="any", prompt="The capital of France is", max_tokens=8, temperature=0, stream=True) if c.choices)
        check(streamed == done.choices[0].text, "completion streamed gives the same text")

        empty_stop = client.completions.create(model="any", prompt="The capital of France is", max_tokens=8,
                                               temperature=0, stop=[])
        check(empty_stop.choices[0].text == done.choices[0].text, "stop=[] means no stop sequence")
        cut = done.choices[0].text[3:6]
        stopped = client.completions.create(model="any", prompt="The capital of France is", max_tokens=8,
                                            temperature=0, stop=[cut])
        check(stopped.choices[0].text == done.choices[0].text.split(cut)[0] and
              stopped.choices[0].finish_reason == "stop", "a stop sequence ends the answer before it")
        try:
            client.completions.create(model="any", prompt="Hi", max_tokens=2, stop=["a", "b", "c", "d", "e"])
            check(False, "five stop sequences are refused")
        except openai.BadRequestError as e:
            check("stop" in str(e), "five stop sequences are refused with a 400 naming 'stop'")

        bad = openai.OpenAI(base_url=base, api_key="wrong-key", max_retries=0, timeout=60)
        try:
            bad.models.list()
            check(False, "a wrong key is refused")
        except openai.AuthenticationError:
            check(True, "a wrong key is refused with a 401")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            rc = server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            rc = -1
        os.unlink(err.name)
    check(rc == 0, "the server exits 0 on SIGTERM")
    print("openai_client_test: every check held")


if __name__ == "__main__":
    main()

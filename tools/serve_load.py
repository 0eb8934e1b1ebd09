#!/usr/bin/env python3
"""Load and abuse figures for `ridge serve`, loopback only, every scenario bounded in count and time.

    python3 tools/serve_load.py [--ridge build/ridge] [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
                                [--duration 60] [--only NAME ...]

Each scenario starts its own server (`ridge serve -c 512 --max-batch 8`, as the server issue was
tried) on a free port and prints one line of figures:

  slow        64 clients sending their headers a byte a second, while /health and a 4-token
              completion are asked in turn for 20 s: p50/p99 latency of each, errors
  bigbody     4 concurrent 15 MiB prompts: the server's peak RSS (VmHWM) and each time to its 4xx
  disconnect  16 non-streamed 450-token requests whose sockets close after 2 s: seconds until
              ridge_kv_blocks_used is back to 0 (the bound: 60 s)
  sigterm     32 streaming clients, SIGTERM after 3 s: streams that ended with [DONE] / total, exit code
  load        64 clients for --duration seconds, each asking 16-token completions: answered, errors
  multiturn   a chat of 8 turns, each the whole conversation so far, streamed (ridge bench-serve
              --multi-turn): time to first token with the prefix cache and with --no-prefix-cache

Standard library only. Figures depend on the machine and on what else runs on it; say which.
"""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args, extra=(), ctx=512):
        self.port = free_port()
        cmd = [args.ridge, "serve", "-m", args.model, "--host", "127.0.0.1", "--port", str(self.port),
               "-c", str(ctx), "--max-batch", "8", *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        sys.exit("serve_load: the server did not answer /health within 60 s")

    def conn(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def get(self, path):
        c = self.conn(10)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body

    def post(self, path, obj, timeout=120):
        c = self.conn(timeout)
        c.request("POST", path, body=json.dumps(obj), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body

    def metric(self, name):
        for line in self.get("/metrics")[1].decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def hwm_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def short_completion(s, n=4, timeout=120):
    return s.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": n, "temperature": 0}, timeout)


def slow(args):
    s = Server(args)
    stop = threading.Event()
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n"

    def dribble():
        try:
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            for i in range(len(request)):
                if stop.is_set():
                    break
                sock.send(request[i:i + 1])
                stop.wait(1.0)
            sock.close()
        except OSError:
            pass

    threads = [threading.Thread(target=dribble, daemon=True) for _ in range(64)]
    for t in threads:
        t.start()
    time.sleep(2)
    health, comp, errors = [], [], 0
    end = time.time() + 20
    while time.time() < end:
        for kind, fn, out in (("health", lambda: s.get("/health"), health), ("completion", lambda: short_completion(s), comp)):
            t0 = time.time()
            try:
                status, _ = fn()
                if status != 200:
                    errors += 1
                out.append(time.time() - t0)
            except OSError:
                errors += 1
    stop.set()
    s.stop()
    print(f"slow: 64 slow-header clients; /health p50 {pct(health, 50) * 1e3:.1f} ms p99 {pct(health, 99) * 1e3:.1f} ms "
          f"({len(health)}); completion(4 tokens) p50 {pct(comp, 50) * 1e3:.0f} ms p99 {pct(comp, 99) * 1e3:.0f} ms "
          f"({len(comp)}); errors {errors}")


def bigbody(args):
    s = Server(args)
    before = s.hwm_mb()
    prompt = "word " * (15 * 1024 * 1024 // 5)
    results = [None] * 4

    def one(i):
        t0 = time.time()
        try:
            status, _ = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 1}, timeout=300)
        except OSError as e:
            status = str(e)
        results[i] = (status, time.time() - t0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = s.hwm_mb()
    s.stop()
    print(f"bigbody: 4 x 15 MiB prompts: answers {[r[0] for r in results]}, seconds {[round(r[1], 2) for r in results]}; "
          f"server peak RSS {before:.0f} MB at rest, {after:.0f} MB after")


def disconnect(args):
    s = Server(args)

    def one():
        try:
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            body = json.dumps({"prompt": "Once upon a time", "max_tokens": 450, "temperature": 0}).encode()
            sock.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            time.sleep(2)
            sock.close()
        except OSError:
            pass

    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t0 = time.time()
    used = s.metric("ridge_kv_blocks_used")
    while used and time.time() - t0 < 60:
        time.sleep(0.1)
        used = s.metric("ridge_kv_blocks_used")
    s.stop()
    print(f"disconnect: 16 non-streamed clients gone after 2 s: KV blocks back to {used:.0f} "
          f"{time.time() - t0:.2f} s after the last hung up")


def sigterm(args):
    s = Server(args)
    clean = [False] * 32

    def one(i):
        try:
            c = s.conn(60)
            c.request("POST", "/v1/completions", body=json.dumps({"prompt": "Once upon a time", "max_tokens": 300,
                                                                   "stream": True}),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            clean[i] = data.rstrip().endswith(b"data: [DONE]")
        except (OSError, http.client.HTTPException):
            pass

    threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    time.sleep(3)
    s.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join()
    code = s.proc.wait(60)
    print(f"sigterm: 32 streams, SIGTERM after 3 s: {sum(clean)}/32 ended with [DONE]; exit code {code}")


def load(args):
    s = Server(args)
    answered = errors = 0
    lock = threading.Lock()
    end = time.time() + args.duration

    def client():
        nonlocal answered, errors
        while time.time() < end:
            try:
                ok = short_completion(s, 16, timeout=args.duration + 60)[0] == 200
            except OSError:
                ok = False
            with lock:
                answered += ok
                errors += not ok

    threads = [threading.Thread(target=client) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.stop()
    print(f"load: 64 clients x {args.duration} s of 16-token completions: {answered} answered, {errors} errors")


def multiturn(args):
    """`ridge bench-serve --multi-turn 8` against a server with its prefix cache and one without."""
    question = ("Here is a note from my diary about a walk by the sea, the boats in the harbour and the people "
                "who fished from the pier all afternoon. What is one thing I might have seen there")
    medians = {}
    for label, extra in (("prefix cache", ()), ("no prefix cache", ("--no-prefix-cache",))):
        s = Server(args, extra, ctx=2048)
        out = subprocess.run([args.ridge, "bench-serve", "--port", str(s.port), "--multi-turn", "8", "-n", "48",
                              "-p", question, "--json"], capture_output=True, text=True, timeout=600)
        s.stop()
        if out.returncode != 0:
            sys.exit("serve_load: bench-serve failed: " + out.stderr.strip())
        doc = json.loads(out.stdout)
        turns = doc["turns"]
        medians[label] = doc["ttft_ms_median"]
        print(f"multiturn ({label}): turn prompt_tokens/reused/ttft_ms " +
              " ".join(f"{t['turn']}:{t['prompt_tokens']}/{t['reused_tokens']:.0f}/{t['ttft_ms']:.0f}" for t in turns) +
              f"; median ttft {doc['ttft_ms_median']:.0f} ms")
    print("multiturn: median time to first token " +
          ", ".join(f"{k} {v:.0f} ms" for k, v in medians.items()))


SCENARIOS = {"slow": slow, "bigbody": bigbody, "disconnect": disconnect, "sigterm": sigterm, "load": load,
             "multiturn": multiturn}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ridge", default=os.path.join(REPO, "build", "ridge"))
    ap.add_argument("--model", default=os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--only", nargs="*", choices=list(SCENARIOS))
    args = ap.parse_args()
    for name in args.only or SCENARIOS:
        SCENARIOS[name](args)
        sys.stdout.flush()


if __name__ == "__main__":
    main()

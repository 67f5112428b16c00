"""A stand-in for ``vllm`` / ``sglang`` server processes, for testing ``ramp launch`` without them.

``fake_pkgs/`` holds ``vllm.entrypoints.openai.api_server`` and ``sglang.launch_server`` modules that call
``main`` here; a test puts ``fake_pkgs`` on the child's PYTHONPATH so that ``python -m <real module>`` runs
this. It takes the real command line (model flag, --host, --port, anything else is echoed and ignored) and
behaves as the environment says:

    FAKE_MODE=http (default)  a tiny HTTP server: /health answers 503 for FAKE_DELAY_S seconds, then 200;
                              /v1/models, /version and a streaming /v1/completions of two tokens
    FAKE_MODE=sim             after FAKE_DELAY_S (not listening meanwhile), ramp's simulator on that port
    FAKE_EXIT=N               print an error and exit with code N before listening
    FAKE_PORT_TAKEN_ONCE=F    if file F does not exist: create it, print vLLM's "address already in use"
                              error and exit 1 (the next start goes through)
    FAKE_PID_FILE=F           write this process's pid to F once started
    FAKE_IGNORE_TERM=1        ignore SIGTERM (a server that only SIGKILL stops)
    FAKE_ESCAPE_PID_FILE=F    fork twice, the middle one after setsid(): a grandchild outside the server's
                              process group, session and tree (handed to init), ignoring SIGTERM, its
                              stdout still the server's; its pid is written to F
    FAKE_ARGV_EVERY_S=S       print its arguments (and $HF_TOKEN) again every S seconds, as a server that
                              logs its settings, so that they stay in the last lines ramp keeps
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _arg(argv: list[str], flag: str, default: str = "") -> str:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return default


def _fail_if_asked(host: str, port: int) -> None:
    """The failures FAKE_PORT_TAKEN_ONCE and FAKE_EXIT ask for, before anything listens."""
    taken = os.environ.get("FAKE_PORT_TAKEN_ONCE")
    if taken and not os.path.exists(taken):
        open(taken, "w").close()
        print(
            f"ERROR: [Errno 98] error while attempting to bind on address ('{host}', {port}): address already in use",
            flush=True,
        )
        sys.exit(1)
    if os.environ.get("FAKE_EXIT"):
        print("RuntimeError: fake engine failed to start (out of memory)", flush=True)
        sys.exit(int(os.environ["FAKE_EXIT"]))


def _escape(pid_file: str) -> None:
    """A daemon that left the server's group: setsid, fork again (the middle process exits), ignore TERM."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(pid_file + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(pid_file + ".tmp", pid_file)  # whole when seen
        while True:
            signal.pause()
    os.wait()  # the middle process, gone at once


def _handler(kind: str, model: str, ready_at: float) -> type[BaseHTTPRequestHandler]:
    """The FAKE_MODE=http server's request handler: unhealthy until ``ready_at`` (monotonic), then serving."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: object) -> None:
            print("fake: " + fmt % args, flush=True)

        def _json(self, code: int, doc: object) -> None:
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._json(200 if time.monotonic() >= ready_at else 503, {})
            elif self.path == "/v1/models":
                self._json(
                    200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": kind}]}
                )
            elif self.path in ("/version", "/server_info", "/get_server_info"):
                self._json(200, {"version": "0.0-fake"})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(length)
            if self.path != "/v1/completions":
                self._json(404, {"error": "not found"})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for text in (" hello", " world"):
                doc = {"choices": [{"index": 0, "text": text, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(doc)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

    return Handler


def main(kind: str) -> None:
    argv = sys.argv[1:]
    model = _arg(argv, "--model-path" if kind == "sglang" else "--model", "fake-model")
    host, port = _arg(argv, "--host", "127.0.0.1"), int(_arg(argv, "--port", "0"))
    print("FAKE-ARGV " + json.dumps(argv), flush=True)
    if os.environ.get("FAKE_ARGV_EVERY_S"):
        every = float(os.environ["FAKE_ARGV_EVERY_S"])
        said = f"FAKE-ARGV {json.dumps(argv)} HF_TOKEN={os.environ.get('HF_TOKEN', '')}"

        def again() -> None:
            while True:
                time.sleep(every)  # the server's own logging pace
                print(said, flush=True)

        threading.Thread(target=again, daemon=True).start()
    if os.environ.get("FAKE_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.environ.get("FAKE_PID_FILE"):
        with open(os.environ["FAKE_PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
    _fail_if_asked(host, port)
    if os.environ.get("FAKE_ESCAPE_PID_FILE"):
        _escape(os.environ["FAKE_ESCAPE_PID_FILE"])
    delay = float(os.environ.get("FAKE_DELAY_S", "0"))
    mode = os.environ.get("FAKE_MODE", "http")
    if mode == "sim":
        print(f"loading weights ({delay:g} s)", flush=True)
        time.sleep(delay)  # a server that is still loading does not listen yet
        from loadgen.sim.__main__ import main as sim_main

        sys.exit(sim_main(["--preset", "tiny-cpu", "--host", host, "--port", str(port), "--model", model]))
    server = ThreadingHTTPServer((host, port), _handler(kind, model, time.monotonic() + delay))
    print(f"fake {kind} serving {model} on {host}:{port}", flush=True)
    server.serve_forever()

"""A real OpenAI-compatible HTTP server on loopback with scripted behaviour, for LLM-layer tests.

Each request is keyed ``role:attempt`` (role from the system prompt, attempt from the
``<attempt>N</attempt>`` tag). The script maps a key to a list of steps, consumed one per request
(the last step repeats): ``{"content": str}`` answers, ``{"status": 429}`` fails with that HTTP
status, ``{"hang_s": 5}`` waits before answering (longer than the client's timeout).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ATTEMPT = re.compile(r"<attempt>(\d+)</attempt>")


class FakeOpenAI:
    def __init__(self, script: dict[str, list[dict[str, Any]]], models: tuple[str, ...] = ("fake-model",)):
        self.script = {k: list(v) for k, v in script.items()}
        self.models = models  # what GET /models lists
        self.requests: list[dict[str, Any]] = []
        self.bodies: list[dict[str, Any]] = []  # every chat request's JSON body, in order
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                step, key = fake._next(body)
                if "hang_s" in step:
                    time.sleep(step["hang_s"])
                if "status" in step:
                    self._send(
                        step["status"],
                        {
                            "error": {
                                "message": f"scripted HTTP {step['status']}",
                                "type": "scripted",
                                "code": step["status"],
                            }
                        },
                    )
                    return
                content = step.get("content", "")
                prompt_tokens = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                completion_tokens = max(1, len(content) // 4)
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(fake.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake-model"),
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                        ],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    },
                )
                if "hang_s" in step:
                    return  # the client timed out long ago: this answer was never received
                with fake._lock:
                    fake.answered.append(
                        {"key": key, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
                    )

        self.answered: list[dict[str, Any]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _next(self, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        messages = body.get("messages", [])
        system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
        role = "coder" if "Coder of PRAGMA" in system else "conductor"
        found = ATTEMPT.findall("\n".join(str(m.get("content", "")) for m in messages))
        key = f"{role}:{found[-1] if found else 0}"
        with self._lock:
            self.requests.append({"key": key, "t": time.monotonic()})
            self.bodies.append(body)
            steps = self.script.get(key) or [{"status": 500}]
            step = steps.pop(0) if len(steps) > 1 else steps[0]
        return step, key

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def count(self, key: str) -> int:
        return sum(r["key"] == key for r in self.requests)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

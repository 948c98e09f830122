"""A loopback OpenAI-compatible server whose replies a test scripts: status, headers, body."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

Reply = tuple[int, dict, str]  # status, headers, body


def ok_body(text: str = '{"reasoning": "r", "answer": 1}') -> str:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})


class StatusServer:
    """`with StatusServer(lambda n, body: (401, {}, "...")) as s:` answers request n (from 1) as scripted."""

    def __init__(self, script: Callable[[int, dict], Reply]):
        self.script, self.requests = script, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append({"body": body, "authorization": self.headers.get("Authorization")})
                status, headers, text = server.script(len(server.requests), body)
                data = text.encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "StatusServer":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

"""A protocol-faithful fake OpenAI-compatible server, over real HTTP on loopback, for what a
real model cannot be made to do on demand (prose, extra fields, 500s, a stall …).

It answers `POST /v1/chat/completions` with the shapes llama.cpp's server sends: a
`chat.completion` object, or for `"stream": true` `chat.completion.chunk` events (role
chunk, content chunks, a finish chunk, a usage chunk, `data: [DONE]`). What it says is
scripted: `replies` is consumed one per request (the last one repeats), each a `Reply` or a
function of the parsed request returning one.
"""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    finish_reason: str = "stop"
    stall: threading.Event | None = None  # wait for it before answering (a slow server)
    chunk_size: int = 7  # characters per streamed content chunk
    ignore_stream: bool = False  # answer one chat.completion object even when asked to stream

    @classmethod
    def json(cls, value: object, **fields: object) -> "Reply":
        return cls(json.dumps(value), **fields)


Script = Reply | Callable[[dict], Reply]


@dataclass
class FakeModelServer:
    replies: list[Script] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    url: str = ""
    models_status: int = 200  # what GET /v1/models answers (health)

    def reply_for(self, request: dict) -> Reply:
        self.requests.append(request)
        script = self.replies[min(len(self.requests) - 1, len(self.replies) - 1)]
        return script(request) if callable(script) else script

    def start(self) -> "FakeModelServer":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # the name http.server calls
                if self.path == "/v1/models" and fake.models_status == 200:
                    body = {"object": "list", "data": [{"id": "fake", "object": "model"}]}
                    self._send(200, json.dumps(body).encode(), "application/json")
                else:
                    self._send(
                        fake.models_status if self.path == "/v1/models" else 404,
                        b'{"error": {"message": "SECRET-PROVIDER-DETAIL"}}',
                        "application/json",
                    )

            def do_POST(self) -> None:  # the name http.server calls
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":
                    self._send(404, b'{"error": {"message": "not found"}}', "application/json")
                    return
                reply = fake.reply_for(body)
                if reply.stall is not None:
                    reply.stall.wait(30)
                if reply.status != 200:
                    # The kind of body a failing server sends; it must never reach a user.
                    text = b'{"error": {"message": "SECRET-PROVIDER-DETAIL /srv/model.gguf"}}'
                    self._send(reply.status, text, "application/json")
                elif body.get("stream") and not reply.ignore_stream:
                    self._stream(reply)
                else:
                    self._send(
                        200, json.dumps(self._completion(reply)).encode(), "application/json"
                    )

            def _send(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            @staticmethod
            def _completion(reply: Reply) -> dict:
                return {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": "fake",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": reply.finish_reason,
                            "message": {"role": "assistant", "content": reply.content},
                        }
                    ],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
                }

            def _stream(self, reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def event(payload: object) -> None:
                    data = f"data: {json.dumps(payload) if payload != '[DONE]' else payload}\n\n"
                    raw = data.encode()
                    self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")

                def chunk(delta: dict, finish: str | None = None, **extra: object) -> dict:
                    choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
                    return {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion.chunk",
                        "model": "fake",
                        "choices": choices,
                        **extra,
                    }

                event(chunk({"role": "assistant", "content": None}))
                text = reply.content
                for start in range(0, len(text), reply.chunk_size):
                    event(chunk({"content": text[start : start + reply.chunk_size]}))
                event(chunk({}, reply.finish_reason))
                usage = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
                event(
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion.chunk",
                        "model": "fake",
                        "choices": [],
                        "usage": usage,
                    }
                )
                event("[DONE]")
                self.wfile.write(b"0\r\n\r\n")

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that timed out and hung up: expected, not a failure

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def data_of(self, request_number: int = -1) -> dict:
        """The JSON object a request carried between the data markers."""
        from answers.pipeline.providers.openai import DATA_CLOSE, DATA_OPEN

        content = self.requests[request_number]["messages"][1]["content"]
        assert content.startswith(DATA_OPEN) and content.endswith(DATA_CLOSE)
        return json.loads(content[len(DATA_OPEN) : -len(DATA_CLOSE)])

"""A hostile stand-in for an SGLang server: plain asyncio HTTP/1.1 (so every byte's timing is ours) that answers
``/generate`` and ``/v1/chat/completions`` with what a broken or hostile server could send.

Modes (one per request, cycling through ``modes`` in order; ``/health``, ``/flush_cache`` answer 200):

- ``meta_list``: ``meta_info`` is a list;        - ``nan_tokens``: ``"completion_tokens": NaN``;
- ``deep``: a body nested 100,000 levels deep;    - ``not_json``: HTML;
- ``huge``: a 50 MB body;                         - ``slow_loris``: a byte every 0.2 s, for ever;
- ``ok``: a well-formed answer;                   - ``ids_strings``: ``output_ids`` of strings.

``/server_info`` answers ``server_info`` (``deep``, ``list``, ``nan`` or ``ok``).

Run in a thread (:func:`serving`) for client tests, or as a server process for the lifecycle
(``python -m tests.support.hostile_server --port P [SGLang's flags, ignored]``: it writes the ready line SGLang
writes, so the tool's launch and readiness wait see a server; ``HOSTILE_MODES`` and ``HOSTILE_SERVER_INFO`` in its
environment choose the modes; ``HOSTILE_ECHO=NAME`` makes the well-formed answers repeat the value of
the environment variable NAME, as a model that echoes a secret).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator

READY = "The server is fired up and ready to roll!"
MODES = ("meta_list", "nan_tokens", "deep", "not_json", "huge", "slow_loris", "ok", "ids_strings")


def _good(text: str = "The answer is 4.") -> dict:
    echo = os.environ.get(os.environ.get("HOSTILE_ECHO", ""), "")  # a model that repeats a secret it was given
    return {"text": text + (f" Your token is {echo}." if echo else ""), "output_ids": [1, 2, 3, 4],
            "meta_info": {"id": "r1", "prompt_tokens": 5, "completion_tokens": 4,
                          "finish_reason": {"type": "stop"}, "spec_verify_ct": 2}}


def body_for(mode: str, path: str) -> bytes:
    """The body of one answer (not ``slow_loris``: that one is written by the connection itself)."""
    if mode == "meta_list":
        return json.dumps({"text": "hi", "meta_info": [1, 2, 3]}).encode()
    if mode == "nan_tokens":
        return b'{"text": "hi", "meta_info": {"prompt_tokens": 3, "completion_tokens": NaN}}'
    if mode == "deep":
        return b"[" * 100_000 + b"]" * 100_000
    if mode == "not_json":
        return b"<html>502 Bad Gateway</html>"
    if mode == "huge":
        return json.dumps({"text": "x" * (50 << 20), "meta_info": {}}).encode()
    if mode == "ids_strings":
        return json.dumps({"text": "hi", "output_ids": ["a", "b"], "meta_info": {"completion_tokens": 2}}).encode()
    if path.startswith("/v1/chat"):
        return json.dumps({"choices": [{"message": {"content": "The answer is 4."}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 4}}).encode()
    return json.dumps(_good()).encode()


def server_info_body(kind: str) -> bytes:
    return {"deep": b"{\"a\":" * 100_000 + b"1" + b"}" * 100_000, "list": b"[1, 2]",
            "nan": b'{"version": NaN}'}.get(kind, b'{"version": "hostile-0.1", "model_path": "/m"}')


class Hostile:
    """The server's state: the modes to cycle, the requests seen per path."""

    def __init__(self, modes: list[str], server_info: str = "ok"):
        self.modes = modes
        self.server_info = server_info
        self.n = 0
        self.seen: list[str] = []

    def next_mode(self) -> str:
        mode = self.modes[self.n % len(self.modes)]
        self.n += 1
        return mode

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = next((int(x.split(":", 1)[1]) for x in lines[1:] if x.lower().startswith("content-length:")), 0)
                request = await reader.readexactly(length) if length else b""
                stream = re.search(rb'"stream":\s*true', request) is not None
                self.seen.append(path)
                if path in ("/generate", "/v1/chat/completions"):
                    mode = self.next_mode()
                    if mode == "slow_loris":
                        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n")
                        while True:
                            writer.write(b" ")
                            await writer.drain()
                            await asyncio.sleep(0.2)
                    body = body_for(mode, path)
                    if stream:  # server-sent events: the same body as one event
                        body = b"data: " + body + b"\n\ndata: [DONE]\n\n"
                elif path == "/server_info":
                    body = server_info_body(self.server_info)
                else:
                    body = b"{}"
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             + f"content-length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()


@contextlib.contextmanager
def serving(modes: list[str], server_info: str = "ok") -> Iterator[tuple[str, Hostile]]:
    """Serve on 127.0.0.1 (a free port) in a background thread: (base URL, the server's state)."""
    state = Hostile(modes, server_info)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict = {}

    async def main() -> None:
        server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["stop"] = asyncio.Event()
        started.set()
        await box["stop"].wait()
        server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:  # the connections still open (a slow-loris never ends by itself)
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    t = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    t.start()
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{box['port']}", state
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        t.join(5)


def main(argv: list[str]) -> None:
    """As a server process: ``--port`` and ``--host`` from SGLang's flags (the rest ignored), the ready line."""
    port = int(argv[argv.index("--port") + 1])
    host = argv[argv.index("--host") + 1] if "--host" in argv else "127.0.0.1"
    modes = [m for m in os.environ.get("HOSTILE_MODES", ",".join(MODES)).split(",") if m]
    state = Hostile(modes, os.environ.get("HOSTILE_SERVER_INFO", "deep"))

    async def serve() -> None:
        server = await asyncio.start_server(state.handle, host, port)
        print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {READY}", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main(sys.argv[1:])

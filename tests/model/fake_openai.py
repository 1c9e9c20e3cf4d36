"""A real HTTP/1.1 server on 127.0.0.1 that replays canned OpenAI-style answers.

Each connection serves one request and then closes. Replies are queued in order, or computed
from each request by a ``respond`` function (the strict servers of ``strict_servers.py``); every
request is captured (path, headers, JSON body) so tests can assert the exact wire shape.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["length", "chunked", "close", "cut", "hang"]


@dataclass
class Reply:
    """One canned answer.

    ``mode``: ``length`` sends Content-Length; ``chunked`` uses chunked encoding; ``close``
    sends no length and closes the connection to end the body; ``cut`` is chunked but closes
    without the final chunk (a connection dropped mid-stream); ``hang`` never answers.
    ``stall`` keeps the connection open after the last piece until the client goes away.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[bytes] = field(default_factory=list)
    mode: Mode = "chunked"
    stall: bool = False


@dataclass
class Captured:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


class FakeOpenAI:
    def __init__(self, respond: Callable[[Captured], Reply] | None = None) -> None:
        self.respond = respond
        self.replies: deque[Reply] = deque()
        self.requests: list[Captured] = []
        self.request_seen = asyncio.Event()
        self.client_gone = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            captured = Captured(method, path, headers, json.loads(raw or b"null"))
            self.requests.append(captured)
            self.request_seen.set()
            if self.respond is not None:
                reply = self.respond(captured)
            else:
                reply = self.replies.popleft() if self.replies else Reply(500, pieces=[b"no reply"])
            await self._send(reply, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _send(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if reply.mode == "hang":
            await self._wait_for_client(reader)
            return
        headers = {"content-type": "text/event-stream", **reply.headers}
        if reply.mode == "length":
            headers["content-length"] = str(sum(len(p) for p in reply.pieces))
        elif reply.mode in ("chunked", "cut"):
            headers["transfer-encoding"] = "chunked"
        headers["connection"] = "close"
        status_line = f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
        writer.write(
            (status_line + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()
        )
        await writer.drain()
        chunked = reply.mode in ("chunked", "cut")
        for piece in reply.pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            await writer.drain()
            await asyncio.sleep(0)
        if reply.stall:
            await self._wait_for_client(reader)
            return
        if reply.mode == "chunked":
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    async def _wait_for_client(self, reader: asyncio.StreamReader) -> None:
        while await reader.read(1024):
            pass
        self.client_gone.set()


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    *,
    model: str = "gpt-test",
) -> dict[str, Any]:
    """One realistic ``chat.completion.chunk`` object."""
    obj: dict[str, Any] = {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": []
        if delta is None and finish is None
        else [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return obj


def sse(*events: dict[str, Any] | str, done: bool = True) -> list[bytes]:
    """SSE frames, one piece per event; strings are sent as raw lines (comments, junk)."""
    pieces = [
        (e + "\n\n").encode() if isinstance(e, str) else f"data: {json.dumps(e)}\n\n".encode()
        for e in events
    ]
    if done:
        pieces.append(b"data: [DONE]\n\n")
    return pieces


def json_error(status: int, message: str, **headers: str) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "error", "code": None}}).encode()
    return Reply(
        status,
        headers={"content-type": "application/json", **headers},
        pieces=[body],
        mode="length",
    )

"""Replies to every request received, even when stdin closes first (``gitrag mcp``).

A client (or a script: ``printf '...' | gitrag mcp``) may send its requests and close stdin
while they are still being answered. The SDK's loop then ends at once and cancels the
handlers in flight ("their callers are already gone"), so those requests never got a reply,
though stdout was still read. Here the read side reports the end of stdin only once every
request already received has had its reply written (or after :data:`DRAIN_S` seconds, the
longest a search may take), so the server exits after flushing them.

:class:`DrainingReader` wraps the transport's read stream and notes each request's id;
:class:`ReplyWriter` wraps its write stream and crosses off the id of each reply. Both keep
the stream's interface (``receive``, iteration, ``last_context``, ``aclose``, ``async with``).

A line that is not a JSON-RPC message (the SDK's transport hands its validation error up,
and its server only logs it) is answered here as JSON-RPC 2.0 says: not JSON, ``-32700``
Parse error; JSON that is not a request, response or notification object (``42``, ``[]``,
``{"method": 3}``), ``-32600`` Invalid Request; both with ``id`` null (the id of a message
that failed to parse cannot be told). A blank line is no message and gets no reply.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import anyio
import mcp_types as types

DRAIN_S = 300.0  # gitrag.daemon.routing.ASK_TIMEOUT_S: a cold daemon's first answer


class Pending:
    """Ids of requests received and not answered yet."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self._empty = anyio.Event()
        self._empty.set()

    def add(self, request_id: Any) -> None:
        self.ids.add(request_id)
        if self._empty.is_set():
            self._empty = anyio.Event()

    def done(self, request_id: Any) -> None:
        self.ids.discard(request_id)
        if not self.ids:
            self._empty.set()

    async def drained(self, limit_s: float) -> None:
        """Return once every request has its reply, or after ``limit_s`` seconds."""
        with anyio.move_on_after(limit_s):
            await self._empty.wait()


def _message(item: Any) -> Any:
    return getattr(item, "message", None)


def _rejection(exc: Exception) -> Any:
    """The JSON-RPC error message for a line the transport could not read as a message (its
    exception, a pydantic ValidationError), or None for a blank line."""
    report = getattr(exc, "errors", None)  # pydantic's ValidationError.errors(); any other exception: none
    errors = report() if callable(report) else []
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        if not str(first.get("input", "x")).strip():
            return None
        code, text = types.PARSE_ERROR, "Parse error: the line is not JSON"
    else:
        code, text = types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request object"
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=text))


class DrainingReader:
    """The transport's read stream; its end is held back until ``pending`` is drained. With
    ``replies`` (the transport's write stream) a line that is not a message is answered
    there with its JSON-RPC error (see the module doc) instead of being handed on."""

    def __init__(self, inner: Any, pending: Pending, limit_s: float = DRAIN_S, replies: Any = None) -> None:
        self._inner, self._pending, self._limit_s, self._replies = inner, pending, limit_s, replies

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        from mcp.shared.message import SessionMessage

        while True:
            try:
                item = await self._inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                await self._pending.drained(self._limit_s)
                raise
            if not (isinstance(item, Exception) and self._replies is not None):
                break
            rejection = _rejection(item)
            if rejection is not None:
                await self._replies.send(SessionMessage(rejection))
        message = _message(item)
        if isinstance(message, types.JSONRPCRequest):
            self._pending.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self._pending.done((message.params or {}).get("requestId"))  # the client wants no reply
        return item

    def __aiter__(self) -> DrainingReader:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> DrainingReader:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


class ReplyWriter:
    """The transport's write stream; each reply written crosses its request off ``pending``."""

    def __init__(self, inner: Any, pending: Pending) -> None:
        self._inner, self._pending = inner, pending

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        message = _message(item)
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            self._pending.done(message.id)

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> ReplyWriter:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


async def serve_stdio(lowlevel: Any) -> None:
    """Run the SDK's low-level server over stdio, as ``MCPServer.run_stdio_async`` does, with
    the end of stdin held back until the requests received are answered."""
    from mcp.server.stdio import stdio_server

    pending = Pending()
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(DrainingReader(read_stream, pending, replies=write_stream), ReplyWriter(write_stream, pending),
                           lowlevel.create_initialization_options())

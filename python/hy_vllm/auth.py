"""An ASGI middleware: the run's key on every route but ``/health``.

vLLM's ``--api-key`` guards only ``/v1``, ``/v2``, ``/inference`` and
``/cohere``; the development routes that replace the model's weights
(``/init_weight_transfer_engine``, ``/update_weights``, ...) and
``/collective_rpc`` stay open to anyone who reaches the port. hyctl train
starts its engines with ``--middleware hy_vllm.auth.RequireRunKey`` and
``HY_VLLM_API_KEY`` set to a fresh per-run key; every request must carry
``Authorization: Bearer <key>``. ``/health`` stays open (it tells nothing
and the supervisor polls it).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any, Awaitable, Callable, MutableMapping

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class RequireRunKey:
    """Wraps an ASGI app: a request without ``Authorization: Bearer
    <HY_VLLM_API_KEY>`` gets 401 (a websocket is closed, code 1008);
    ``/health`` and non-HTTP scopes pass. Raises RuntimeError at
    construction if HY_VLLM_API_KEY is not set."""

    def __init__(self, app: App) -> None:
        self.app = app
        key = os.environ.get("HY_VLLM_API_KEY", "")
        if not key:
            raise RuntimeError("hy_vllm.auth.RequireRunKey: HY_VLLM_API_KEY is not set")
        self.digest = hashlib.sha256(key.encode()).digest()

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() != "bearer":
                    return False
                return hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self.digest)
        return False

    async def __call__(self, scope: Scope, receive: Receive,
                       send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") == "/health":
            return await self.app(scope, receive, send)
        if self._authorized(scope):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = b'{"error": "Unauthorized: this engine belongs to a hy run"}'
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

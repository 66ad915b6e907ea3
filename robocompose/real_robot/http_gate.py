"""What the policy server answers over plain HTTP, before any websocket opens.

    GET /healthz                               <- HTTP 200 "OK" (no API key needed)
    upgrade without `Authorization: Api-Key <key>`, when the server has a key
                                               <- HTTP 401 naming the header
    any other upgrade                          -> the websocket opens

`gate` is the server's `process_request` hook: websockets calls it on every request and goes on
with the handshake when it returns None.
"""

from __future__ import annotations

import hmac
import logging
from http import HTTPStatus
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from websockets.asyncio.server import ServerConnection
    from websockets.http11 import Request, Response

log = logging.getLogger(__name__)
HEALTH_PATH = "/healthz"


def gate(connection: ServerConnection, request: Request, api_key: str | None) -> Response | None:
    """The answer to `request` when it is a health check or lacks `api_key`; else None."""
    if request.path.split("?")[0] == HEALTH_PATH:
        return connection.respond(HTTPStatus.OK, "OK\n")
    if api_key is not None:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Api-Key {api_key}".encode()):
            log.warning("refused %s: missing or wrong API key", connection.remote_address)
            return connection.respond(
                HTTPStatus.UNAUTHORIZED,
                "missing or wrong API key: send the header `Authorization: Api-Key <key>`\n",
            )
    return None

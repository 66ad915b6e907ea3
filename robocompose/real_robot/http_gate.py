"""What the policy server answers over plain HTTP, before any websocket opens.

    GET /healthz                              <- HTTP 200 "OK", or 503 while an inference runs
                                                 past its deadline (no API key needed)
    upgrade without exactly one `Authorization: Api-Key <key>` header, when the server has a key
                                              <- HTTP 401 naming the header
    any other upgrade                         -> the websocket opens

A `Gate` is the server's `process_request` hook: websockets calls it on every request and goes
on with the handshake when it returns None. It never raises (a raise would be an HTTP 500 and a
traceback in the log), and every auth result goes to the audit log without the key.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING

from robocompose.real_robot.audit import AuditLog, peer_name

if TYPE_CHECKING:
    from websockets.asyncio.server import ServerConnection
    from websockets.http11 import Request, Response

log = logging.getLogger(__name__)
HEALTH_PATH = "/healthz"
KEY_SCHEME = "Api-Key "


def auth_failure(values: list[str], api_key: str) -> str | None:
    """Why the `Authorization` header `values` do not carry `api_key`; None when they do."""
    if not values:
        return "missing header"
    if len(values) > 1:
        return f"{len(values)} Authorization headers"
    expected = f"{KEY_SCHEME}{api_key}".encode()
    given = values[0].encode("utf-8", "surrogatepass")
    return None if hmac.compare_digest(given, expected) else "wrong key"


class Gate:
    """Health checks and the API key; `healthy()` says whether /healthz answers 200."""

    def __init__(self, api_key: str | None, healthy: Callable[[], bool], audit: AuditLog) -> None:
        self.api_key, self.healthy, self.audit = api_key, healthy, audit

    def __call__(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path.split("?")[0] == HEALTH_PATH:
            if self.healthy():
                return connection.respond(HTTPStatus.OK, "OK\n")
            return connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE, "unhealthy: an inference is past its deadline\n"
            )
        if self.api_key is None:
            return None
        peer = peer_name(connection.remote_address)
        failure = auth_failure(request.headers.get_all("Authorization"), self.api_key)
        if failure is None:
            self.audit.write("auth", peer=peer, result="ok")
            return None
        log.warning("refused %s: %s", peer, failure)
        self.audit.write("auth", peer=peer, result="refused", reason=failure)
        return connection.respond(
            HTTPStatus.UNAUTHORIZED,
            "missing or wrong API key: send one header `Authorization: Api-Key <key>`\n",
        )

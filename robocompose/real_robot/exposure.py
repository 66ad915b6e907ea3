"""Who can reach the policy server, decided so that a typo fails closed: a server on a network
address needs an API key unless the user explicitly allows it open, and TLS keeps the key (and
the observations) off the wire in clear.

    check_exposure("0.0.0.0", api_key=None, allow_open=False)   # ValueError naming allow_open
    context = tls_context("server.pem", "server.key")           # for wss://
Light to import: the serve verb's config checks its fields with it.
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine ("" and 0.0.0.0 mean every interface: no)."""
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def check_exposure(host: str, api_key: str | None, allow_open: bool) -> None:
    """Refuse to listen on a network address without a key unless `allow_open`."""
    if api_key is None and not allow_open and not is_loopback(host):
        raise ValueError(
            f"`host` {host!r} is reachable from the network and no API key is set: set "
            "`api_key_env` (or `api_key`), or say allow_open=true to serve any client."
        )


def check_tls_files(cert: str | None, key: str | None) -> None:
    """Both or neither of `tls_cert` and `tls_key`, each an existing file."""
    if (cert is None) != (key is None):
        raise ValueError(
            f"give both `tls_cert` and `tls_key` (or neither). Got tls_cert={cert!r}, "
            f"tls_key={key!r}."
        )
    for name, path in (("tls_cert", cert), ("tls_key", key)):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"`{name}` must be a PEM file. Got {path!r} (no such file).")


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or newer) from a PEM certificate chain and key."""
    check_tls_files(cert, key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as e:
        raise ValueError(
            f"`tls_cert` {cert!r} and `tls_key` {key!r} do not make a certificate: {e}"
        ) from None
    return context

"""What ``web_fetch`` and ``web_search`` share: their settings and the guarded HTTP client.

:class:`WebSettings` is the ``[web_fetch]`` and ``[web_search]`` tables of config.toml (and the
sandbox's ``allow_domains`` when the sandbox is on), handed to the tools when they are built.

:func:`guarded_client` is the ``httpx`` client ``web_fetch`` uses. Its connections go through
:class:`_GuardedBackend`, which resolves each host itself, refuses the connection when any address
is loopback, private, link-local or otherwise not public (unless the host is listed in
``web_fetch.allow_private``), and connects to the address it checked, so a name that resolves
differently a moment later (DNS rebinding) cannot slip past. It never uses a proxy from the
environment (``HTTPS_PROXY``): through a proxy the checked address would not be the one reached.

httpx is imported when a call needs it, never at worker start (the worker imports no HTTP client
before its first request: tests/app/worker/test_worker_imports.py).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import msgspec

from pico3 import domain_allowed

if TYPE_CHECKING:
    import httpx

__all__ = [
    "SEARCH_BACKENDS",
    "AddressRefused",
    "SearchBackendName",
    "WebSettings",
    "check_host",
    "guarded_client",
]

SearchBackendName = Literal["brave", "tavily", "searxng"]
SEARCH_BACKENDS: tuple[SearchBackendName, ...] = ("brave", "tavily", "searxng")

USER_AGENT = "coding-agent/0.1 (web_fetch)"


class WebSettings(msgspec.Struct, frozen=True):
    """The web tools' configuration (config.toml ``[web_fetch]`` and ``[web_search]``).

    ``allow_private``: host patterns (``localhost``, ``*.internal``, ``10.0.0.5``) ``web_fetch``
    may reach although they resolve to a loopback or private address (user's file only).
    ``sandbox_domains``: ``None`` when the sandbox is off; with ``sandbox.enabled`` it is
    ``sandbox.allow_domains``, and ``web_fetch`` reaches only those hosts (the sandbox's promise,
    "the network only to these domains", holds for the agent's own fetches too).
    ``search_backend``: ``brave``, ``tavily`` or ``searxng`` (``None``: no ``web_search`` tool);
    ``search_url`` the endpoint (required for ``searxng``; Brave's and Tavily's public APIs by
    default); ``search_key_env`` the variable holding the key (``BRAVE_API_KEY``,
    ``TAVILY_API_KEY`` by default; SearXNG takes none unless this is set)."""

    allow_private: tuple[str, ...] = ()
    sandbox_domains: tuple[str, ...] | None = None
    search_backend: SearchBackendName | None = None
    search_url: str | None = None
    search_key_env: str | None = None


class AddressRefused(Exception):
    """A host ``web_fetch`` may not reach; the message says why and how to allow it."""


def _not_public(address: str) -> str | None:
    """Why ``address`` is not a public internet address (``None``: it is)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_private:
        return "a private address"
    if ip.is_multicast or ip.is_reserved or ip.is_unspecified or not ip.is_global:
        return "not a public address"
    return None


def check_host(host: str, settings: WebSettings, port: int | None = None) -> None:
    """Refuse ``host`` by name: outside the sandbox's domains when the sandbox is on
    (:class:`AddressRefused` naming ``sandbox.allow_domains``), and with ``port`` a port they do
    not open (80 and 443, or the one an entry ``host:port`` names, as for the sandbox's proxy).
    Addresses are checked when the connection is made (:func:`guarded_client`)."""
    domains = settings.sandbox_domains
    if domains is not None and not domain_allowed(host, domains):
        listed = ", ".join(domains) if domains else "none"
        raise AddressRefused(
            f"{host} is not in sandbox.allow_domains (the sandbox is on, and web_fetch reaches "
            f"only those domains; listed: {listed}). Add it to sandbox.allow_domains in your "
            "config.toml to allow it"
        )
    if domains is not None and port is not None and not domain_allowed(host, domains, port):
        raise AddressRefused(
            f"port {port} of {host} is not allowed by sandbox.allow_domains (an allowed domain "
            f'is reached on ports 80 and 443 only). Add "{host}:{port}" to sandbox.allow_domains '
            "in your config.toml to allow this port"
        )


async def resolve_checked(host: str, port: int, settings: WebSettings) -> list[str]:
    """The addresses of ``host``, all of them public unless ``host`` is allowed private;
    :class:`AddressRefused` otherwise, or when the name does not resolve."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise AddressRefused(f"cannot resolve {host}: {error.strerror or error}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:  # pragma: no cover - getaddrinfo raises instead
        raise AddressRefused(f"cannot resolve {host}")
    if domain_allowed(host, settings.allow_private):
        return addresses
    for address in addresses:
        why = _not_public(address)
        if why is not None:
            shown = host if host == address else f"{host} ({address})"
            raise AddressRefused(
                f"{shown} is {why}; web_fetch reaches only public addresses unless the host is "
                f'listed in web_fetch.allow_private in your config.toml (allow_private = ["{host}"])'
            )
    return addresses


def _guarded_backend(settings: WebSettings) -> Any:
    import httpcore

    class GuardedBackend(httpcore.AsyncNetworkBackend):
        """httpcore's anyio backend, connecting only to addresses :func:`resolve_checked` allows."""

        def __init__(self) -> None:
            # (typed so: httpcore declares a stand-in class when anyio is missing)
            self._inner = cast(httpcore.AsyncNetworkBackend, httpcore.AnyIOBackend())

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> httpcore.AsyncNetworkStream:
            check_host(host, settings, port)
            addresses = await resolve_checked(host, port, settings)
            error: Exception | None = None
            for address in addresses:  # TLS still verifies the name: SNI is the URL's host
                try:
                    return await self._inner.connect_tcp(
                        address, port, timeout, local_address, socket_options
                    )
                except httpcore.ConnectError as failed:
                    error = failed
            assert error is not None
            raise error

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    return GuardedBackend()


def guarded_client(settings: WebSettings, *, timeout: float) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose every connection is checked (module docstring); it follows
    no redirect by itself and ignores proxy variables."""
    import httpcore
    import httpx

    class GuardedTransport(httpx.AsyncHTTPTransport):
        def __init__(self) -> None:
            super().__init__(trust_env=False)
            self._pool = httpcore.AsyncConnectionPool(
                ssl_context=httpx.create_ssl_context(),
                max_connections=4,
                network_backend=_guarded_backend(settings),
            )

    return httpx.AsyncClient(
        transport=GuardedTransport(),
        follow_redirects=False,
        trust_env=False,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 15.0)),
        headers={"User-Agent": USER_AGENT},
    )

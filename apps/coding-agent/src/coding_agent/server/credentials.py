"""What a TCP client must present, and what the server shows it: the tokens and the TLS
certificate, read at start and again on SIGHUP (docs/server.md#tokens-and-certificates).

The token file holds one token per line, each with a name (``NAME TOKEN``), so a team hands
each person or machine its own and revokes one by deleting its line and sending the server
SIGHUP; a file of one bare token (the old form) names it ``default``. Blank lines and lines
starting with ``#`` are skipped. The file must be the user's own and readable by nobody else
(``0600``); every token is at least 16 printable characters without spaces.

A reload is all or nothing: a token file or certificate that does not load leaves the ones in
force as they were (the reason goes to the log), so a half-written file never locks everyone
out or serves without TLS.
"""

from __future__ import annotations

import hmac
import os
import re
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Credentials",
    "ServerSetupError",
    "read_token_file",
    "read_tokens",
    "server_tls_context",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_MAKE_ONE = (
    "python3 -c 'import secrets; print(\"NAME\", secrets.token_urlsafe(32))' >> {file}; "
    "chmod 600 {file}"
)


class ServerSetupError(Exception):
    """The server cannot start as configured; the message names the flag and the fix."""


def _token_ok(token: bytes) -> bool:
    return len(token) >= 16 and all(32 < byte < 127 for byte in token)


def read_tokens(path: str | os.PathLike[str]) -> dict[str, bytes]:
    """The named tokens in ``path`` (see the module docstring): ``{name: token}``."""
    file = Path(path)
    try:
        info = file.stat()
        text = file.read_bytes()
    except OSError as error:
        raise ServerSetupError(f"--token-file {file}: cannot read it: {error.strerror}") from None
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise ServerSetupError(
            f"--token-file {file}: other users may read it (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): chmod 600 {file}"
        )
    lines = [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.strip().startswith(b"#")
    ]
    tokens: dict[str, bytes] = {}
    for number, line in lines:
        words = line.split()
        if len(words) == 1 and len(lines) == 1:
            name, token = "default", words[0]
        elif len(words) == 2 and _NAME.fullmatch(words[0].decode(errors="replace")):
            name, token = words[0].decode(), words[1]
        else:
            raise ServerSetupError(
                f"--token-file {file}: line {number} is not NAME TOKEN (a name of letters, "
                "digits and ._@-, then the token; one bare token is allowed only alone in the "
                f"file). Add one: {_MAKE_ONE.format(file=file)}"
            )
        if not _token_ok(token):
            raise ServerSetupError(
                f"--token-file {file}: line {number}: a token is at least 16 printable "
                f"characters without spaces (make one: {_MAKE_ONE.format(file=file)})"
            )
        if name in tokens:
            raise ServerSetupError(f"--token-file {file}: the name {name!r} is there twice")
        if any(hmac.compare_digest(token, other) for other in tokens.values()):
            raise ServerSetupError(f"--token-file {file}: line {number} repeats another's token")
        tokens[name] = token
    if not tokens:
        raise ServerSetupError(
            f"--token-file {file}: it holds no token (add one: {_MAKE_ONE.format(file=file)})"
        )
    return tokens


def read_token_file(path: str | os.PathLike[str]) -> bytes:
    """The token of a token file with exactly one (the old single-token form)."""
    tokens = read_tokens(path)
    if len(tokens) != 1:
        raise ServerSetupError(f"--token-file {path}: expected one token, found {len(tokens)}")
    return next(iter(tokens.values()))


def server_tls_context(cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> ssl.SSLContext:
    """A TLS 1.2+ server context with the certificate chain in ``cert`` and its key in ``key``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(os.fspath(cert), os.fspath(key))
    except (OSError, ssl.SSLError) as error:
        raise ServerSetupError(
            f"--tls-cert {cert} / --tls-key {key}: cannot load them: {error}"
        ) from None
    return context


@dataclass
class Credentials:
    """The tokens and TLS context in force, and the files they are read from."""

    token_file: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    tokens: dict[str, bytes] | None = None
    """``{name: token}``; ``None``: no token is asked (the Unix socket's own uid)."""
    tls: ssl.SSLContext | None = None

    @classmethod
    def load(
        cls,
        token_file: str | os.PathLike[str] | None,
        cert: str | os.PathLike[str] | None = None,
        key: str | os.PathLike[str] | None = None,
    ) -> Credentials:
        """Read the files (raises :class:`ServerSetupError` naming the flag and the fix)."""
        found = cls(
            token_file=Path(token_file) if token_file is not None else None,
            cert=Path(cert) if cert is not None else None,
            key=Path(key) if key is not None else None,
        )
        found.tokens, found.tls = found._read()
        return found

    def _read(self) -> tuple[dict[str, bytes] | None, ssl.SSLContext | None]:
        tokens = read_tokens(self.token_file) if self.token_file is not None else None
        tls = None
        if self.cert is not None and self.key is not None:
            tls = server_tls_context(self.cert, self.key)
        return tokens, tls

    def reload(self) -> list[str]:
        """Read the files again and put them in force; return the names of the tokens that are
        gone (revoked). Raises :class:`ServerSetupError` and changes nothing when one does not
        load."""
        tokens, tls = self._read()
        gone = sorted(set(self.tokens or ()) - set(tokens or ()))
        changed = [
            name
            for name, token in (self.tokens or {}).items()
            if name in (tokens or {}) and not hmac.compare_digest(token, (tokens or {})[name])
        ]
        self.tokens, self.tls = tokens, tls
        return sorted(gone + changed)

"""``coding-agent serve`` and its clients: sessions hosted by a server, reached over a Unix
socket or TCP with TLS and a bearer token (docs/server.md).

* :mod:`.preface` — the one line each way before the chord wire starts (token, session);
* :mod:`.serve` — :class:`SessionServer`: the session table, workers on demand, the relay;
* :mod:`.remote` — the client side: :func:`connect_server`, addresses, TLS, tokens;
* :mod:`.args` — the ``serve`` subcommand's flags (light: ``--help`` imports nothing heavy);
* :mod:`.main` — the ``serve`` command line;
* :mod:`.client_cli` — ``attach tcp://…`` and ``-p --server``;
* :mod:`.remote_headless` — ``-p``/``--json`` against a server.
"""

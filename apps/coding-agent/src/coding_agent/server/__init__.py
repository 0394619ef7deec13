"""``coding-agent serve`` and its clients: sessions hosted by a server, reached over a Unix
socket or TCP with TLS and a bearer token (docs/server.md).

* :mod:`.preface` — the one line each way before the chord wire starts (token, session);
* :mod:`.serve` — :class:`SessionServer`: the session table, workers on demand, the relay;
* :mod:`.remote` — the client side: :func:`connect_server`, addresses, TLS, tokens;
* :mod:`.args` — the ``serve`` subcommand's flags (light: ``--help`` imports nothing heavy);
* :mod:`.main` — the ``serve`` command line;
* :mod:`.admission` — the caps on connections, the open-file limit, an accept loop that
  never dies;
* :mod:`.credentials` — the named tokens and the TLS certificate, reloaded on SIGHUP;
* :mod:`.events` — the log's timestamped, structured lines;
* :mod:`.addresses` — ``--listen`` URLs and the Unix socket's path;
* :mod:`.directory` — the servers' shared session directory in PostgreSQL;
* :mod:`.web` — ``serve --web``: the session page's files and its WebSocket (token first);
* :mod:`.web_bridge` — one page's view of a session: a wire client of the worker, sent as JSON;
* :mod:`.web_local` — ``coding-agent web [SESSION]``: one local session on 127.0.0.1.

``attach tcp://…`` and ``-p --server`` are :mod:`coding_agent.cli.attach`.
"""

"""Claude Code's ``"type": "http"`` hooks: the event's JSON POSTed to a URL, the answer read as
a command hook's stdout.

An entry such as::

    {"type": "http", "url": "http://localhost:8080/hooks/pre-tool-use", "timeout": 30,
     "headers": {"Authorization": "Bearer $MY_TOKEN"}, "allowedEnvVars": ["MY_TOKEN"]}

runs as a small Python program (:func:`http_command`, stdlib only, ``python -I``) that the hooks
feature starts exactly like a command hook: the same timeout, the same environment (secrets
withheld, so a token the agent withholds is empty), inside the OS sandbox when the session's
commands run there (which has no network: the request then fails, a non-blocking error, as an
unreachable server is in Claude Code). It POSTs the event's JSON (``Content-Type:
application/json``); a 2xx answer's body is the hook's stdout (JSON output: ``decision``,
``hookSpecificOutput.permissionDecision``, ...; exit 0), anything else is a non-blocking error
(exit 1, the status on stderr): as in Claude Code, an HTTP hook blocks only through its JSON.
``$VAR`` and ``${VAR}`` in a header value are replaced from the environment for the names
``allowedEnvVars`` lists, and by nothing for any other name.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence

__all__ = ["http_command"]

_POST = r"""
import json, os, re, sys, urllib.error, urllib.request
url, headers, allowed = sys.argv[1], json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
def fill(value):
    def var(match):
        name = match.group(1) or match.group(2)
        return os.environ.get(name, "") if name in allowed else ""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", var, value)
request = urllib.request.Request(url, data=sys.stdin.buffer.read(), method="POST")
request.add_header("Content-Type", "application/json")
for name, value in headers.items():
    request.add_header(name, fill(value))
try:
    with urllib.request.urlopen(request) as answer:
        sys.stdout.buffer.write(answer.read())
except urllib.error.HTTPError as error:
    sys.exit(f"HTTP hook: {url} answered {error.code} {error.reason}")
except (urllib.error.URLError, OSError) as error:
    sys.exit(f"HTTP hook: {url} could not be reached: {getattr(error, 'reason', error)}")
"""


def http_command(url: str, headers: Mapping[str, str], allowed: Sequence[str]) -> str:
    """The shell command an HTTP hook runs as (module docstring)."""
    return shlex.join(
        [
            sys.executable,
            "-I",
            "-c",
            _POST,
            url,
            json.dumps(dict(headers)),
            json.dumps(list(allowed)),
        ]
    )

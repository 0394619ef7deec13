"""Deferred SDK package ``__init__``s (``_sdk_import``): the same objects, a fraction of the
imports, and the real SDKs streaming from a local stub server. Each case runs in a fresh
interpreter: this test process has imported both SDKs in full already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from stub_server import Reply, StubServer, sse

_DESCRIBE = """
import importlib, json, sys

def describe(value):
    kind = type(value).__name__
    return [kind, getattr(value, "__qualname__", None) or getattr(value, "__name__", None)]
"""


def _python(code: str) -> Any:
    """Run ``code`` in a fresh interpreter; the JSON it printed last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


_PACKAGES = {
    "openai": ["openai", "openai.types", "openai.types.chat", "openai.types.shared"],
    "anthropic": ["anthropic", "anthropic.types", "anthropic.types.beta"],
}


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_deferred_names_are_what_the_real_init_binds(sdk: str) -> None:
    # Every name a deferred package resolves lazily, compared with a plain import of the SDK.
    deferred = _python(
        _DESCRIBE
        + f"""
from coding_agent.worker.providers._sdk_import import defer_sdk_inits, deferred_exports
defer_sdk_inits()
out = {{}}
for name in {_PACKAGES[sdk]!r}:
    package = importlib.import_module(name)
    exports = deferred_exports(package)
    assert exports, name  # still deferred
    out[name] = {{attr: describe(getattr(package, attr)) for attr in exports}}
print(json.dumps(out))
"""
    )
    plain = _python(
        _DESCRIBE
        + f"""
wanted = {json.dumps({name: sorted(names) for name, names in deferred.items()})}
out = {{}}
for name, attrs in wanted.items():
    package = importlib.import_module(name)
    out[name] = {{attr: describe(getattr(package, attr)) for attr in attrs}}
print(json.dumps(out))
"""
    )
    assert plain == deferred
    assert len(deferred[sdk]) > 40 and len(deferred[f"{sdk}.types"]) > 100


def test_a_name_outside_the_re_exports_runs_the_real_init_once() -> None:
    got = _python(
        """
import json, sys
from coding_agent.worker.providers._sdk_import import defer_sdk_inits, deferred_exports
defer_sdk_inits()
import openai
before = "openai.lib.azure" in sys.modules
client_module = openai.AsyncOpenAI.__module__  # a re-export: openai._client alone
still_deferred = deferred_exports(openai) is not None
openai.api_key = "sk-set-before"  # set before the __init__ ran: it must stay set
timeout = openai.timeout  # defined by the __init__ itself: runs it
print(json.dumps({
    "before": before,
    "class": client_module,
    "key": openai.api_key,
    "still_deferred": still_deferred,
    "after": "openai.lib.azure" in sys.modules,
    "deferred_now": deferred_exports(openai) is not None,
    "azure": openai.AzureOpenAI.__name__,
    "timeout": type(timeout).__name__,
}))
"""
    )
    assert got == {
        "before": False,
        "class": "openai._client",
        "key": "sk-set-before",
        "still_deferred": True,
        "after": True,
        "deferred_now": False,
        "azure": "AzureOpenAI",
        "timeout": "Timeout",
    }


def test_tracing_helpers_bound_by_the_client_import_at_their_first_call() -> None:
    # anthropic._base_client binds finish_api_call_span (called only with a tracing span): the
    # binding costs no import of the helpers (nor of the ~500 param type modules they import);
    # a call imports them and answers as the real function does.
    got = _python(
        """
import json, sys
from coding_agent.worker.providers._sdk_import import defer_sdk_inits
defer_sdk_inits()
import anthropic._client
from anthropic.lib import _tracing
from anthropic.lib._tracing import messages_create_request_attributes as bound
before = sorted(m for m in ("anthropic.lib._tracing._api_call",
                            "anthropic.types.message_create_params") if m in sys.modules)
body = {"output_config": {"format": {"type": "json_schema"}}}
answer = bound(body)
from anthropic.lib._tracing._api_call import messages_create_request_attributes as real
print(json.dumps({
    "before": before,
    "name": bound.__name__,
    "answer": answer,
    "real": real(body),
    "rebound": _tracing.messages_create_request_attributes is real,
    "again": bound({}) == real({}),
}))
"""
    )
    assert got["before"] == []
    assert got["name"] == "messages_create_request_attributes"
    assert got["answer"] == got["real"] and got["answer"]  # {"gen_ai.output.type": "json"}
    assert got["rebound"] and got["again"]


def test_the_status_error_maker_runs_its_module_at_its_first_call() -> None:
    # anthropic._base_client binds make_status_error (called for an error status only): its
    # module (~40 error models) runs at the first call, which answers as a full import does.
    code = """
import json, sys
%s
import httpx2
from anthropic._base_client import make_status_error
before = "anthropic.types.file_expired_error" in sys.modules
body = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
request = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
errors = [make_status_error("no", body=body, response=httpx2.Response(status, request=request))
          for status in (400, 404, 529)]
import anthropic._error_classes as module
print(json.dumps({
    "before": before,
    "errors": [type(error).__qualname__ for error in errors],
    "ran": hasattr(module, "ERROR_CLASSES") and "anthropic.types.file_expired_error" in sys.modules,
}))
"""
    deferred = _python(
        code
        % "from coding_agent.worker.providers._sdk_import import defer_sdk_inits\ndefer_sdk_inits()"
    )
    plain = _python(code % "import anthropic")
    assert deferred["before"] is False and plain["before"] is True
    assert deferred["errors"] == plain["errors"] and deferred["ran"] and plain["ran"]
    assert deferred["errors"][0] == "BadRequestError"


def test_an_sdk_imported_before_is_left_alone() -> None:
    got = _python(
        """
import json, openai
from coding_agent.worker.providers._sdk_import import defer_sdk_inits, deferred_exports
defer_sdk_inits()
import openai.types.chat
print(json.dumps([deferred_exports(openai), deferred_exports(openai.types.chat)]))
"""
    )
    assert got == [None, None]


def test_trio_is_hidden_from_httpcore_only_under_asyncio_and_only_within() -> None:
    # httpcore2 imports trio only to use it under trio: the worker (asyncio) imports httpcore2
    # as if trio were not installed; outside asyncio, or afterwards, trio imports as usual.
    got = _python(
        """
import json, sys, anyio
from coding_agent.worker.providers._sdk_import import trio_hidden_from_httpcore

async def inside():
    with trio_hidden_from_httpcore():
        import httpcore2, httpcore2._synchronization as sync
        try:
            import trio
            hidden = False
        except ModuleNotFoundError:
            hidden = True
    pool = httpcore2.AsyncConnectionPool()  # usable under asyncio
    async with pool:
        pass
    return hidden, sync.trio is None, sync.current_async_library()

hidden, no_trio, library = anyio.run(inside)
imported_meanwhile = "trio" in sys.modules
import trio  # after the block: installed as ever
print(json.dumps({
    "hidden": hidden, "httpcore_without_trio": no_trio, "library": library,
    "imported_meanwhile": imported_meanwhile, "after": trio.__name__,
}))
"""
    )
    assert got == {
        "hidden": True,
        "httpcore_without_trio": True,
        "library": "asyncio",
        "imported_meanwhile": False,
        "after": "trio",
    }
    outside = _python(
        """
import json
from coding_agent.worker.providers._sdk_import import trio_hidden_from_httpcore
with trio_hidden_from_httpcore():  # not under asyncio: nothing hidden
    import httpcore2._synchronization as sync
print(json.dumps(sync.trio is not None))
"""
    )
    assert outside is True


_STREAM = """
import anyio, json, sys
from chord.context import BACKGROUND
from pico3.models import Request, UserMessage, TextDeltaEvent, ErrorEvent

async def main():
    provider = make()
    made = sorted(m for m in ("openai", "anthropic") if m in sys.modules)
    request = Request(model=MODEL, messages=[UserMessage(content="hi")])
    try:
        events = [event async for event in provider.stream(request, BACKGROUND)]
    finally:
        await provider.aclose()
    last = events[-1]
    print(json.dumps({
        "text": "".join(e.delta for e in events if isinstance(e, TextDeltaEvent)),
        "last": type(last).__name__,
        "error": last.error.error_message if isinstance(last, ErrorEvent) else None,
        "heavy": sorted(m for m in HEAVY if m in sys.modules),
        "sdk_imported_by_the_provider": made,
    }))

anyio.run(main)
"""


def _openai_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return sse({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]})


def test_the_openai_adapter_streams_through_the_deferred_sdk() -> None:
    events = [
        _openai_chunk({"role": "assistant", "content": ""}),
        _openai_chunk({"content": "Hel"}),
        _openai_chunk({"content": "lo"}),
        _openai_chunk({}, "stop"),
        sse("[DONE]"),
    ]
    with StubServer([Reply(events=events)]) as server:
        got = _python(
            f"""
from coding_agent.worker.providers.openai import OpenAIProvider
MODEL = "gpt-4.1"
HEAVY = ["trio", "openai.types.responses.response", "openai.lib.azure", "openai.types.batch"]
def make():
    return OpenAIProvider(api_key="test-key", base_url="{server.url}/v1")
"""
            + _STREAM
        )
        sent = server.requests[0]
    assert got == {
        "text": "Hello",
        "last": "DoneEvent",
        "error": None,
        "heavy": [],
        "sdk_imported_by_the_provider": [],  # the client is made at the first request
    }
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent.headers["user-agent"].startswith("AsyncOpenAI/Python")  # the SDK's own headers


def test_the_anthropic_adapter_reports_an_error_event_mid_stream_through_the_deferred_sdk() -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 5, "output_tokens": 1},
        },
    }
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "Hi"},
    }
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad thing"}}
    events = [
        sse(start, "message_start"),
        sse(block, "content_block_start"),
        sse(delta, "content_block_delta"),
        sse(error, "error"),
    ]
    with StubServer([Reply(events=events)]) as server:
        got = _python(
            f"""
from coding_agent.worker.providers.anthropic import AnthropicProvider
MODEL = "claude-sonnet-4-6"
HEAVY = ["trio", "anthropic.lib.vertex", "anthropic.lib.bedrock", "anthropic.lib.tools", "anthropic.types.skill",
         "anthropic.types.message_create_params", "anthropic.types.beta.message_create_params",
         "anthropic.lib._tracing._api_call", "anthropic.types.file_expired_error"]
def make():
    return AnthropicProvider(api_key="test-key", base_url="{server.url}")
"""
            + _STREAM
        )
        sent = server.requests[0]
    assert got["text"] == "Hi" and got["last"] == "ErrorEvent" and got["heavy"] == []
    assert got["sdk_imported_by_the_provider"] == []
    assert "bad thing" in got["error"]
    assert sent.headers["authorization"] == "Bearer test-key"
    assert "anthropic-version" in sent.headers


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_requests_are_the_same_with_the_sdk_imported_in_full(sdk: str) -> None:
    # The same request through a fully imported SDK and a deferred one: same headers and body.
    make = {
        "openai": "from coding_agent.worker.providers.openai import OpenAIProvider as P\n"
        "MODEL = 'gpt-4.1'\n"
        "def make():\n    return P(api_key='k', base_url=URL + '/v1')\n",
        "anthropic": "from coding_agent.worker.providers.anthropic import AnthropicProvider as P\n"
        "MODEL = 'claude-sonnet-4-6'\n"
        "def make():\n    return P(api_key='k', base_url=URL)\n",
    }[sdk]
    seen: list[tuple[dict[str, str], Any]] = []
    for first in (f"import {sdk}\n", ""):
        with StubServer([Reply(status=400, json_body={"error": {"message": "no"}})]) as server:
            _python(f"{first}URL = {server.url!r}\nHEAVY = []\n{make}{_STREAM}")
            sent = server.requests[0]
        headers = {k: v for k, v in sent.headers.items() if k != "host"}
        seen.append((headers, sent.body))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_the_fast_scan_reads_every_init_of_the_sdk_as_the_ast_does(sdk: str) -> None:
    # The scan (regular expressions) is what start-up uses; ast is the reference.
    import importlib.util
    from pathlib import Path

    from coding_agent.worker.providers._sdk_import import _parse, _scan, _Unsure

    spec = importlib.util.find_spec(sdk)
    assert spec is not None and spec.origin is not None
    root = Path(spec.origin).parent
    scanned = 0
    for init in sorted(root.rglob("__init__.py")):
        package = ".".join((sdk, *init.parent.relative_to(root).parts))
        source = init.read_text(encoding="utf-8")
        reference = _parse(source, package)
        try:
            fast = _scan(source, package)
        except _Unsure:
            continue
        scanned += 1
        assert (fast.names, fast.only_imports, fast.all) == (
            reference.names,
            reference.only_imports,
            reference.all,
        ), package
    assert scanned > 50  # the scan is not just giving up


def test_the_scan_is_unsure_of_forms_it_does_not_know() -> None:
    from coding_agent.worker.providers._sdk_import import _Exports, _scan, _Unsure

    for source in (
        "from .a import b, \\\n    c\n",  # a line continuation
        "from .a import b; x = 1\n",  # two statements on a line
        "from .a import (b as 1)\n",
    ):
        with pytest.raises(_Unsure):
            _scan(source, "pkg")
    got = _Exports.of("from .a import b, \\\n    c\nx = 1\n", "pkg")
    assert got.names == {"b": ("pkg.a", "b"), "c": ("pkg.a", "c")} and not got.only_imports
    pure = _scan('"""Doc."""\n\nfrom .a import (\n    B as B,  # noqa\n    c,\n)\n', "pkg.sub")
    assert pure.names == {"B": ("pkg.sub.a", "B"), "c": ("pkg.sub.a", "c")}
    assert pure.only_imports
    impure = _scan("from .a import b\nX = 1\nfrom .c import d\n", "pkg")
    assert impure.names == {"b": ("pkg.a", "b")} and not impure.only_imports


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_the_client_with_the_tls_context_loaded_beside_the_import_is_the_sdks_default(
    sdk: str,
) -> None:
    # sdk_client loads the TLS context in a thread and hands the SDK an httpx2 client of its
    # own defaults with it: the same client settings and the same TLS trust as the client the
    # SDK makes by itself (which the plain SDK class, imported in full, makes here)
    client = {"openai": "AsyncOpenAI", "anthropic": "AsyncAnthropic"}[sdk]
    got = _python(
        f"""
import anyio, json, sys
from coding_agent.worker.providers._sdk_import import sdk_client, sdk_client_options

def describe(made):
    http = made._client
    pool = http._transport._pool
    context = pool._ssl_context
    return {{
        "timeout": repr(http.timeout), "limits": repr(http._transport._pool._max_connections),
        "redirects": http.follow_redirects, "trust_env": http.trust_env,
        "verify": int(context.verify_mode), "hostname": context.check_hostname,
        "options": int(context.options), "store": context.cert_store_stats(),
        "socket_options": repr(pool._socket_options),
        "sdk_defaults": isinstance(http, sys.modules["{sdk}"].DefaultAsyncHttpxClient),
    }}

async def main():
    options = sdk_client_options("k", "http://127.0.0.1:9/v1", 30.0)
    ours = sdk_client("{sdk}", "{client}", options)
    threads = [t.name for t in __import__("threading").enumerate() if t.name == "sdk-tls"]
    import {sdk}
    plain = getattr({sdk}, "{client}")(**options)
    print(json.dumps({{"ours": describe(ours), "plain": describe(plain), "left": threads,
                      "trio": "trio" in sys.modules}}))

anyio.run(main)
"""
    )
    assert got["ours"] == got["plain"]
    assert got["ours"]["store"]["x509_ca"] > 0  # the authorities were loaded
    assert got["left"] == []  # the loading thread is done once the client is made
    assert got["trio"] is False

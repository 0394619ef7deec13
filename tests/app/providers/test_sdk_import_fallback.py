"""``_sdk_import`` after an SDK upgrade: whatever shape a package ``__init__`` takes, the SDK
imports (deferred where the hook understands the ``__init__``, plainly where it does not), and
every name is what a plain import binds.

Each case writes a stand-in SDK package named ``openai`` (or ``anthropic``) in a temporary
folder that comes first on ``sys.path`` of a fresh interpreter, so the hook meets it exactly as
it would meet a new release; the last case breaks the hook itself on the real SDK."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

_HEADER = """
import json, sys
sys.path.insert(0, {folder!r})
import anyio
from coding_agent.worker.providers import _sdk_import as hook
from coding_agent.worker.providers._sdk_import import deferred_exports, sdk_client
"""


def _package(root: Path, files: dict[str, str]) -> Path:
    """Write the stand-in package's ``files`` (paths relative to ``root``)."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def _python(folder: Path, code: str) -> Any:
    """Run ``code`` (after :data:`_HEADER`) in a fresh interpreter; the JSON it printed last."""
    source = _HEADER.format(folder=str(folder)) + textwrap.dedent(code)
    done = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


_CLIENT = """
class AsyncOpenAI:
    def __init__(self, **options):
        self.options = options
"""

_MAKE = """
async def make():
    return sdk_client("openai", "AsyncOpenAI", {"api_key": "k"})

client = anyio.run(make)
openai = sys.modules["openai"]
"""


def test_an_init_that_does_not_re_export_is_imported_as_usual(tmp_path: Path) -> None:
    # A release whose root package went lazy by itself (its own module __getattr__): nothing
    # the hook can defer, so it runs the __init__ as a plain import would.
    _package(
        tmp_path,
        {
            "openai/__init__.py": '''
            """An SDK that loads lazily by itself."""
            import importlib as _importlib

            def __getattr__(name):
                if name == "AsyncOpenAI":
                    return _importlib.import_module("openai._client").AsyncOpenAI
                raise AttributeError(name)
            ''',
            "openai/_client.py": _CLIENT,
        },
    )
    got = _python(
        tmp_path,
        """
hook.defer_sdk_inits()
import openai
imported = {"deferred": deferred_exports(openai) is not None, "ran": "_importlib" in vars(openai)}
"""
        + _MAKE
        + """
print(json.dumps({
    "imported": imported, "client": type(client).__module__, "options": client.options,
    "deferred": deferred_exports(openai) is not None, "own_getattr": openai.__getattr__.__module__,
}))
""",
    )
    assert got == {
        "imported": {"deferred": False, "ran": True},  # its __init__ ran at the import
        "client": "openai._client",
        "options": {"api_key": "k"},
        "deferred": False,
        "own_getattr": "openai",
    }


def test_names_bound_again_later_in_the_init_are_what_a_plain_import_binds(
    tmp_path: Path,
) -> None:
    _package(
        tmp_path,
        {
            "openai/__init__.py": """
            from ._client import AsyncOpenAI, Limits
            from ._constants import TIMEOUT

            _ran = True
            from ._wrapped import AsyncOpenAI
            Limits = "bound again by the __init__"
            """,
            "openai/_client.py": _CLIENT + "\nLimits = 'the first binding'\n",
            "openai/_wrapped.py": "from ._client import AsyncOpenAI as _A\n\n"
            "class AsyncOpenAI(_A):\n    wrapped = True\n",
            "openai/_constants.py": "TIMEOUT = 600\n",
        },
    )
    code = """
import openai
out = {"client": openai.AsyncOpenAI.__module__, "timeout": openai.TIMEOUT}
out["ran_before_limits"] = "_ran" in vars(openai)
out["limits"] = openai.Limits
print(json.dumps(out))
"""
    deferred = _python(tmp_path, "hook.defer_sdk_inits()\n" + code)
    plain = _python(tmp_path, code)
    assert deferred.pop("ran_before_limits") is False  # the re-exports cost no __init__ run
    assert plain.pop("ran_before_limits") is True
    assert (
        deferred
        == plain
        == {
            "client": "openai._wrapped",
            "timeout": 600,
            "limits": "bound again by the __init__",
        }
    )


def test_a_name_that_cannot_be_imported_alone_runs_the_real_init(tmp_path: Path) -> None:
    # A release whose client module needs what its __init__ imports first.
    _package(
        tmp_path,
        {
            "openai/__init__.py": """
            from ._setup import READY
            from ._client import AsyncOpenAI
            """,
            "openai/_setup.py": "READY = True\n",
            "openai/_client.py": 'import sys\nif "openai._setup" not in sys.modules:\n'
            '    raise RuntimeError("import openai._setup first")\n' + _CLIENT,
        },
    )
    got = _python(
        tmp_path,
        _MAKE
        + """
print(json.dumps({"client": type(client).__name__, "deferred": deferred_exports(openai) is not None,
                  "ready": openai.READY}))
""",
    )
    assert got == {"client": "AsyncOpenAI", "deferred": False, "ready": True}


def test_a_call_only_export_that_is_no_plain_function_is_bound_as_itself(
    tmp_path: Path,
) -> None:
    # anthropic.lib._tracing's call-only helpers are bound as forwarders only while their module
    # defines them with ``def``: a release that makes one an object binds that object.
    _package(
        tmp_path,
        {
            "anthropic/__init__.py": "from ._client import AsyncAnthropic\n",
            "anthropic/_client.py": "class AsyncAnthropic:\n    pass\n",
            "anthropic/lib/__init__.py": "",
            "anthropic/lib/_tracing/__init__.py": """
            from ._api_call import finish_api_call_span, messages_create_request_attributes
            """,
            "anthropic/lib/_tracing/_api_call.py": """
            class _Finisher:
                def __call__(self, *args):
                    return "finished"

            finish_api_call_span = _Finisher()

            def messages_create_request_attributes(body):
                return {"body": body}
            """,
        },
    )
    got = _python(
        tmp_path,
        """
hook.defer_sdk_inits()
from anthropic.lib._tracing import finish_api_call_span as finish
from anthropic.lib._tracing import messages_create_request_attributes as attributes
before = "anthropic.lib._tracing._api_call" in sys.modules
print(json.dumps({"before": before, "finish": type(finish).__name__,
                  "attributes": type(attributes).__name__, "answer": attributes(1)}))
""",
    )
    assert got == {
        "before": True,  # the object's module had to be imported to bind it
        "finish": "_Finisher",
        "attributes": "function",
        "answer": {"body": 1},
    }


def test_any_failure_of_the_hook_falls_back_to_a_plain_import_of_the_real_sdk() -> None:
    got = _python(
        Path("/nonexistent"),
        """
def broken(self, module):
    raise RuntimeError("a bug in the deferring loader")

def unreadable(source, package):
    raise RuntimeError("a bug in the __init__ reader")

out = {}
for name, patch in (("reader", ("_Exports", "of", staticmethod(unreadable))),
                    ("loader", ("_DeferredInit", "exec_module", broken))):
    for module in [m for m in sys.modules if m == "openai" or m.startswith("openai.")]:
        del sys.modules[module]
    hook._PLAIN.clear()
    original = getattr(getattr(hook, patch[0]), patch[1])
    setattr(getattr(hook, patch[0]), patch[1], patch[2])
    try:
        exec(_MAKE)
    finally:
        setattr(getattr(hook, patch[0]), patch[1], original)
    out[name] = {
        "client": type(client).__name__,
        "deferred": deferred_exports(openai) is not None,
        "full": "openai.lib.azure" in sys.modules,
        "plain_from_now_on": sorted(hook._PLAIN),
    }
print(json.dumps(out))
""".replace("exec(_MAKE)", "exec(" + repr(_MAKE) + ")"),
    )
    assert got == {
        "reader": {  # each package the reader fails on runs its __init__
            "client": "AsyncOpenAI",
            "deferred": False,
            "full": True,
            "plain_from_now_on": [],
        },
        "loader": {  # the import failed: the SDK is imported again, plainly
            "client": "AsyncOpenAI",
            "deferred": False,
            "full": True,
            "plain_from_now_on": ["openai"],
        },
    }


def test_an_sdk_whose_default_http_client_refuses_the_tls_context_makes_its_own(
    tmp_path: Path,
) -> None:
    # sdk_client hands the SDK its DefaultAsyncHttpxClient with the TLS context loaded beside
    # the import; a release whose class takes other arguments gets no http_client: it makes
    # its own, as without the thread
    _package(
        tmp_path,
        {
            "openai/__init__.py": """
            from ._client import AsyncOpenAI
            from ._base_client import DefaultAsyncHttpxClient
            """,
            "openai/_client.py": _CLIENT,
            "openai/_base_client.py": """
            class DefaultAsyncHttpxClient:
                def __init__(self, *, certificates):
                    self.certificates = certificates
            """,
        },
    )
    refused = _python(tmp_path, _MAKE + "print(json.dumps(sorted(client.options)))\n")
    assert refused == ["api_key"]
    (tmp_path / "openai" / "_base_client.py").write_text(
        "class DefaultAsyncHttpxClient:\n"
        "    def __init__(self, **options):\n"
        "        self.options = options\n",
        encoding="utf-8",
    )
    taken = _python(
        tmp_path,
        _MAKE + "print(json.dumps([sorted(client.options), "
        "type(client.options['http_client'].options['verify']).__name__]))\n",
    )
    assert taken == [["api_key", "http_client"], "SSLContext"]

"""``import chord`` and ``import pico3`` bind their public names at first use (PEP 562).

A process pays only for the parts of chord and pico3 it touches (issue 45: the worker's restart
and the first request wait mostly on imports). Each check runs in a fresh interpreter, since
this test process has imported everything long ago.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest


def _modules_after(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; it sets ``out``, which is printed as JSON."""
    script = f"import json, sys\n{code}\nprint(json.dumps(out))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


HEAVY = ["asyncio", "pluggy", "chord.facets", "chord.facet_packages", "chord.transport"]


def test_import_chord_imports_only_its_light_core() -> None:
    out = _modules_after(f"import chord\nout = [m for m in {HEAVY!r} if m in sys.modules]")
    assert out == []


def test_import_pico3_imports_neither_the_harness_nor_chords_facet_host() -> None:
    code = (
        "import pico3\n"
        "out = [m for m in ['pico3.harness', 'pico3.kernel', 'pico3.turn', *"
        f"{HEAVY!r}] if m in sys.modules]"
    )
    assert _modules_after(code) == []


def test_a_view_decoding_client_does_not_import_the_harness() -> None:
    code = (
        "from pico3 import ViewDecoder, view_from_json\n"
        "out = [m for m in ['pico3.harness', 'pico3.turn', 'asyncio'] if m in sys.modules]"
    )
    assert _modules_after(code) == []


@pytest.mark.parametrize(
    "package", ["chord", "pico3", "chord.transport", "chord.wire", "pico3.storage"]
)
def test_every_lazy_name_is_the_defining_modules_object(package: str) -> None:
    """Each public name resolves, from a fresh interpreter, to the very object its module
    defines, and is then a plain attribute of the package (listed by ``dir``)."""
    code = (
        "import importlib\n"
        f"package = importlib.import_module({package!r})\n"
        "wrong = []\n"
        "for name, module in package._LAZY.items():\n"
        "    value = getattr(package, name)\n"
        "    if value is not getattr(importlib.import_module(module), name):\n"
        "        wrong.append(name)\n"
        "    if name not in vars(package) or name not in dir(package):\n"
        "        wrong.append(name + ' (not bound)')\n"
        "out = {'wrong': wrong, 'unlisted': sorted(set(package.__all__) - set(dir(package))),\n"
        "       'lazy_not_public': sorted(set(package._LAZY) - set(package.__all__))}"
    )
    assert _modules_after(code) == {"wrong": [], "unlisted": [], "lazy_not_public": []}


@pytest.mark.parametrize("package", ["chord", "pico3", "pico3.storage"])
def test_an_unknown_name_is_an_attribute_error_that_names_it(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018 - the lookup is the test
    with pytest.raises(ImportError, match="no_such_name"):
        exec(f"from {package} import no_such_name")

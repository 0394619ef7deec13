"""A griffe extension for the API reference: the docstrings' Sphinx roles become links.

pico3's and chord's docstrings cite other objects Sphinx-style (``:class:`Harness```,
``:func:`~chord.with_cancel```). mkdocstrings reads Markdown, so this rewrites each role into a
mkdocs-autorefs cross-reference, shown as code (the ``~`` form shows the last name only):

* a dotted name rooted in one of this workspace's packages is an absolute reference; it must name
  an object the reference documents (under its public or its defining path), or the strict build
  fails, so a docstring of the public API cannot point at an internal name;
* a name without dots is resolved in the object's scope (the ``scoped_crossrefs`` option);
* a name outside the workspace (``ValueError``, ``importlib.metadata``) is shown as code.
"""

from __future__ import annotations

import builtins
import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`<>]+?)`")
OURS = ("pico3", "chord", "facets_", "coding_agent")


def _link(match: re.Match[str], ours: tuple[str, ...] = OURS) -> str:
    short, target = match.group(1), match.group(2).strip().removesuffix("()")
    title = target.rsplit(".", 1)[-1] if short else target
    head = target.split(".", 1)[0]
    if not head.startswith(ours) and ("." in target or hasattr(builtins, target)):
        return f"`{title}`"
    if "." in target:
        identifier, text = html.escape(target), html.escape(title)
        return f'<autoref identifier="{identifier}"><code>{text}</code></autoref>'
    return f"[`{title}`][{target}]"


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring into Markdown cross-references.

    ``packages`` are the name prefixes of the documented packages (the workspace's by default).
    """

    def __init__(self, packages: list[str] | None = None) -> None:
        super().__init__()
        self._ours = tuple(packages) if packages else OURS

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._rewrite(pkg)

    def _rewrite(self, obj: griffe.Object) -> None:
        if obj.docstring is not None and ":`" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(lambda m: _link(m, self._ours), obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._rewrite(member)  # type: ignore[arg-type]

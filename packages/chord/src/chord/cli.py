"""The ``chord`` command line (console script of ``chord-runtime``).

``chord new-facet NAME [PATH]`` writes a new facet package into PATH (default ``./NAME``; see
``docs/authoring-facets.md``)::

    $ chord new-facet greeter ../greeter
    created ../greeter: a facet package with an entry point in group chord.facets
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from chord.facet_packages.discovery import ENTRY_POINT_GROUP
from chord.facet_packages.scaffold import FacetNameError, new_facet_package

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chord", description="Tools for chord applications and facet packages."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    new_facet = commands.add_parser(
        "new-facet",
        help="write a new facet package (contract, session and TUI facets, a loopback test)",
        description="Write a new facet package into the folder PATH (default ./NAME), "
        "which must not exist or be empty.",
    )
    new_facet.add_argument("name", metavar="NAME", help="package name, e.g. greeter or my-feature")
    new_facet.add_argument(
        "path",
        metavar="PATH",
        nargs="?",
        default=None,
        help="the package's folder (default: ./NAME)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for usage errors, 1 for failures)."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.command == "new-facet":
        try:
            target = new_facet_package(arguments.name, arguments.path)
        except FacetNameError as error:
            parser.exit(2, f"chord new-facet: error: {error}\n")
        except OSError as error:
            parser.exit(1, f"chord new-facet: error: {error}\n")
        print(f"created {target}: a facet package with an entry point in group {ENTRY_POINT_GROUP}")
        print(f"next: cd {target} && uv run pytest; then coding-agent facets add {target}")
        return 0
    parser.error(f"unknown command {arguments.command!r}")


if __name__ == "__main__":
    sys.exit(main())

"""The session permission modes as the command line knows them.

The approval feature's contract owns the modes (``facets_approval.contract.PERMISSION_MODES``:
their order, descriptions and the check the worker applies). The app may not import a feature
package (features reach it only through entry points), yet ``--permission-mode`` must refuse a
bad value in argparse, before a session is made; so this one copy exists, for ``--help`` and
argparse only, and tests/facets/approval/test_approval_contract.py pins it to the contract's.
"""

from __future__ import annotations

__all__ = ["MODE_SUMMARIES", "PERMISSION_MODES"]

PERMISSION_MODES = ("ask", "accept-edits", "sandbox", "plan", "auto")
"""What ``--permission-mode`` accepts: the approval contract's modes, in its order."""

MODE_SUMMARIES = {
    "ask": ("Ask", "A tool that changes something asks first"),
    "accept-edits": ("Accept edits", "File edits in the project run; commands ask"),
    "sandbox": ("Sandbox", "Edits run, and commands run in the OS sandbox without asking"),
    "plan": ("Plan", "Read-only: look, then propose a plan"),
    "auto": ("Auto", "Nothing asks; every call runs"),
}
"""Each mode's name and one line, for a client that lists them (an editor over ACP)."""

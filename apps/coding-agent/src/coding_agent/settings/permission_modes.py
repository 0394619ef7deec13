"""The session permission modes as the command line knows them.

The approval feature's contract owns the modes (``facets_approval.contract.PERMISSION_MODES``:
their order, descriptions and the check the worker applies). The app may not import a feature
package (features reach it only through entry points), yet ``--permission-mode`` must refuse a
bad value in argparse, before a session is made; so this one copy exists, for ``--help`` and
argparse only, and tests/facets/approval/test_approval_contract.py pins it to the contract's.
"""

from __future__ import annotations

__all__ = ["PERMISSION_MODES"]

PERMISSION_MODES = ("ask", "accept-edits", "sandbox", "plan", "auto")
"""What ``--permission-mode`` accepts: the approval contract's modes, in its order."""

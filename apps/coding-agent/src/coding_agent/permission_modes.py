"""The session permission modes, in a module of their own so the CLI can name them in
``--help`` without importing the worker."""

from __future__ import annotations

__all__ = ["PERMISSION_MODES"]

PERMISSION_MODES = ("ask", "accept-edits", "plan", "auto")
"""What ``--permission-mode`` accepts (the approval feature's modes)."""

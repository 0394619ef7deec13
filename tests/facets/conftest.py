"""The feature packages' tests share :mod:`dialog_support`; this puts its folder on ``sys.path``
(importlib mode cannot import a conftest module by name)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

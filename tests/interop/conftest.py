"""Interop tests against the real @earendil-works/chord 0.87.1 (installed by npm, see node_env).

The folder is put on ``sys.path`` so the tests can import ``node_env`` (importlib mode).
"""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

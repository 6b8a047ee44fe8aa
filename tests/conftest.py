"""Settings every test shares. Area fixtures live in tests/<area>/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
EXAMPLES = SHARED / "examples"

pytest_plugins = ["tests.fixtures"]

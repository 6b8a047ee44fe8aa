"""Settings every test shares. Area fixtures live in tests/<area>/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
# The spec's examples beside the repository when present; a clean checkout elsewhere uses the byte-identical
# copies shipped in resources/examples (tests/foundation checks they match).
EXAMPLES = SHARED / "examples" if (SHARED / "examples").is_dir() else ROOT / "resources" / "examples"

pytest_plugins = ["tests.fixtures"]

#!/usr/bin/env python3
"""Write sysverbs/providers/_data.py from sysverbs/providers/providers.json.

Run it after every change to providers.json (tests/test_provider_data.py fails while
_data.py is stale).  ``--check``: exit 1 when _data.py is not current.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sysverbs.providers.table import render_data_module  # noqa: E402

OUT = ROOT / "sysverbs" / "providers" / "_data.py"

if __name__ == "__main__":
    text = render_data_module()
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if OUT.read_text(encoding="utf-8") == text else 1)
    OUT.write_text(text, encoding="utf-8")
    print(OUT)

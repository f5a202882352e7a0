#!/usr/bin/env python3
"""Rewrite sysverbs/data/providers.marshal from sysverbs/data/providers.json.

Run it after every change to providers.json (tests/test_provider_data.py fails
while the cache is stale; sysverbs itself then falls back to parsing the JSON).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sysverbs import providers  # noqa: E402

if __name__ == "__main__":
    print(providers.write_cache())

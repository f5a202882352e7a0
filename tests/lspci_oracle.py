"""Real ``lspci``/``setpci`` (pciutils) reading a dump instead of the hardware
(``-A dump``, the format ``lspci -xxxx`` writes): the oracle that configuration bytes
written by :mod:`sysverbs.testing.builder_lspci` say what a capture's ``lspci -vvv``
lines say."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Optional

from sysverbs.testing.builder_lspci import Function, lspci_dump

_HEAD = re.compile(r"^([0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] ")


def unavailable() -> Optional[str]:
    """Why the oracle cannot run (None: it can)."""
    missing = [tool for tool in ("lspci", "setpci") if shutil.which(tool) is None]
    return f"{', '.join(missing)} not on PATH (Debian's pciutils)" if missing else None


def _dump(functions: Iterable[Function], where: Path) -> Path:
    path = where / "lspci-xxxx.txt"
    path.write_text(lspci_dump(functions))
    return path


def decode(functions: Iterable[Function], where: Path) -> dict[str, list[str]]:
    """``lspci -D -vvv`` of ``functions``' configuration spaces: each function's
    lines (BDF with its domain -> lines, leading whitespace removed)."""
    dump = _dump(functions, where)
    run = subprocess.run(["lspci", "-A", "dump", "-O", f"dump.name={dump}", "-D", "-vvv"],
                         capture_output=True, text=True, timeout=60, check=True)
    out: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in run.stdout.splitlines():
        if _HEAD.match(line):
            lines = out.setdefault(line.split(" ", 1)[0], [])
        lines.append(line.strip())
    return out


def read_register(functions: Iterable[Function], where: Path, bdf: str, register: str) -> str:
    """``setpci -s BDF REGISTER`` (a read) on the dump of ``functions``."""
    dump = _dump(functions, where)
    run = subprocess.run(["setpci", "-A", "dump", "-O", f"dump.name={dump}", "-s", bdf,
                          register], capture_output=True, text=True, timeout=60, check=True)
    return run.stdout.strip()


def line(lines: list[str], name: str) -> str:
    """The one line starting with ``name`` (``"LnkSta:"``)."""
    (found,) = [x for x in lines if x.startswith(name)]
    return found

"""Parsers for what the real tools printed in the kernel-lab VM (``ibv_devinfo``,
the monitor and probe output), used by ``test_kernel_lab.py``."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any, Optional

from sysverbs.cli.devinfo import UNAVAILABLE


def utf8(text: str) -> str:
    """The runner keeps output as latin-1 text: decode its bytes as UTF-8 (replacing)."""
    return text.encode("latin-1").decode("utf-8", errors="replace")


def devinfo(text: str) -> dict[str, dict[str, Any]]:
    """ibv_devinfo -v: {hca: {"dev": {key: value}, "ports": {n: {key: value, "gids": [...]}}}}."""
    out: dict[str, dict[str, Any]] = {}
    cur: dict[str, Any] = {}
    port: Optional[dict[str, Any]] = None
    for line in text.splitlines():
        m = re.match(r"hca_id:\s+(\S+)", line)
        if m:
            cur = out.setdefault(m.group(1), {"dev": {}, "ports": {}})
            port = None
            continue
        m = re.match(r"\s+port:\s+(\d+)", line)
        if m and cur:
            port = cur["ports"].setdefault(int(m.group(1)), {"gids": []})
            continue
        m = re.match(r"\s+GID\[\s*(\d+)\]:\s+(\S+), (.+)$", line)
        if m and port is not None:
            port["gids"].append(
                (int(m.group(1)), ipaddress.IPv6Address(m.group(2)), m.group(3).strip())
            )
            continue
        m = re.match(r"\s+([a-z_0-9]+):\s+(.*\S)\s*$", line)
        if m and cur:
            (port if port is not None else cur["dev"])[m.group(1)] = m.group(2)
    return out


def paren(value: str) -> int:
    """The number in ``PORT_ACTIVE (4)``."""
    m = re.search(r"\((\d+)\)", value)
    assert m, value
    return int(m.group(1))


def probe_lines(text: str) -> list[dict[str, Any]]:
    """The JSON results of ``tests/oracle/rdmacm_probe.py``."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def sections(text: str) -> dict[str, list[str]]:
    """The non-empty lines after each ``===NAME`` line."""
    out: dict[str, list[str]] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        if line.startswith("===") and line[3:].isalpha():
            current = line[3:]
            out[current] = []
        elif current is not None and line.strip():
            out[current].append(line)
    return out


def events(lines: list[str]) -> tuple[dict[str, str], list[list[Any]]]:
    """A monitor's output: its header (backend, reason) and its events."""
    head = json.loads(lines[0])
    found = [json.loads(line) for line in lines[1:] if line.startswith("[")]
    return head, found


_LABEL = re.compile(r"\t+([A-Za-z0-9_ ]+|GID\[ *\d+\]):")


def label(line: str) -> str:
    """The label of an ``ibv_devinfo`` line (``\\t\\tport_lid:\\t...`` -> ``port_lid``)."""
    m = _LABEL.match(line)
    return m.group(1) if m else line


def blocks(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(device header lines, [port block lines]) per hca_id."""
    out: list[tuple[list[str], list[list[str]]]] = []
    for chunk in re.split(r"(?m)^(?=hca_id:)", text):
        if not chunk:
            continue
        head, *ports = re.split(r"(?m)^(?=\t\tport:\t)", chunk)
        out.append((head.splitlines(), [p.splitlines() for p in ports]))
    return out


def compare_lines(real: list[str], ours: list[str], allowed: set[str]) -> list[str]:
    """Same labels in the same order, and every line identical but those (with a label
    in ``allowed``) that say ``(unavailable)``; returns the labels of those."""
    assert [label(x) for x in ours] == [label(x) for x in real], (real, ours)
    unavailable = []
    for r, o in zip(real, ours):
        if o == r:
            continue
        lab = label(o)
        assert (
            o.endswith("\t" + UNAVAILABLE)
            and o[: -len(UNAVAILABLE)] == r[: len(o) - len(UNAVAILABLE)]
        ), (r, o)
        assert lab in allowed, (lab, r, o)
        unavailable.append(lab)
    return unavailable

"""What the bad-input tests (tests/test_bad_input*.py) share: a small valid host and the
ways to break it.

The host has what every command reads: a GPU and an mlx5 RoCE function below one host
bridge, and an rxe device with an IPv4 RoCE v2 GID, so that placement, NCCL's GID scan
and the netdev lookup all run.  :data:`CORRUPTIONS` break every file or link of its
sysfs tree one way each (the uverbs class files stay valid, so the devices are still
listed and the damage reaches the attribute readers).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

from sysverbs.testing import FakeHost, HostBuilder

__all__ = ["CORRUPTIONS", "KINDS", "build_host", "copy_host", "corrupt", "attribute_files"]


def build_host(root: Path) -> FakeHost:
    """The valid host, written at ``root``."""
    b = HostBuilder()
    hb = b.host_bridge("pci0000:00", numa_node=0)
    b.gpu(hb + "/0000:00:04.0")
    b.mlx5(path=hb + "/0000:00:05.0", link_layer="Ethernet", netdev="eth0")
    b.rxe(name="rxe0", netdev="v0", ib_attrs={
        "ports/1/gids/1": "0000:0000:0000:0000:0000:ffff:c0a8:0701",
        "ports/1/gid_attrs/types/1": "RoCE v2", "ports/1/gid_attrs/ndevs/1": "v0"})
    return b.materialize(root)


def copy_host(src: FakeHost, root: Path) -> FakeHost:
    """A copy of ``src`` at ``root`` (links copied as links)."""
    shutil.copytree(src.root, root, symlinks=True)
    return FakeHost(root, root / "sys", root / "dev" / "infiniband", src.dev_nodes)


def _kept(sysfs: Path) -> set[str]:
    """The files that make the devices listed: the uverbs class's ABI version and
    each uverbs device's ``ibdev``, ``abi_version`` and ``dev``."""
    verbs = sysfs / "class" / "infiniband_verbs"
    kept = {os.path.realpath(verbs / "abi_version")}
    for name in os.listdir(verbs):
        for f in ("ibdev", "abi_version", "dev"):
            kept.add(os.path.realpath(verbs / name / f))
    return kept


def _walk(sysfs: Path) -> Iterator[tuple[Path, bool]]:
    """Every file and link below ``sysfs`` (not following links): (path, is_link)."""
    for top, dirs, files in os.walk(sysfs):
        for name in sorted(dirs + files):
            p = Path(top) / name
            if p.is_symlink():
                yield p, True
            elif p.is_file():
                yield p, False


def attribute_files(sysfs: Path) -> list[Path]:
    """The regular files a corruption may replace (all but :func:`_kept`'s)."""
    kept = _kept(sysfs)
    return [p for p, link in _walk(sysfs) if not link and os.path.realpath(p) not in kept]


def _links(sysfs: Path) -> list[Path]:
    """The links a corruption may replace (not the uverbs class's: they list the devices)."""
    verbs = sysfs / "class" / "infiniband_verbs"
    return [p for p, link in _walk(sysfs) if link and p.parent != verbs]


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    path.unlink()
    make(path)


#: One way to break one path: junk bytes, a FIFO (opening it blocks), a link that
#: vanished, a directory, a link to itself (ELOOP), a link to its own directory (a
#: cycle for anything that walks).
BREAK: dict[str, Callable[[Path], None]] = {
    "junk": lambda p: p.write_bytes(b"\xff\xfe\x00junk\n\x80" + b"9" * 40),
    "empty": lambda p: p.write_bytes(b""),
    "huge-number": lambda p: p.write_bytes(b"-99999999999999999999999999999\n"),
    "long": lambda p: p.write_bytes(b"7" * 70000),
    "fifo": lambda p: _replace(p, os.mkfifo),
    "dangling": lambda p: _replace(p, lambda q: q.symlink_to("/nonexistent/sysverbs")),
    "directory": lambda p: _replace(p, lambda q: q.mkdir()),
    "self-loop": lambda p: _replace(p, lambda q: q.symlink_to(q.name)),
    "parent-loop": lambda p: _replace(p, lambda q: q.symlink_to(".")),
}

def _unreadable(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0)


#: How the fuzzed broken trees make a path that is not there yet (:func:`make_broken`).
MAKE: dict[str, Callable[[Path, bytes], None]] = {
    "file": lambda p, data: p.write_bytes(data),
    "big": lambda p, data: p.write_bytes(b"9" * 10000),  # more than any read's buffer
    "dir": lambda p, data: p.mkdir(),
    "loop": lambda p, data: p.symlink_to(p.name),  # a link to itself: ELOOP
    "dangling": lambda p, data: p.symlink_to("../nowhere"),
    "up": lambda p, data: p.symlink_to("../../../.."),  # an ancestor: a cycle for a walker
    "fifo": lambda p, data: os.mkfifo(p),  # opening it to read blocks
    "mode0": lambda p, data: _unreadable(p, data),
    "missing": lambda p, data: None,  # only its directory
}


def make_broken(path: Path, kind: str, data: bytes = b"") -> None:
    """Make ``path`` (not there yet) the ``kind`` way of :data:`MAKE`, its directory
    first: one broken file or link of a fuzzed tree."""
    path.parent.mkdir(parents=True, exist_ok=True)
    MAKE[kind](path, data)


#: Corruption kinds over the whole tree: each file broken one way, or each link.
KINDS = {
    "junk": ("junk", "files"), "empty": ("empty", "files"),
    "huge-number": ("huge-number", "files"), "long": ("long", "files"),
    "fifo": ("fifo", "files"), "dangling": ("dangling", "files"),
    "directory": ("directory", "files"), "link-self-loop": ("self-loop", "links"),
    "link-parent-loop": ("parent-loop", "links"), "link-dangling": ("dangling", "links"),
}
CORRUPTIONS = tuple(KINDS)


def corrupt(host: FakeHost, kind: str) -> None:
    """Break every file (or every link) of ``host``'s sysfs tree the ``kind`` way."""
    how, what = KINDS[kind]
    paths = attribute_files(host.sysfs) if what == "files" else _links(host.sysfs)
    for p in paths:
        if what == "links":
            p.unlink()
            p.touch()  # BREAK's makers replace an existing path
        BREAK[how](p)

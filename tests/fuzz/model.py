"""One differential test case and how to put it on disk.

A :class:`Case` is plain data, so a failing example can be printed as Python
source (:meth:`Case.source`) and pasted into :mod:`tests.fuzz.regressions`:

* ``tree``: paths relative to the root (``sys/...``, ``dev/infiniband/...``) and
  what is there: file bytes, :class:`Dir`, :class:`Link`, :class:`Fifo` or
  :class:`CharDev`.  Names that are not UTF-8 are ``str`` with surrogate escapes
  (``os.fsdecode``).  Entries are created in order; an entry whose parent cannot
  be made a directory is left out (the same for both copies).
* ``steps``: the probe plan (:mod:`tests.fuzz.probe`): ``list``, ``free``, ``open``
  and tree changes between calls.
* ``env``: extra environment (``IBV_SHOW_WARNINGS``, ``RDMAV_DRIVERS``, ...).
* ``config``: a config directory bound over ``/etc/libibverbs.d`` (None: the
  host's own).
* ``sysfs``: ``SYSFS_PATH`` as a template of ``{root}`` and ``{sys}``;
  ``sysfs_len`` moves ``sys`` under padding directories so that the stripped
  path has exactly that many characters.
* ``modes``: chmod after building (for the unprivileged runs; keys under
  ``etc/libibverbs.d`` are the config directory and its files); ``user``: "root",
  "nobody" (``setpriv --reuid=65534 --regid=65534 --clear-groups``) or "setuid"
  (``setpriv --ruid=65534``: real uid differs from the effective one);
  ``memlock``: ``RLIMIT_MEMLOCK`` in bytes.
* ``static``: None for the dynamic libibverbs; else the case runs a program linked with
  the static libibverbs.a (tests/oracle/static_probe.c) with that
  ``RDMA_STATIC_PROVIDERS`` ("" for none: no define), and sysverbs with the option
  ``static_providers`` of the same value.

:func:`build_tree` is not :func:`sysverbs.testing.materialize`: a case's tree is a
hostile file tree, not a host, and holds what that writer refuses by design (names
with ``/`` and ``..`` pasted into paths and written through whatever they resolve to,
FIFOs, char devices, ``sys`` moved below padding directories, a config directory,
entries that cannot exist and are left out).

Every timestamp in a built tree is fixed (see :func:`normalize_mtimes`), so a
device's identity across calls (its IB directory's mtime, to the nanosecond)
does not depend on when the copy was built.
"""

from __future__ import annotations

import os
import pprint
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from tests.trees import Dir, Link

__all__ = [
    "Case",
    "CharDev",
    "Dir",
    "Entry",
    "Fifo",
    "Link",
    "build_tree",
    "normalize_mtimes",
    "BUILD_EPOCH",
    "STEP_EPOCH",
    "RECENT",
]


@dataclass(frozen=True)
class Fifo:
    """A named pipe (only where libibverbs never reads it: it would block)."""


@dataclass(frozen=True)
class CharDev:
    """A character device node (``mknod``)."""

    major: int = 1
    minor: int = 7


Entry = Union[bytes, str, Dir, Link, Fifo, CharDev]

#: Built trees get mtimes BUILD_EPOCH + i seconds; changes made by a probe step k
#: get STEP_EPOCH + k seconds; anything at or above RECENT was set by the kernel
#: ("now") and is normalised.
BUILD_EPOCH = 1_000_000_000
STEP_EPOCH = 1_400_000_000
RECENT = 1_600_000_000


@dataclass
class Case:
    """One example: see the module docstring."""

    tree: dict[str, Entry]
    steps: list[dict[str, Any]] = field(default_factory=lambda: [{"op": "list"}])
    env: dict[str, str] = field(default_factory=dict)
    config: Optional[dict[str, Entry]] = None
    sysfs: str = "{root}/{sys}"
    sysfs_len: Optional[int] = None
    modes: dict[str, int] = field(default_factory=dict)
    user: str = "root"
    memlock: Optional[int] = None
    static: Optional[str] = None

    @property
    def mutates(self) -> bool:
        """Whether a step changes the tree (then each implementation needs its own copy)."""
        return any(s["op"] not in ("list", "free", "open") for s in self.steps)

    @property
    def has_char_devices(self) -> bool:
        return any(isinstance(e, CharDev) for e in self.tree.values())

    def summary(self) -> str:
        n = sum(1 for p in self.tree if p.count("/") == 3 and "/class/infiniband_verbs/" in p)
        lists = sum(1 for s in self.steps if s["op"] == "list")
        linked = "" if self.static is None else f", static libibverbs {self.static!r}"
        return f"{n} class entries, {len(self.tree)} paths, {lists} list calls{linked}"

    def source(self, name: str = "case") -> str:
        """Python source that rebuilds this case (for tests/fuzz/regressions.py)."""
        fields = {
            "tree": self.tree,
            "steps": self.steps,
            "env": self.env,
            "config": self.config,
            "sysfs": self.sysfs,
            "sysfs_len": self.sysfs_len,
            "modes": self.modes,
            "user": self.user,
            "memlock": self.memlock,
            "static": self.static,
        }
        defaults = Case(tree={})
        parts = []
        for key, value in fields.items():
            if key != "tree" and value == getattr(defaults, key):
                continue
            text = pprint.pformat(value, width=92, sort_dicts=False)
            parts.append(f"    {key}=" + text.replace("\n", "\n    ") + ",")
        return f"{name} = Case(\n" + "\n".join(parts) + "\n)"


def sys_dir_for(case: Case, root: str) -> str:
    """Where ``sys`` goes (relative to root) so that SYSFS_PATH has ``sysfs_len`` characters."""
    if case.sysfs_len is None:
        return "sys"
    base = len(case.sysfs.format(root=root, sys="sys").rstrip("/"))
    extra = case.sysfs_len - base  # characters to insert as "<pad>/"
    if extra < 2:
        return "sys"
    parts = []
    left = extra - 1  # the pad path without its trailing "/"
    while left > 0:
        take = min(left, 100)
        if left - take == 1:  # never leave a lone separator
            take -= 1
        parts.append("p" * take)
        left -= take + 1
    return "/".join(parts) + "/sys"


def sysfs_value(case: Case, root: str) -> str:
    return case.sysfs.format(root=root, sys=sys_dir_for(case, root))


def relocate(path: str, sys_dir: str) -> str:
    """A tree or step path with its leading ``sys`` moved to ``sys_dir``."""
    if sys_dir != "sys" and (path == "sys" or path.startswith("sys/")):
        return sys_dir + path[3:]
    return path


def _create(path: Path, entry: Entry) -> None:
    if isinstance(entry, Dir):
        path.mkdir(exist_ok=True)
    elif isinstance(entry, Link):
        os.symlink(entry.target, path)
    elif isinstance(entry, Fifo):
        os.mkfifo(path)
    elif isinstance(entry, CharDev):
        os.mknod(path, 0o644 | 0o020000, os.makedev(entry.major, entry.minor))
    else:
        with open(path, "xb") as f:
            f.write(os.fsencode(entry))


def build_tree(
    root: Path,
    tree: dict[str, Entry],
    sys_dir: str = "sys",
    modes: Optional[dict[str, int]] = None,
    dev: bool = True,
) -> None:
    """Create ``tree`` under ``root`` (skipping entries that cannot exist), then fix mtimes.

    ``modes`` are applied last (a key "" is the root itself); ``dev`` makes sure
    ``dev/infiniband`` exists (it is bound over /dev/infiniband).
    """
    root.mkdir(parents=True, exist_ok=True)
    if dev:
        (root / "dev/infiniband").mkdir(parents=True, exist_ok=True)
    for rel, entry in tree.items():
        path = root / relocate(rel, sys_dir)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(path):
                continue  # the first entry for a path wins
            _create(path, entry)
        except OSError:
            continue
    normalize_mtimes(root, BUILD_EPOCH, everything=True)
    for rel, mode in (modes or {}).items():
        try:
            os.chmod(root / relocate(rel, sys_dir) if rel else root, mode)
        except OSError:
            continue


def normalize_mtimes(root: Path, stamp: int, everything: bool = False) -> None:
    """Give fixed mtimes: every entry (``everything``) or those the kernel set to "now".

    With ``everything`` each entry gets ``stamp + i`` seconds in walk order (sorted
    names, so both copies get the same times); otherwise every entry whose mtime is
    recent gets ``stamp`` seconds.
    """
    i = 0
    top = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in [b"", *sorted(dirnames + filenames)]:
            path = os.path.join(dirpath, name) if name else dirpath
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if everything:
                t = (stamp + i) * 1_000_000_000
                i += 1
            elif st.st_mtime_ns >= RECENT * 1_000_000_000:
                t = stamp * 1_000_000_000
            else:
                continue
            try:
                os.utime(path, ns=(t, t), follow_symlinks=False)
            except OSError:
                pass

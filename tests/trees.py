"""Small fake hosts for tests: exact bytes, links, directories, anything broken.

A :class:`Tree` is the testing kit's one host model: device records
(:class:`sysverbs.testing.umockdev.Record`, made with :func:`sysverbs.testing.layout.device`)
for what the kernel lays out, with the exact (or broken) bytes a test wants, and
:class:`sysverbs.testing.umockdev.TreeEntry` objects for what no device record holds (the
class ``abi_version`` file, a class entry that is a directory, a dangling link).
:func:`build` writes it with :func:`sysverbs.testing.materialize`, the one writer.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Union

from sysverbs.testing import layout, materialize
from sysverbs.testing.umockdev import Record, Recording, TreeEntry


@dataclass(frozen=True)
class Link:
    """A symbolic link to ``target`` (an ``extra`` entry of :func:`host`)."""

    target: str


@dataclass(frozen=True)
class Dir:
    """An (empty) directory (an ``extra`` entry of :func:`host`)."""


#: What a path of :func:`host`'s ``extra`` holds: file bytes (``str`` as UTF-8), a
#: link or a directory.
Entry = Union[bytes, str, Link, Dir]
#: :func:`host`'s ``extra``: paths relative to the root and what they hold.
Extra = dict[str, Entry]


def entry(path: str, value: Entry) -> TreeEntry:
    """``extra``'s ``path: value`` as a :class:`~sysverbs.testing.umockdev.TreeEntry` (a
    trailing ``/`` names the same path, as for :class:`pathlib.Path`)."""
    path = path.rstrip("/")
    if isinstance(value, Link):
        return TreeEntry(path, link=value.target)
    if isinstance(value, Dir):
        return TreeEntry(path, directory=True)
    return TreeEntry(path, _bytes(value))


@dataclass(frozen=True)
class Tree:
    """A host: device records, then the entries no record holds; ``a + b`` both."""

    records: tuple[Record, ...] = ()
    entries: tuple[TreeEntry, ...] = ()

    def __add__(self, other: Tree) -> Tree:
        """Both hosts; a record of ``other`` at the path of one of ``self`` changes its
        files and links (the later one wins), as writing both would."""
        records = list(self.records)
        where = {r.path: i for i, r in enumerate(records)}
        for rec in other.records:
            i = where.get(rec.path)
            if i is None:
                where[rec.path] = len(records)
                records.append(rec)
            else:
                records[i] = _merge(records[i], rec)
        return Tree(tuple(records), self.entries + other.entries)


def _merge(old: Record, new: Record) -> Record:
    for a in new.attributes:
        old = (old.with_link(a.name, a.link) if a.link is not None
               else old.with_attribute(a.name, a.value, binary=a.binary))
    if new.node is not None:
        old = replace(old, node=new.node, node_contents=new.node_contents)
    return old


MLX5_MODALIAS = "pci:v000015B3d0000101Bsv000015B3sd00000007bc02sc07i00\n"
CLASS_ABI = Tree(entries=(TreeEntry("sys/class/infiniband_verbs/abi_version", b"6\n"),))

#: What every built tree has (the class directories and /dev/infiniband).
_ALWAYS = tuple(TreeEntry(p, directory=True) for p in (
    "sys/class/infiniband_verbs", "sys/class/infiniband", "dev/infiniband"))


def build(root: Path, tree: Union[Tree, Mapping[str, Entry]]) -> Path:
    """Write ``tree`` (or only paths, as :func:`host`'s ``extra``) under ``root`` with
    :func:`sysverbs.testing.materialize`; returns root."""
    if not isinstance(tree, Tree):
        tree = host(extra=tree, class_abi=False)
    materialize(Recording(tree.records), root, entries=_ALWAYS + tree.entries)
    return root


def paths(tree: Tree) -> Extra:
    """What :func:`materialize` writes for ``tree``, path by path (relative to the
    root, in sorted order): file bytes, :class:`Link` or :class:`Dir`."""
    out: Extra = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        materialize(Recording(tree.records), root, entries=tree.entries)
        top = os.fsencode(tmp)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                full = os.path.join(dirpath, name)
                rel = os.fsdecode(os.path.relpath(full, top))
                if os.path.islink(full):
                    out[rel] = Link(os.fsdecode(os.readlink(full)))
                elif os.path.isdir(full):
                    out[rel] = Dir()
                else:
                    with open(full, "rb") as f:
                        out[rel] = f.read()
    return out


def _bytes(value: Union[str, bytes]) -> bytes:
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value


def _opt(value: Optional[Union[str, bytes]]) -> Optional[bytes]:
    return None if value is None else _bytes(value)


def rdma_dev(
    uverbs: str,
    ibdev: Union[str, bytes],
    *,
    pci: str = "0000:07:00.0",
    modalias: Optional[Union[str, bytes]] = MLX5_MODALIAS,
    abi: Optional[Union[str, bytes]] = "1\n",
    node_type: Optional[Union[str, bytes]] = "1: CA\n",
    guid: Optional[Union[str, bytes]] = "0c42:a103:00a5:1c30\n",
    dev: Optional[Union[str, bytes]] = "231:192\n",
    dev_node: bool = True,
    ibdev_file: Optional[Union[str, bytes]] = None,
) -> Tree:
    """One device laid out as the kernel does: its ib and uverbs device records below
    ``/sys/devices/pci0000:00/<pci>`` (whose ``modalias`` the uverbs record carries),
    their class links, the ``/dev`` node; each file's bytes as given (None: no file)."""
    name = ibdev if isinstance(ibdev, str) else os.fsdecode(ibdev)
    base = f"/devices/pci0000:00/{pci}"
    ib_path = f"{base}/infiniband/{name}"
    uv_path = f"{base}/infiniband_verbs/{uverbs}"
    ibdev_bytes = _bytes(ibdev_file) if ibdev_file is not None else _bytes(ibdev) + b"\n"
    ib_files = [("node_type", _opt(node_type)), ("node_guid", _opt(guid))]
    ib_link = ("device", layout.kernel_link(ib_path, base))
    uv = layout.device(uv_path, "infiniband_verbs",
                       attrs=[("ibdev", ibdev_bytes), ("../../modalias", _opt(modalias)),
                              ("abi_version", _opt(abi)), ("dev", _opt(dev))],
                       links=[("device", layout.kernel_link(uv_path, base))],
                       node=f"infiniband/{uverbs}" if dev_node else None)
    if not name:
        # No device record has an empty name: the ib device's files lie in
        # infiniband/ itself, and there is no class link.
        files = [TreeEntry(f"sys{base}/infiniband/{n}", v) for n, v in ib_files if v is not None]
        return Tree((uv,), (*files, TreeEntry(f"sys{base}/infiniband/device", link="../../../"
                                              + pci)))
    ib = layout.device(ib_path, "infiniband", attrs=ib_files, links=[ib_link])
    return Tree((ib, uv))


def rxe_dev(uverbs: str, ibdev: str, **kw: object) -> Tree:
    """A soft-RoCE device: matched by name, no modalias."""
    kw.setdefault("modalias", None)
    kw.setdefault("abi", "2\n")
    return rdma_dev(uverbs, ibdev, pci=f"virtual-{ibdev}", **kw)  # type: ignore[arg-type]


def host(*devices: Tree, extra: Union[Mapping[str, Entry], Tree, None] = None,
         class_abi: bool = True) -> Tree:
    """Devices (plus the class abi_version, then ``extra``: paths, or one more
    device) as one host."""
    tree = CLASS_ABI if class_abi else Tree()
    for d in devices:
        tree = tree + d
    if isinstance(extra, Tree):
        return tree + extra
    return tree + Tree(entries=tuple(entry(p, v) for p, v in (extra or {}).items()))

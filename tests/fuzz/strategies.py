"""Hypothesis strategies that build sysfs trees, plans and environments (issue #3).

The public strategies are :func:`cases` (the root differential run) and
:func:`unprivileged_cases` (run as nobody, or with ruid != euid).  What they
generate (docs/reliability.md has the full list):

* 0 to 64 devices, each laid out as the kernel does (class links into
  ``sys/devices``) or broken in one to four of these ways: the class entry, the
  ``class/infiniband/<name>`` entry, the ``device`` link and the ``/dev`` node
  can each be missing, a directory, a regular file, a dangling or looping link
  (or a FIFO / char device where libibverbs only ``stat``\\ s or opens with
  ``O_DIRECTORY``); the name and the entry name can be odd;
* every file libibverbs reads (``ibdev``, ``dev``, ``abi_version``,
  ``node_type``, ``node_guid``, ``device/modalias``, the class ``abi_version``)
  in every variant: missing, a directory, a dangling or looping link, a link to
  the content, and contents that are normal, junk, whitespace, signed,
  overflowing, without newline, with two newlines, with CR, with NUL, and of
  length exactly buffer size -2 .. +2 with and without a newline at each end;
* names of 0 to 70 bytes: realistic, rxe look-alikes, spaces, newlines,
  non-UTF-8 bytes, ``/`` and ``..`` (pasted into paths by libibverbs);
* every provider's PCI modalias (of every rdma-core release, so newer IDs are
  near misses at v44) and near misses: lowercase hex, no ``sv``, truncated,
  off-by-one IDs, vmbus exact and near misses, ``rdma_device:`` strings;
* the class ABI in its accepted, rejected-non-zero and parses-to-zero forms;
* SYSFS_PATH forms (trailing slashes, ``//``, ``/./``, over 256 characters,
  ``/``, empty, missing class dir, lengths around 224/225/232/233);
* ``IBV_SHOW_WARNINGS`` (any value), config directories (good and bad
  directives, comments, ``\\r``, NUL, no final newline, subdirectories, dangling
  links) and ``RDMAV_DRIVERS``/``IBV_DRIVERS``;
* plans of several ``list`` calls with the tree changed in between (devices
  added, removed, renamed, touched, their ``ibdev``/``node_guid``/``abi_version``
  /``node_type`` rewritten, ``/dev`` nodes removed, equal-mtime renames), ``free``
  and ``open``;
* where the caller passes ``static`` variants (:data:`STATIC_VARIANTS`), one case in
  four runs as a program linked with the static libibverbs.a and one of them
  (``Case.static``); without variants nothing is drawn for it, so that
  tests/test_static_oracle.py's seeded trees stay what they were.

Excluded, each because the spec says libibverbs does not define the result
(docs/behaviour.md: sysverbs' choices) or because sysverbs
documents an intended difference (README, "Intended differences"):

* an EMPTY class ``abi_version``, EMPTY per-device ``dev`` and EMPTY
  ``node_guid`` (also through a link to an empty file, and in rewrites between
  calls): libibverbs parses an uninitialised stack buffer (docs/behaviour.md: sysverbs' choices);
* a FIFO where libibverbs reads a file: libibverbs blocks forever (README,
  "FIFOs");
* ``open`` steps when a ``/dev`` node is a real char device: a provider's
  ``alloc_context`` would run against it (README, "No kernel context");
* a missing config directory: it cannot be made to vanish inside the namespace
  without also hiding the loader's files (covered by hand-written tests);
* a device that bnxt_re takes, with a dev_path of 256 bytes or more: libibverbs
  then calls bnxt_re's ``uninit_device``, which does not exist, and crashes
  (SIGSEGV; see :data:`BNXT_RE_PREFIXES`).

Generation speed matters (thousands of examples): helpers are plain functions
over a :class:`G` (the ``draw`` function plus cached strategy objects), not
nested ``@composite`` strategies.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

from hypothesis import strategies as st

from tests.fuzz.draws import (
    ABI,
    CLASS_ABI,
    DEV,
    IBDEV,
    LIBRARIES,
    MISSING,
    MODALIAS,
    NODE_GUID,
    NODE_TYPE,
    PCI_IDS,
    Draw,
    FileSpec,
    G,
    c_integer,
    entry_names,
    file_spec,
    guid_text,
    modalias_core,
    names,
    put_file,
    sized,
)
from tests.fuzz.model import Case, CharDev, Dir, Entry, Fifo, Link

__all__ = [
    "cases",
    "unprivileged_cases",
    "G",
    "DevSpec",
    "devices",
    "render_device",
    "STATIC_VARIANTS",
]

# -- one device -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DevSpec:
    """One generated device; rendered by :func:`render_device`."""

    idx: int
    entry: bytes
    entry_form: str  # link, dir, file, dangling, loop, fifo, linkfile
    name: bytes
    ib_form: str  # link, dir, missing, file, dangling, loop, fifo
    ibdev: FileSpec
    dev: FileSpec
    abi: FileSpec
    node_type: FileSpec
    node_guid: FileSpec
    device_form: str  # link, missing, dangling, dir
    modalias: FileSpec
    node_form: str  # file, missing, dir, dangling, loop, self, fifo, chr


@dataclass(frozen=True)
class DevPaths:
    entry: str  # sys/class/infiniband_verbs/<entry>
    uv: Optional[str]  # where ibdev/dev/abi_version are
    name_path: str  # sys/class/infiniband/<name>
    ib: Optional[str]  # where node_type/node_guid are
    node: str  # dev/infiniband/<entry>


NODE_TYPES = (
    b"1: CA\n",
    b"1\n",
    b"4: RNIC\n",
    b"2: SWITCH\n",
    b"3: ROUTER\n",
    b"5\n",
    b"6\n",
    b"7\n",
)

#: The parts of a device that can be broken.  About half of the devices break none,
#: the others one to four, so that most examples list devices and each broken part
#: is also seen alone.
ASPECTS = (
    "name",
    "entry_name",
    "entry_form",
    "ib_form",
    "ibdev",
    "dev",
    "abi",
    "node_type",
    "node_guid",
    "device",
    "modalias",
    "node",
)


def devices(g: G, idx: int, number: int, well_formed: bool = False) -> DevSpec:
    """One device.  ``well_formed`` gives the kernel's layout with sane contents (used
    for devices added between calls); otherwise some parts may be broken."""
    broken: set[str] = set()
    if not well_formed and g.coin():
        broken = {g.pick(ASPECTS) for _ in range(g.weighted((4, 1), (2, 2), (1, 3), (1, 4)))}
    profile = g.weighted((6, "pci"), (3, "rxe"), (1, "unmatched"), (1, "random"))
    abi_range = (0, 8)
    mod_text: Optional[bytes] = None
    prefix = b"dev"
    if profile == "pci":
        mod_text, abi_range = modalias_core(g, exact="modalias" not in broken)
        prefix = g.pick((b"mlx5_", b"dev", b"rocep", b"efa_"))
    elif profile == "rxe":
        prefix, abi_range = b"rxe", (1, 2)
    elif profile == "unmatched":
        prefix = g.pick((b"siw", b"mana_", b"usnic_", b"smi"))
    else:
        mod_text = modalias_core(g)[0]
    if "modalias" in broken:
        text = mod_text if mod_text is not None else modalias_core(g)[0]
        modalias = file_spec(g, lambda: sized(g, text, MODALIAS, normal=2), missing_weight=4)
    else:
        modalias = FileSpec("file", mod_text + b"\n") if mod_text is not None else MISSING
    name = names(g, prefix) if "name" in broken else prefix + b"%d" % g.integer(0, 99)
    if well_formed:
        name += b"_new%d" % idx
    lo, hi = abi_range
    typical_abi = sorted({lo, hi, max(lo - 1, 0), min(hi + 1, 2**32 - 1), 0, 1, 2, 3, 4, 5, 6})
    entry = entry_names(g, number) if "entry_name" in broken else b"uverbs%d" % number
    entry_form = "link"
    if "entry_form" in broken:
        entry_form = g.pick(("dir", "file", "dangling", "loop", "fifo", "linkfile"))
    ib_form = "link"
    if "ib_form" in broken:
        ib_form = g.pick(("dir", "missing", "file", "dangling", "loop", "fifo"))
    ibdev = FileSpec("file", name + b"\n")
    if "ibdev" in broken:
        how = g.pick(("sized", "sized", "form", "empty", "junk"))
        if how == "sized":
            ibdev = FileSpec("file", sized(g, name, IBDEV, normal=0))
        elif how == "form":
            ibdev = file_spec(g, lambda: name + b"\n", file_weight=0)
        elif how == "empty":
            ibdev = FileSpec("file", g.pick((b"", b"\n")))
        else:
            ibdev = FileSpec("file", g.junk())
    dev = FileSpec("file", b"231:%d\n" % number)
    if "dev" in broken:
        core = (
            c_integer(g, (231, 0, 1))
            + g.weighted((6, b":"), (1, b" :"), (1, b": "), (1, b"::"), (1, b""), (1, b";"))
            + c_integer(g, (192, 0, 3))
        )
        dev = file_spec(g, lambda: sized(g, core, DEV, allow_empty=False, normal=2), file_weight=8)
    abi = FileSpec("file", b"%d\n" % g.integer(lo, min(hi, lo + 3)))
    if "abi" in broken:
        core = b"%d" % g.pick(typical_abi) if g.coin() else c_integer(g, typical_abi)
        abi = file_spec(g, lambda: sized(g, core, ABI, normal=4), file_weight=8)
    node_type = FileSpec("file", g.pick(NODE_TYPES))
    if "node_type" in broken:
        if g.coin():
            core = g.pick((b"1: CA", b"4: RNIC", b"2: SWITCH", b"3", b"5", b"6", b"7", b"8"))
        else:
            core = c_integer(g, tuple(range(0, 9)))
        node_type = file_spec(g, lambda: sized(g, core, NODE_TYPE, normal=4), file_weight=8)
    node_guid = FileSpec("file", guid_text(g, good_only=True) + b"\n")
    if "node_guid" in broken:
        node_guid = file_spec(
            g,
            lambda: sized(g, guid_text(g), NODE_GUID, allow_empty=False, normal=4),
            file_weight=8,
        )
    device_form = "link" if modalias.form != "missing" else "missing"
    if "device" in broken:
        device_form = g.pick(("missing", "dangling", "dir"))
    node_form = "file"
    if "node" in broken:
        node_form = g.pick(("missing", "missing", "dir", "dangling", "loop", "self", "fifo", "chr"))
    return DevSpec(
        idx, entry, entry_form, name, ib_form, ibdev, dev, abi, node_type, node_guid,
        device_form, modalias, node_form,
    )  # fmt: skip


def _path(*parts: Union[str, bytes]) -> str:
    return "/".join(os.fsdecode(p) for p in parts)


def render_device(tree: dict[str, Entry], d: DevSpec) -> DevPaths:
    """Add one device to ``tree`` (device files first, then the class links)."""
    base = f"sys/devices/d{d.idx}"
    entry = _path("sys/class/infiniband_verbs", d.entry)
    name_path = _path("sys/class/infiniband", d.name)
    node = _path("dev/infiniband", d.entry)
    tree[base] = Dir()  # the PCI-like device directory, with its modalias
    uv = {"link": base + "/uv", "dir": entry}.get(d.entry_form)
    ib = {"link": base + "/ib", "dir": name_path}.get(d.ib_form)
    if uv is not None:
        tree[uv] = Dir()
        put_file(tree, uv + "/ibdev", d.ibdev)
        put_file(tree, uv + "/dev", d.dev)
        put_file(tree, uv + "/abi_version", d.abi)
    if ib is not None:
        tree[ib] = Dir()
        put_file(tree, ib + "/node_type", d.node_type)
        put_file(tree, ib + "/node_guid", d.node_guid)
        if d.device_form == "link":
            tree[ib + "/device"] = Link(os.path.relpath(base, ib))
            put_file(tree, base + "/modalias", d.modalias)
        elif d.device_form == "dir":
            tree[ib + "/device"] = Dir()
            put_file(tree, ib + "/device/modalias", d.modalias)
        elif d.device_form == "dangling":
            tree[ib + "/device"] = Link("nonexistent")
    parent = os.path.dirname(entry)
    if d.entry_form == "link":
        tree[entry] = Link(os.path.relpath(base + "/uv", parent))
    elif d.entry_form == "file":
        tree[entry] = b"not a directory\n"
    elif d.entry_form == "dangling":
        tree[entry] = Link(os.path.relpath(base + "/nowhere", parent))
    elif d.entry_form == "loop":
        tree[entry] = Link(os.path.basename(entry))
    elif d.entry_form == "fifo":
        tree[entry] = Fifo()
    elif d.entry_form == "linkfile":
        tree[base + "/uvfile"] = b"ibdev\n"
        tree[entry] = Link(os.path.relpath(base + "/uvfile", parent))
    nparent = os.path.dirname(name_path)
    if d.ib_form == "link":
        tree[name_path] = Link(os.path.relpath(base + "/ib", nparent))
    elif d.ib_form == "file":
        tree[name_path] = b"not a directory\n"
    elif d.ib_form == "dangling":
        tree[name_path] = Link("nonexistent-ib")
    elif d.ib_form == "loop":
        tree[name_path] = Link(os.path.basename(name_path) or "loop")
    elif d.ib_form == "fifo":
        tree[name_path] = Fifo()
    node_entries: dict[str, Entry] = {
        "file": b"",
        "dir": Dir(),
        "dangling": Link("/nonexistent"),
        "loop": Link(os.path.basename(node)),
        "self": Link("."),
        "fifo": Fifo(),
        "chr": CharDev(1, 7),
    }
    node_entry = node_entries.get(d.node_form)
    if node_entry is not None:
        tree[node] = node_entry
    return DevPaths(entry, uv, name_path, ib, node)


# -- class directory, config, environment -------------------------------------------------------


def class_abi(g: G) -> FileSpec:
    """The class abi_version: never empty (docs/behaviour.md: sysverbs' choices)."""
    if g.weighted((3, True), (1, False)):
        return FileSpec("file", b"6\n")
    core = g.pick(
        (b"6", None, None, b"3", b"7", b"-6", b"0", b"1234567", b"0x6", b"junk", b"4294967302")
    )
    if core is None:
        core = c_integer(g, (3, 4, 5, 6, 7, 0, 2))
    text = core
    return file_spec(g, lambda: sized(g, text, CLASS_ABI, allow_empty=False), missing_weight=2)


DRIVER_NAMES = (
    *LIBRARIES,
    "pvrdma",
    "nosuch",
    "ibverbs",
    "",
    "rxe\r",
    "x/y",
    "/nonexistent/librxe",
    "/usr/lib/x86_64-linux-gnu/libibverbs/librxe",
    "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5",
    "/usr/lib/x86_64-linux-gnu/libibverbs",
    "n" * 300,
)


def config_line(g: G) -> bytes:
    name = os.fsencode(g.pick(DRIVER_NAMES))
    variants = (
        b"driver %s extra words\n" % name,
        b"\tdriver\t%s # c\n" % name,
        b"# comment\n",
        b"\n",
        b"  \t# indented\n",
        b"Driver %s\n" % name,
        b"foo bar\n",
        b"driver\n",
        b"driver \n",
        b"driver %s\r\n" % name,
        b"   ",
        b"driver",
        b"driver\x00%s\n" % name,
        None,  # junk
    )
    kind = g.weighted((10, -1), *((1, k) for k in range(len(variants))))
    if kind == -1:
        return b"driver %s\n" % name
    return variants[kind] or g.junk() + b"\n"


CONFIG_NAMES = (*(lib + ".driver" for lib in LIBRARIES), "README", ".hidden", "x.conf", "a b")


def config_dirs(g: G) -> Optional[dict[str, Entry]]:
    """None (the host's /etc/libibverbs.d) or a generated config directory."""
    if g.weighted((3, True), (1, False)):
        return None
    files: dict[str, Entry] = {}
    if g.coin():  # start from Debian's: one "driver <lib>" file per provider library
        files.update({lib + ".driver": b"driver %s\n" % lib.encode() for lib in LIBRARIES})
    for _ in range(g.integer(0, 8)):
        name = g.pick(CONFIG_NAMES)
        form = g.weighted((10, "file"), (1, "dir"), (1, "dangling"), (1, "link"))
        if form == "file":
            files[name] = b"".join(config_line(g) for _ in range(g.integer(0, 5)))
        elif form == "dir":
            files[name] = Dir()
        elif form == "dangling":
            files[name] = Link("/nonexistent/" + name)
        else:
            files[name + ".real"] = config_line(g)
            files[name] = Link(name + ".real")
    return files


def environments(g: G) -> dict[str, str]:
    env: dict[str, str] = {}
    show = g.weighted((3, None), (3, "1"), (1, ""), (1, "0"))
    if show is not None:
        env["IBV_SHOW_WARNINGS"] = show
    which = g.weighted((6, None), (2, "RDMAV_DRIVERS"), (1, "IBV_DRIVERS"), (1, "both"))
    if which is not None:
        value = ""
        for i in range(g.integer(0, 4)):
            value += (g.pick((":", ";", "::")) if i else "") + g.pick(DRIVER_NAMES[:-1])
        if which in ("RDMAV_DRIVERS", "both"):
            env["RDMAV_DRIVERS"] = value
        if which in ("IBV_DRIVERS", "both"):
            env["IBV_DRIVERS"] = g.pick(("nosuch", "rxe", "", value))
    return env


# -- plans --------------------------------------------------------------------------------------


def add_device_steps(tree: dict[str, Entry]) -> list[dict[str, Any]]:
    """The steps that create a rendered device (directories and files, then class links)."""
    steps: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for path, entry in tree.items():
        if isinstance(entry, Dir):
            steps.append({"op": "mkdir", "path": path})
        elif isinstance(entry, (bytes, str)):
            steps.append({"op": "mkdir", "path": os.path.dirname(path)})
            steps.append({"op": "write", "path": path, "data": os.fsencode(entry).hex()})
        elif isinstance(entry, Link):
            op = {"op": "symlink", "path": path, "target": entry.target}
            (links if path.startswith("sys/class/") else steps).append(op)
    return steps + links


MUTATIONS = (
    "add",
    "remove_entry",
    "remove_node",
    "touch",
    "rewrite_ibdev",
    "guid",
    "add",
    "remove_entry",
    "touch",
    "rename_name",
    "remove_guid",
    "class_abi",
    "rename_entry",
    "remove_ib",
    "abi",
    "node_type",
)


def mutation(g: G, devs: list[DevPaths], next_idx: list[int]) -> list[dict[str, Any]]:
    """One change to the tree between two calls."""
    kind = g.pick(MUTATIONS)
    if kind == "add" or not devs:
        idx = next_idx[0]
        next_idx[0] += 1
        sub: dict[str, Entry] = {}
        paths = render_device(sub, devices(g, idx, 1000 + idx, well_formed=True))
        devs.append(paths)
        return add_device_steps(sub)
    p = g.pick(devs)
    q = g.pick(devs)
    if kind == "remove_entry":
        return [{"op": "remove", "path": p.entry}]
    if kind == "remove_node":
        return [{"op": "remove", "path": p.node}]
    if kind == "rename_name":
        return [{"op": "rename", "path": p.name_path, "to": q.name_path + "_renamed"}]
    if kind == "rewrite_ibdev" and p.uv is not None:
        new_name = os.fsencode(os.path.basename(q.name_path))
        steps: list[dict[str, Any]] = [
            {"op": "write", "path": p.uv + "/ibdev", "data": (new_name + b"\n").hex()}
        ]
        # the same mtime: libibverbs keeps the old name (docs/behaviour.md: The device list
        # across calls)
        if g.coin():
            steps.append({"op": "utime", "path": q.name_path, "like": p.name_path})
        return steps
    if kind == "guid" and p.ib is not None:
        data = sized(g, guid_text(g), NODE_GUID, allow_empty=False)
        return [{"op": "write", "path": p.ib + "/node_guid", "data": data.hex()}]
    if kind == "remove_guid" and p.ib is not None:
        return [{"op": "remove", "path": p.ib + "/node_guid"}]
    if kind == "class_abi":
        spec = class_abi(g)
        path = "sys/class/infiniband_verbs/abi_version"
        if spec.form == "file":
            return [{"op": "write", "path": path, "data": spec.content.hex()}]
        return [{"op": "remove", "path": path}]
    if kind == "rename_entry":
        return [{"op": "rename", "path": p.entry, "to": p.entry + "_r"}]
    if kind == "remove_ib" and p.ib is not None:
        return [{"op": "remove", "path": p.ib}]
    if kind == "abi" and p.uv is not None:
        return [{"op": "write", "path": p.uv + "/abi_version", "data": c_integer(g).hex()}]
    if kind == "node_type" and p.ib is not None:
        return [{"op": "write", "path": p.ib + "/node_type", "data": c_integer(g).hex()}]
    return [{"op": "touch", "path": p.name_path, "seconds": g.integer(1, 9)}]


def plans(g: G, devs: list[DevPaths], next_idx: int, allow_open: bool) -> list[dict[str, Any]]:
    """``list``, then 0 to 3 more calls with changes, frees and opens in between."""
    steps: list[dict[str, Any]] = [{"op": "list"}]
    devs = list(devs)
    counter = [next_idx]
    lists = 1
    for _ in range(g.weighted((5, 0), (3, 1), (2, 2), (1, 3))):
        for _ in range(g.integer(0, 4)):
            steps += mutation(g, devs, counter)
        if g.coin(odds=4):
            steps.append({"op": "free", "list": g.integer(0, lists - 1)})
        if allow_open and g.coin(odds=4):
            steps.append(
                {"op": "open", "list": g.integer(0, lists - 1), "device": g.integer(0, 63)}
            )
        steps.append({"op": "list"})
        lists += 1
    return steps


# -- whole cases ---------------------------------------------------------------------------------

SYSFS_FORMS = (
    "{root}/{sys}",
    "{root}/{sys}/",
    "{root}/{sys}///",
    "{root}//{sys}",
    "{root}/./{sys}",
    "{root}/{sys}" + "/" * 300,
    "{root}/nosuch",
    "/",
    "",
)
CLASS_EXTRAS: dict[str, Entry] = {
    "regular": b"x\n",
    "dangling": Link("../../devices/nowhere"),
    "loop": Link("loop"),
    "emptydir": Dir(),
    ".hidden": Dir(),
    "fifo": Fifo(),
}


#: libibverbs crashes (SIGSEGV) when a device that bnxt_re takes has a dev_path of 256
#: bytes or more: try_driver()'s error path for a too-long dev_path (docs/behaviour.md:
#: Matching providers) calls ops->uninit_device(), and bnxt_re's verbs_device_ops has none
#: (rdma-core v44, providers/bnxt_re/main.c), so it calls NULL.  Undefined behaviour in the oracle:
#: a case that may have a bnxt_re device never gets the long SYSFS_PATH that makes
#: dev_path that long (with the short default root it cannot reach 256 bytes).
BNXT_RE_PREFIXES = tuple(
    b"pci:v%08Xd%08Xsv" % (v, d) for v, d, prov, _lo, _hi in PCI_IDS if prov == "bnxt_re"
)


def _may_match_bnxt_re(tree: dict[str, Entry], steps: list[dict[str, Any]]) -> bool:
    data = [e for e in tree.values() if isinstance(e, bytes)]
    data += [bytes.fromhex(s["data"]) for s in steps if s["op"] == "write"]
    return any(p in d for d in data for p in BNXT_RE_PREFIXES)


#: The RDMA_STATIC_PROVIDERS values of the static cases ("": no define, no provider;
#: rxe,mlx4: a define whose order is not the link order).
STATIC_VARIANTS = ("", "mlx5", "mlx4,mlx5", "all", "rxe,mlx4")


def build_case(
    g: G, max_devices: int = 64, mutations: bool = True, static: Sequence[str] = ()
) -> Case:
    """A whole example; one in four is static when ``static`` offers variants."""
    linked: Optional[str] = None
    if static and g.weighted((3, False), (1, True)):  # no draw without variants
        linked = g.pick(tuple(static))
    size = g.weighted((4, 4), (3, 12), (1, max_devices))
    n = g.integer(1, min(size, max_devices)) if g.weighted((7, True), (1, False)) else 0
    numbers = list(range(2 * n))
    for i in range(n):  # a few swaps give a random-looking creation (and readdir) order
        j = g.integer(i, 2 * n - 1)
        numbers[i], numbers[j] = numbers[j], numbers[i]
    specs = [devices(g, i, numbers[i]) for i in range(n)]
    tree: dict[str, Entry] = {}
    class_form = g.weighted((40, "dir"), (1, "missing"), (1, "file"), (1, "link"))
    if class_form == "dir":
        tree["sys/class/infiniband_verbs"] = Dir()
    elif class_form == "file":
        tree["sys/class/infiniband_verbs"] = b"not a directory\n"
    elif class_form == "link":
        tree["sys/class/verbs_real"] = Dir()
        tree["sys/class/infiniband_verbs"] = Link("verbs_real")
    tree["sys/class/infiniband"] = Dir()
    put_file(tree, "sys/class/infiniband_verbs/abi_version", class_abi(g))
    rendered = [render_device(tree, s) for s in specs]
    if g.coin(odds=4):
        for extra in {g.pick(tuple(CLASS_EXTRAS)) for _ in range(g.integer(1, 3))}:
            tree["sys/class/infiniband_verbs/" + extra] = CLASS_EXTRAS[extra]
    allow_open = not any(isinstance(e, CharDev) for e in tree.values())
    steps = plans(g, rendered, n, allow_open) if mutations else [{"op": "list"}]
    form = g.weighted((60, 0), *((1, k) for k in range(1, len(SYSFS_FORMS))))
    sysfs_len: Optional[int] = g.weighted(
        (40, None), (2, -1), (1, 223), (1, 224), (1, 225), (1, 232), (1, 233)
    )
    if sysfs_len == -1:
        sysfs_len = g.integer(150, 245)
    if sysfs_len is not None and _may_match_bnxt_re(tree, steps):
        sysfs_len = None  # see BNXT_RE_PREFIXES
    case = Case(
        tree=tree,
        steps=steps,
        env=environments(g),
        config=config_dirs(g),
        sysfs=SYSFS_FORMS[form],
        sysfs_len=sysfs_len,
    )
    case.static = linked
    return case


@st.composite
def cases(
    draw: Draw, max_devices: int = 64, mutations: bool = True, static: Sequence[str] = ()
) -> Case:
    """A whole example for the root (privileged) differential run (``static``: the
    variants a static case may link, none by default)."""
    return build_case(G(draw), max_devices, mutations, static)


MODES = (0o000, 0o700, 0o711, 0o744, 0o600, 0o640, 0o604, 0o311)


@st.composite
def unprivileged_cases(draw: Draw, static: Sequence[str] = ()) -> Case:
    """A case run as nobody (unreadable entries, a low memlock limit) or setuid-like."""
    g = G(draw)
    case = build_case(g, max_devices=16, mutations=False, static=static)
    case.user = g.weighted((6, "nobody"), (1, "setuid"))
    paths = [p for p, e in case.tree.items() if isinstance(e, (bytes, str, Dir))]
    if paths:
        for _ in range(g.integer(0, 6)):
            case.modes[g.pick(paths)] = g.pick(MODES)
    if case.config is not None and g.coin():
        targets = ["etc/libibverbs.d"] + [
            "etc/libibverbs.d/" + k for k, v in case.config.items() if isinstance(v, (bytes, Dir))
        ]
        case.modes[g.pick(targets)] = g.pick(MODES)
    case.memlock = g.weighted((3, None), (1, 0), (1, 32768), (1, 32769), (1, 65536))
    case.steps = [{"op": "list"} for _ in range(g.integer(1, 2))]
    return case

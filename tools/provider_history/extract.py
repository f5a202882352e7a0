"""The provider facts of one rdma-core release: match tables, ABI range, library
name, PABI version, the kernel's driver ids."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from .cexpr import ExprError, eval_int
from .cpp import Preprocessor, Reader, split_args
from .ctokens import strip_comments, tokenize
from .git import Git

# ---------------------------------------------------------------------------
# extraction of one release


@dataclass(frozen=True)
class Entry:
    kind: str  # pci | driver_id | modalias | name
    key: str  # vendor:device, driver id value, pattern, or name prefix

    def to_json(self, id_names: dict[int, str]) -> dict[str, Any]:
        if self.kind == "pci":
            v, d = self.key.split(":")
            return {"kind": "pci", "vendor": v, "device": d}
        if self.kind == "driver_id":
            value = int(self.key)
            return {"kind": "driver_id", "id": id_names.get(value, f"#{value}"), "value": value}
        if self.kind == "modalias":
            return {"kind": "modalias", "pattern": self.key}
        return {"kind": "name", "prefix": self.key, "pattern": f"rdma_device:*N{self.key}*"}


def entry_from_json(m: dict[str, Any]) -> Entry:
    kind = str(m["kind"])
    if kind == "pci":
        return Entry("pci", f"{int(m['vendor'], 16):#06x}:{int(m['device'], 16):#06x}")
    if kind == "driver_id":
        return Entry("driver_id", str(int(m["value"])))
    if kind == "modalias":
        return Entry("modalias", str(m["pattern"]))
    if kind == "name":
        return Entry("name", str(m["prefix"]))
    raise ValueError(f"unknown match kind {kind!r}")


@dataclass
class ProviderSnap:
    library: str
    name: Optional[str]
    min_abi: Optional[int]
    max_abi: Optional[int]
    entries: list[Entry]
    notes: list[str] = field(default_factory=list)
    id_names: dict[int, str] = field(default_factory=dict)  # spelling used in the source


@dataclass
class ReleaseSnap:
    release: int
    ref: str
    pabi: int
    providers: dict[str, ProviderSnap]  # by library name
    driver_ids: dict[str, int]


_PREDEFINED = {"INT_MAX": "2147483647", "UINT_MAX": "4294967295", "NULL": "0", "true": "1",
               "false": "0", "__x86_64__": "1", "__linux__": "1", "__LP64__": "1"}


def _c_string(tok: str) -> str:
    body = tok[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def _items(tokens: list[str], start: int) -> tuple[list[list[str]], int]:
    """Split the brace initializer whose '{' is at ``start`` into top-level items."""
    depth = 0
    items: list[list[str]] = [[]]
    i = start
    while i < len(tokens):
        t = tokens[i]
        if t in "({[":
            depth += 1
            if depth > 1:
                items[-1].append(t)
        elif t in ")}]":
            depth -= 1
            if depth == 0:
                return [it for it in items if it], i + 1
            items[-1].append(t)
        elif t == "," and depth == 1:
            items.append([])
        else:
            items[-1].append(t)
        i += 1
    raise ValueError("unterminated initializer")


def _find_array(tokens: list[str], name: str) -> Optional[int]:
    """Index of the '{' opening the definition ``name[] = {`` (last definition wins)."""
    found: Optional[int] = None
    for i in range(len(tokens) - 4):
        if tokens[i] == name and tokens[i + 1] == "[" and tokens[i + 2] == "]" and \
                tokens[i + 3] == "=" and tokens[i + 4] == "{":
            found = i + 4
    return found


def _parse_match_ent(item: list[str], names: dict[str, int],
                     id_names: dict[int, str]) -> Optional[Entry]:
    if not item or item == ["{", "}"]:
        return None
    head = item[0]
    if head in ("VERBS_PCI_MATCH", "VERBS_DRIVER_ID", "VERBS_NAME_MATCH", "VERBS_MODALIAS_MATCH"):
        args, _ = split_args(item, 1)
        if head == "VERBS_PCI_MATCH":
            v, d = eval_int(args[0], names), eval_int(args[1], names)
            return Entry("pci", f"{v:#06x}:{d:#06x}")
        if head == "VERBS_DRIVER_ID":
            value = eval_int(args[0], names)
            if len(args[0]) == 1 and args[0][0].startswith("RDMA_DRIVER_"):
                id_names[value] = args[0][0]
            return Entry("driver_id", str(value))
        if head == "VERBS_NAME_MATCH":
            return Entry("name", _c_string(args[0][0]))
        return Entry("modalias", _c_string(args[0][0]))
    raise ValueError(f"unrecognised match table entry: {' '.join(item)}")


def _parse_old_pci(item: list[str], names: dict[str, int]) -> Optional[Entry]:
    """A pre-16 ``{vendor, device, ...}`` or ``{.vendor = v, .device = d}`` item."""
    if not item or item[0] != "{":
        return None
    fields, _ = _items(item, 0)
    if not fields:
        return None
    vendor: Optional[list[str]] = None
    device: Optional[list[str]] = None
    positional: list[list[str]] = []
    for f in fields:
        if len(f) >= 3 and f[0] == "." and f[2] == "=":
            if f[1] == "vendor":
                vendor = f[3:]
            elif f[1] == "device":
                device = f[3:]
        else:
            positional.append(f)
    if vendor is None and len(positional) >= 2:
        vendor, device = positional[0], positional[1]
    if vendor is None or device is None:
        return None
    try:
        v, d = eval_int(vendor, names), eval_int(device, names)
    except ExprError:
        return None
    return Entry("pci", f"{v:#06x}:{d:#06x}")


def _parse_enum(text: str, enum_name: str) -> dict[str, int]:
    m = re.search(r"enum\s+" + enum_name + r"\s*\{(.*?)\}", strip_comments(text), re.DOTALL)
    if not m:
        return {}
    values: dict[str, int] = {}
    nxt = 0
    for part in m.group(1).split(","):
        part = part.strip()
        if not part:
            continue
        name, _, expr = part.partition("=")
        name = name.strip()
        if expr.strip():
            nxt = eval_int(tokenize(expr), values)
        values[name] = nxt
        nxt += 1
    return values


def extract_release(git: Git, release: int, ref: str) -> ReleaseSnap:
    files = git.tree(ref)

    def read(path: str) -> Optional[str]:
        sha = files.get(path)
        return None if sha is None else git.blob(sha)

    driver_ids: dict[str, int] = {}
    for path in sorted(files):
        if path.startswith("kernel-headers/rdma/") and path.endswith(".h"):
            text = read(path) or ""
            if "enum rdma_driver_id" in text:
                driver_ids.update(_parse_enum(text, "rdma_driver_id"))

    cmake = read("CMakeLists.txt") or ""
    m = re.search(r'set\(IBVERBS_PABI_VERSION\s+"(\d+)"\)', cmake)
    if m:
        pabi = int(m.group(1))
    else:
        driver_h = read("libibverbs/driver.h") or ""
        m = re.search(r"IBV_DEVICE_LIBRARY_EXTENSION\s+rdmav(\d+)", driver_h)
        if not m:
            raise ValueError(f"{ref}: no PABI version found")
        pabi = int(m.group(1))

    provider_dirs = sorted({p.split("/")[1] for p in files if p.startswith("providers/")
                            and p.count("/") >= 2})
    providers: dict[str, ProviderSnap] = {}
    for pdir in provider_dirs:
        cm = read(f"providers/{pdir}/CMakeLists.txt")
        if cm is None:
            continue
        lm = re.search(r"rdma_(?:shared_)?provider\(\s*([A-Za-z0-9_]+)", cm)
        if not lm:
            continue
        snap = _extract_provider(read, files, pdir, lm.group(1), driver_ids)
        providers[snap.library] = snap
    return ReleaseSnap(release, ref, pabi, providers, driver_ids)


def _extract_provider(read: Reader, files: dict[str, str], pdir: str, library: str,
                      driver_ids: dict[str, int]) -> ProviderSnap:
    prefix = f"providers/{pdir}/"
    sources = sorted(p for p in files if p.startswith(prefix) and p.endswith(".c"))
    snap = ProviderSnap(library, None, None, None, [])
    # Modern tables: the verbs_device_ops initializer naming .match_table.
    for src in sources:
        text = read(src) or ""
        if "match_table" not in text:
            continue
        pp = Preprocessor(read, _PREDEFINED)
        pp.enums = driver_ids
        toks = pp.process(src)
        names = dict(driver_ids)
        for i in range(len(toks) - 3):
            if toks[i] == "verbs_device_ops" and toks[i + 2] == "=" and toks[i + 3] == "{":
                fields, _ = _items(toks, i + 3)
                spec: dict[str, list[str]] = {}
                for f in fields:
                    if len(f) >= 3 and f[0] == "." and f[2] == "=":
                        spec[f[1]] = f[3:]
                if "match_table" not in spec:
                    continue
                if "name" in spec:
                    snap.name = _c_string(spec["name"][0])
                if "match_min_abi_version" in spec:
                    snap.min_abi = eval_int(spec["match_min_abi_version"], names)
                if "match_max_abi_version" in spec:
                    snap.max_abi = eval_int(spec["match_max_abi_version"], names)
                table = spec["match_table"][-1]
                start = _find_array(toks, table)
                if start is None:
                    raise ValueError(f"{src}: match table {table} not found")
                items, _ = _items(toks, start)
                for it in items:
                    e = _parse_match_ent(it, names, snap.id_names)
                    if e is not None:
                        snap.entries.append(e)
                return snap
    # Before rdma-core 16: a static PCI table walked by the provider's driver_init.
    for src in sources:
        text = read(src) or ""
        if not re.search(r"\b\w*table\s*\[\s*\]\s*=", text):
            continue
        pp = Preprocessor(read, _PREDEFINED)
        toks = pp.process(src)
        for i in range(len(toks) - 4):
            if toks[i].endswith("table") and toks[i + 1] == "[" and toks[i + 2] == "]" \
                    and toks[i + 3] == "=" and toks[i + 4] == "{":
                items, _ = _items(toks, i + 4)
                found = [e for e in (_parse_old_pci(it, {}) for it in items) if e is not None]
                if found:
                    snap.entries.extend(found)
                    snap.notes.append(f"pre-16 table {toks[i]} in {src}")
                    return snap
    return snap

"""The NCCL_IB_HCA linter: the mistakes that make a value mean something else, what
NCCL then does, and the one fix that selects what was meant (:func:`lint_hca`)."""

from __future__ import annotations

import re

from ..engine.api import environ_arg, items_arg
from ..ground.errors import WrongTypeError
from ..ground.records import FrozenRecord, RecordTuple, init
from .ctext import C_SPACE, encoded, text_arg
from .gid import gid_verdict, nccl_gid_index
from .hca import NAME_MAX, cut_name, parse_hca
from .ib import IbDevice, IbPort, IbSelection, select_ib
from .versions import (
    V_MERGE_RETRY,
    V_STRTOK_PARSER,
    Version,
    max_ib_devs,
    parse_version,
)

# no typing or dataclasses at run time (rank/environment.py says why)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Optional

    from .versions import VersionArg

__all__ = ["LintWarning", "LintResult", "dma_base", "gid_warnings", "lint_hca"]

class LintWarning(RecordTuple, tuple[str, str, str, str]):
    """One problem: a short ``code``, the ``entry`` it is about, what NCCL does
    (``message``) and what to write instead (``fix``: the whole value, "" when this
    warning carries none; see :func:`lint_hca`).  A named tuple."""

    __slots__ = ()
    _fields = ("code", "entry", "message", "fix")

    def __new__(cls, code: str, entry: str, message: str, fix: str) -> LintWarning:
        return tuple.__new__(cls, (code, entry, message, fix))

    @property
    def code(self) -> str:
        return self[0]

    @property
    def entry(self) -> str:
        return self[1]

    @property
    def message(self) -> str:
        return self[2]

    @property
    def fix(self) -> str:
        return self[3]


class LintResult(FrozenRecord):
    """What :func:`lint_hca` found: the value, the selection it gives and the warnings.

    ``meant``: the ``(device, port)`` pairs of this host the value was meant to select
    (see :func:`lint_hca`), in NCCL's table order; None when that is not clear.
    ``fix``: the one value that selects exactly ``meant`` without the warnings (the
    ``fix`` of the first warning it answers), "" when there is none."""

    __slots__ = _fields = ("value", "selection", "warnings", "meant", "fix")
    value: str
    selection: IbSelection
    warnings: tuple[LintWarning, ...]
    meant: Optional[tuple[tuple[str, int], ...]]
    fix: str

    def __init__(self, value: str, selection: IbSelection, warnings: tuple[LintWarning, ...],
                 meant: Optional[tuple[tuple[str, int], ...]] = None, fix: str = "") -> None:
        init(self, value, selection, warnings, meant, fix)


#: Warnings about the devices meant, which no other spelling of the value removes.
_ABOUT_DEVICES = frozenset({"mixed-link-layer", "merge-incompatible", "table-full",
                            "gid-lookup-fails", "gid-link-local", "gid-unsuitable"})
_SEPARATORS = re.compile(f"[,{C_SPACE}]+")
_AROUND_COLON = re.compile("[ \t]*:[ \t]*")
_PORT_TEXT = re.compile(r"\+?[0-9]{1,9}")
_PORT_NUMBER = re.compile(r"[+-]?[0-9]+")


class _Meant(FrozenRecord):
    """One entry as its writer meant it (:func:`_meant_entries`)."""

    __slots__ = _fields = ("exclude", "exact", "marked_exact", "name", "port", "text",
                           "fields", "written")
    exclude: bool
    exact: bool  # a "=" applies: the list's, or one written before the entry
    marked_exact: bool  # a "=" written before the entry (not the list's)
    name: str
    port: Optional[int]  # -1: any port; None: not clear
    text: str  # the entry as it should be written: name[:port[:rail[:plane]]]
    fields: bool  # it has a rail or plane field (2.30.7 and later)
    written: str  # the entry as written (whitespace around ":" dropped)

    def __init__(self, exclude: bool, exact: bool, marked_exact: bool, name: str,
                 port: Optional[int], text: str, fields: bool, written: str) -> None:
        init(self, exclude, exact, marked_exact, name, port, text, fields, written)


def _meant_entries(body: str, negate: bool, exact: bool, version: Version) -> list[_Meant]:
    """The entries of a list (after its leading ``^``/``=``) as meant: whitespace and
    commas separate entries (spaces and tabs around ``:`` are dropped), a ``^`` or ``=`` before
    an entry is that entry's (an exclusion, an exact name), an empty port is any port
    (as since 2.30.7), and a port that is not a plain number, or a missing name, makes
    the entry's meaning unclear (``port`` None)."""
    out: list[_Meant] = []
    for tok in _SEPARATORS.split(_AROUND_COLON.sub(":", body)):
        core = tok.lstrip("^=")
        if not tok:
            continue
        mods = tok[:len(tok) - len(core)]
        fields = core.split(":")
        name = fields[0]
        port: Optional[int] = -1
        rest: list[str] = []
        if len(fields) > 1:
            if _PORT_TEXT.fullmatch(fields[1]):
                port = int(fields[1])
            elif fields[1]:
                port = None
            if version >= V_STRTOK_PARSER:
                rest = fields[2:4]
        while rest and not rest[-1]:
            rest.pop()
        text = name
        if rest:
            text += ":" + ("" if port == -1 else str(port)) + "".join(":" + r for r in rest)
        elif port is not None and port != -1:
            text += f":{port}"
        out.append(_Meant(negate or "^" in mods, exact or "=" in mods,
                          "=" in mods and not exact, name, port if name else None, text,
                          bool(rest), tok))
    return out


class _Host(FrozenRecord):
    """The ports of a host as the linter needs them: every device name, and the ports
    NCCL could use of each (ACTIVE, InfiniBand or Ethernet, the device opens)."""

    __slots__ = _fields = ("names", "usable")
    names: tuple[str, ...]
    usable: dict[str, tuple[int, ...]]

    def __init__(self, names: tuple[str, ...], usable: dict[str, tuple[int, ...]]) -> None:
        init(self, names, usable)

    @classmethod
    def of(cls, ports: Sequence[IbPort]) -> _Host:
        names = tuple(dict.fromkeys(p.device for p in ports))
        closed = {p.device for p in ports if not p.opens}
        usable: dict[str, list[int]] = {}
        for p in ports:
            if (p.active and p.link_layer in ("InfiniBand", "Ethernet")
                    and p.device not in closed):
                usable.setdefault(p.device, []).append(p.port)
        return cls(names, {d: tuple(sorted(set(v))) for d, v in usable.items()})

    def devices(self, m: _Meant) -> list[str]:
        """The devices an entry means: its name exactly when it is exact or names a
        device, else (a prefix on purpose) every device it starts."""
        base = dma_base(m.name, self.names)
        if base is not None:  # NCCL's Data Direct name: the device meant is its base
            return [base]
        if m.exact or m.name in self.names:
            return [m.name] if m.name in self.names else []
        return sorted((n for n in self.names if n.startswith(m.name)), key=_natural)

    def covered(self, m: _Meant) -> list[tuple[str, int]]:
        return [(d, p) for d in self.devices(m) for p in self.usable.get(d, ())
                if m.port == -1 or p == m.port]

    def canonical(self, chosen: set[tuple[str, int]]) -> list[str]:
        """Exact entries for ``chosen``, a set of whole devices' usable ports (what a
        value without port fields means): the name of each device it has."""
        return [d for d in sorted(self.usable, key=_natural)
                if any((d, p) in chosen for p in self.usable[d])]


class _Found(FrozenRecord):
    """What :func:`_lint` finds: warnings without fixes, NCCL's selection, the
    entries as meant (and the list's ``^`` and ``=`` as meant) and the ports meant
    (None, with the reason, when not clear)."""

    __slots__ = _fields = ("warnings", "selection", "entries", "negate", "exact", "meant",
                           "unclear")
    warnings: list[LintWarning]
    selection: IbSelection
    entries: list[_Meant]
    negate: bool
    exact: bool
    meant: Optional[set[tuple[str, int]]]
    unclear: str

    def __init__(self, warnings: list[LintWarning], selection: IbSelection,
                 entries: list[_Meant], negate: bool, exact: bool,
                 meant: Optional[set[tuple[str, int]]], unclear: str) -> None:
        init(self, warnings, selection, entries, negate, exact, meant, unclear)


def dma_base(name: str, names: Sequence[str]) -> Optional[str]:
    """The device a ``<ibdev>_dma`` name stands for (NCCL's name for a Data Direct
    interface, never a verbs name), or None.

    >>> dma_base("mlx5_0_dma", ["mlx5_0"]), dma_base("mlx5_0", ["mlx5_0"])
    ('mlx5_0', None)
    """
    if name in names or not name.endswith("_dma"):
        return None
    base = name[:-4]
    return base if base in names else None


def _natural(name: str) -> tuple[tuple[int, str], ...]:
    """mlx5_2 before mlx5_10."""
    parts, cur, digits = [], "", False
    for c in name + "\0":
        if c.isdigit() != digits or c == "\0":
            if cur:
                parts.append((int(cur), "") if digits else (-1, cur))
            cur, digits = "", c.isdigit()
        cur += c
    return tuple(parts)


def _some(names: Sequence[str], limit: int = 8) -> str:
    uniq = sorted(dict.fromkeys(names), key=_natural)
    if not uniq:
        return "it has none"
    more = f", ... ({len(uniq)} in all)" if len(uniq) > limit else ""
    return ", ".join(uniq[:limit]) + more


def _split_entries(text: str) -> list[str]:
    return [e for e in text.split(",") if e]


def _selected(sel: IbSelection) -> set[tuple[str, int]]:
    """The device ports NCCL uses: none when its IB transport does not start."""
    if sel.disabled or sel.failure:
        return set()
    return {(d.device, d.port) for d in sel.devices}


def _lint(text: str, ports: Sequence[IbPort], host: _Host, env: dict[str, str],
          version: Version) -> _Found:
    """The warnings of :func:`lint_hca` without their fixes."""
    env = {**env, "NCCL_IB_HCA": text}
    sel = select_ib(ports, env, nccl_version=version)
    filt = parse_hca(text, nccl_version=version)
    warns: list[LintWarning] = []
    body = text[1:] if filt.negate else text
    body = body[1:] if filt.exact else body
    raw_entries = _split_entries(body)
    names = list(host.names)

    if any(c in C_SPACE for c in text):
        warns.append(LintWarning(
            "whitespace", text,
            "the value contains whitespace or newlines: NCCL splits on ',' only and keeps "
            "the whitespace as part of the names, which then match no device", ""))
    for e in raw_entries:
        name = e.split(":", 1)[0]
        if name.lstrip(C_SPACE)[:1] in ("^", "="):
            warns.append(LintWarning(
                "misplaced-modifier", e,
                f"'{name}': '^' and '=' act only at the start of the whole list "
                "('^' first, then '='); here they are part of the name", ""))
        if not name and e.startswith(":"):
            warns.append(LintWarning("empty-name", e, f"'{e}' has no device name: NCCL "
                                     "drops it", ""))
        if len(encoded(name)) > NAME_MAX:
            warns.append(LintWarning("too-long", e, f"the name is cut at {NAME_MAX} "
                                     f"bytes to '{cut_name(name)}' (no device name is that "
                                     "long)", ""))
    if filt.dropped:
        warns.append(LintWarning(
            "too-many", ",".join(filt.dropped),
            f"NCCL reads only the first {filt.max_entries} entries; these are ignored", ""))
    for ent in filt.entries:
        fields = ent.text.split(":")
        if len(fields) > 1:
            ptext = fields[1]
            if version < V_STRTOK_PARSER and ptext == "":
                warns.append(LintWarning(
                    "bad-port", ent.text, "before NCCL 2.30.7 an empty port reads as port "
                    "0, which matches no port", ""))
            elif ptext and not ptext.strip(C_SPACE).lstrip("+-").isdigit():
                warns.append(LintWarning(
                    "bad-port", ent.text, f"port '{ptext}' is read by atoi as {ent.port}",
                    ""))
            elif ptext and _PORT_NUMBER.fullmatch(ptext) and int(ptext) != ent.port:
                warns.append(LintWarning(
                    "bad-port", ent.text, f"port '{ptext}' does not fit a C int: atoi "
                    f"wraps it to {ent.port}", ""))
        matching = [p for p in ports if (p.device == ent.prefix if filt.exact
                                         else p.device.startswith(ent.prefix))]
        dev_names = sorted({p.device for p in matching}, key=_natural)
        dma_of = dma_base(ent.prefix, names)
        if not matching and dma_of is not None:
            warns.append(LintWarning(
                "dma-name", ent.text, f"'{ent.prefix}' is NCCL's name for {dma_of}'s Data "
                "Direct (CX-8) interface, made after NCCL_IB_HCA is matched against the "
                f"verbs names: it matches no device; write '{dma_of}'", ""))
            continue
        if not matching:
            warns.append(LintWarning(
                "no-match", ent.text, f"'{ent.prefix}' matches no device on this host "
                f"({_some(names)})", ""))
            continue
        if ent.port != -1:
            at_port = [p for p in matching if p.port == ent.port]
            if not at_port:
                warns.append(LintWarning(
                    "no-port", ent.text, f"no device matching '{ent.prefix}' has port "
                    f"{ent.port}", ""))
            else:
                for p in at_port:
                    if p.active and p.link_layer in ("InfiniBand", "Ethernet"):
                        continue
                    why = (f"is {p.state or 'not ACTIVE'}" if not p.active
                           else f"has link layer {p.link_layer}")
                    warns.append(LintWarning(
                        "port-inactive", ent.text, f"{p.device} port {p.port} {why}: "
                        "NCCL skips it", ""))
        if not filt.exact and ent.prefix in dev_names and len(dev_names) > 1:
            others = [d for d in dev_names if d != ent.prefix]
            warns.append(LintWarning(
                "collision", ent.text, f"'{ent.prefix}' is a prefix: it also matches "
                f"{', '.join(others)}", ""))
    warns.extend(_device_warnings(text, sel, version))
    warns.extend(gid_warnings(sel, ports, env))

    # as meant, the "^" and "=" before the first name (in any order, after whitespace)
    # are the list's
    lead = text.lstrip(C_SPACE)
    mods = lead[:len(lead) - len(lead.lstrip("^=" + C_SPACE))]
    entries = _meant_entries(lead[len(mods):], "^" in mods, "=" in mods, version)
    unclear = ""
    meant: Optional[set[tuple[str, int]]] = None
    vague = next((m for m in entries if m.port is None), None)
    if vague is not None:
        unclear = f"what '{vague.written}' means is not clear"
    elif sel.failure:
        unclear = "which plane IDs are meant is not clear"
    elif not entries:
        meant = _selected(sel)  # nothing written to reinterpret: the value as NCCL reads it
    else:
        every = {(d, p) for d, ps in host.usable.items() for p in ps}
        inc = [m for m in entries if not m.exclude]
        base = {c for m in inc for c in host.covered(m)} if inc else every
        meant = base - {c for m in entries if m.exclude for c in host.covered(m)}
    return _Found(warns, sel, entries, "^" in mods, "=" in mods, meant, unclear)


def _device_warnings(text: str, sel: IbSelection, version: Version) -> list[LintWarning]:
    """What NCCL does with the devices the value selects: no device, a plane ID that
    fails its init, link layers mixed, merges that fail, a full table."""
    out: list[LintWarning] = []
    if sel.disabled:
        return out
    if sel.failure:
        code = "too-many-planes" if "more than" in sel.failure else "bad-plane"
        out.append(LintWarning(
            code, text, f"NCCL's IB transport fails to start ('{sel.failure}', "
            "ncclIbInitDevices returns ncclInvalidUsage) and NCCL falls back to sockets", ""))
        return out
    if not sel.devices:
        out.append(LintWarning(
            "selects-none", text, "NCCL would use no IB device (it prints 'NET/IB : No "
            "device found.' and falls back to sockets)", ""))
    by_link: dict[str, list[IbDevice]] = {}
    for d in sel.devices:
        by_link.setdefault(d.link, []).append(d)
    if len(by_link) > 1:
        ib, roce = by_link["IB"], by_link["RoCE"]
        d0, d1 = (ib[0], roce[0]) if ib[0].slot < roce[0].slot else (roce[0], ib[0])
        if version >= V_MERGE_RETRY:
            how = (f"it fails ('NET/IB : Remote {d1.link} device is incompatible with the "
                   f"local [{d0.slot}]{d0.device}:{d0.port}/{d0.link}', ncclInternalError)")
        else:
            how = ("this release does not check it, and the connection cannot reach the "
                   "other fabric")
        alt_ib = "=" + ",".join(f"{d.device}:{d.port}" for d in ib)
        alt_roce = "=" + ",".join(f"{d.device}:{d.port}" for d in roce)
        out.append(LintWarning(
            "mixed-link-layer", text,
            f"NCCL uses InfiniBand ports ({_some([f'{d.device}:{d.port}' for d in ib])}) "
            f"and RoCE ports ({_some([f'{d.device}:{d.port}' for d in roce])}) as one "
            "network: when a connection between hosts joins an InfiniBand port to a RoCE "
            f"port, {how}. Select one link type: '{alt_ib}' (InfiniBand) or '{alt_roce}' "
            "(RoCE); which one is meant is not known, so no fix is given", ""))
    # before 2.26.2 the first failed merge ends ncclTopoGetSystem: NCCL tries no other
    for a, b in sel.incompatible if version >= V_MERGE_RETRY else sel.incompatible[:1]:
        da, db = sel.devices[a], sel.devices[b]
        pair = f"[{a}]{da.device}:{da.port}/{da.link} and [{b}]{db.device}:{db.port}/{db.link}"
        if version >= V_MERGE_RETRY:
            what = (f"NCCL tries to merge {pair}, ports of one NIC, into one virtual "
                    "device: the merge fails ('NET/IB : Attempted to merge incompatible "
                    "devices'), and NCCL keeps them apart and restarts its merge search")
        else:
            what = (f"NCCL tries to merge {pair}, ports of one NIC, into one virtual "
                    "device: the merge fails, and with it the communicator's init "
                    "('TOPO/NET : Tried merging multiple devices together and failed', "
                    "ncclInvalidUsage)")
        out.append(LintWarning("merge-incompatible", f"{da.device}:{da.port}",
                               what + "; select ports of one link type", ""))
    if sel.unread or sel.overflow:
        cap = max_ib_devs(version)
        parts = []
        if sel.unread:
            parts.append(f"it does not read {_some(list(sel.unread))}")
        if sel.overflow:
            parts.append("the ports of the last device it reads go past the end of its "
                         "table (ncclIbDevs: memory NCCL does not own)")
        out.append(LintWarning(
            "table-full", text, f"NCCL keeps at most {cap} device ports: "
            + "; ".join(parts) + "; which of them are meant is not known, so no fix is "
            "given", ""))
    return out


def gid_warnings(sel: IbSelection, ports: Sequence[IbPort], env: Mapping[str, str]
                  ) -> list[LintWarning]:
    """The GID NCCL would use on each selected RoCE port whose table was read
    (``host_ports(gid_tables=True)``), judged by :func:`gid_verdict` as every command
    judges it (``nccl check``, ``env``, ``metrics``, ``nfd``)."""
    if sel.disabled or sel.failure:
        return []
    tables = {(p.device, p.port): p.gids for p in ports if p.gids is not None}
    out: list[LintWarning] = []
    for d in dict.fromkeys((d.device, d.port) for d in sel.devices if d.link == "RoCE"):
        table = tables.get(d)
        verdict = None if table is None else gid_verdict(nccl_gid_index(table, env))
        if verdict is not None:
            out.append(LintWarning(verdict.code, f"{d[0]}:{d[1]}", verdict.message, ""))
    return out


def _candidates(found: _Found, host: _Host, meant: set[tuple[str, int]]) -> list[str]:
    """Values that may select exactly ``meant``, the closest to the one written first:
    its entries as meant (those that mean nothing here dropped), then the same with
    exact names, then the exact list of the devices meant."""
    def form(negate: bool, exact: bool, entries: Iterable[str]) -> Optional[str]:
        listed = list(dict.fromkeys(entries))
        if not listed:
            return None  # "" is every device and "^" none: neither is a list
        return ("^" if negate else "") + ("=" if exact else "") + ",".join(listed)

    has_inc = any(not m.exclude for m in found.entries)
    group = [m for m in found.entries if m.exclude != has_inc and host.covered(m)]

    def expanded(m: _Meant) -> list[str]:
        suffix = m.text[len(m.name):]
        out = []
        for d in host.devices(m):
            ports = [p for dd, p in host.covered(m) if dd == d]
            keep = [p for p in ports if ((d, p) in meant) == has_inc]
            if keep == ports:
                out.append(d + suffix)
            elif not m.fields:
                out.extend(f"{d}:{p}" for p in keep)
        return out

    plain = form(not has_inc, found.exact, (m.text for m in group))
    exact = form(not has_inc, True, (e for m in group for e in expanded(m)))
    out = [exact, plain] if any(m.marked_exact for m in found.entries) else [plain, exact]
    if not any(m.fields for m in found.entries) and _selected(found.selection) != meant:
        # the exact list of the devices meant (without port fields a value means whole
        # devices): never more entries than ports meant, so never more than NCCL reads
        # when NCCL can select them all (the list of the devices not meant, negated,
        # would select the same, so it never decides)
        out.append(form(False, True, host.canonical(meant)))
    return [c for c in out if c is not None]


def _find_fix(text: str, found: _Found, ports: Sequence[IbPort], host: _Host,
              env: dict[str, str], version: Version) -> tuple[str, str]:
    """The fix (or "") and, without one, why."""
    if found.meant is None:
        return "", found.unclear
    if not found.meant:
        return "", "it means no device of this host that NCCL can use"
    check_env = {k: v for k, v in env.items() if k != "NCCL_IB_DISABLE"}
    for cand in _candidates(found, host, found.meant):
        if cand == text or len(_split_entries(cand)) > max_ib_devs(version):
            continue
        again = _lint(cand, ports, host, check_env, version)
        if (_selected(again.selection) == found.meant
                and all(w.code in _ABOUT_DEVICES for w in again.warnings)):
            return cand, ""
    if _selected(found.selection) == found.meant:
        return "", "NCCL already uses what was meant on this host"
    return "", "no value selects exactly that"


def lint_hca(value: Optional[str], ports: Sequence[IbPort],
             env: Optional[Mapping[str, str]] = None, *,
             nccl_version: VersionArg = None, where: str = "this host") -> LintResult:
    """Check an NCCL_IB_HCA value against a host's ports (:func:`host_ports`).

    ``where``: how the messages name the host the ports are of (``"this host"``;
    ``sysverbs nccl check`` says ``"fixture NAME"`` or ``"the tree DIR"``).

    Warnings about how the value is written (``code``): ``whitespace`` (spaces or
    newlines are part of the name: NCCL splits on commas only), ``misplaced-modifier``
    (a ``^`` or ``=`` that is not at the start of the list is part of a name),
    ``empty-name`` (``:1`` is dropped), ``too-many`` (more than 32 entries),
    ``too-long`` (a name over 63 bytes is cut), ``bad-port`` (a port that is not a
    number, one that does not fit a C ``int`` and wraps, or an empty port before
    2.30.7), ``no-port``/``port-inactive`` (the port does not exist, or is not ACTIVE
    or not IB/Ethernet), ``collision`` (a name that also matches longer names: use
    ``=``), ``no-match`` (an entry that matches no device), ``dma-name`` (NCCL's
    ``<ibdev>_dma`` name of a Data Direct interface, which NCCL_IB_HCA never matches).
    About what NCCL then does: ``selects-none`` (no IB device: sockets),
    ``bad-plane``/``too-many-planes`` (since 2.30.7 a plane ID NCCL cannot use: its IB
    transport fails to start), ``mixed-link-layer`` (InfiniBand and RoCE ports in one
    selection: a connection between them fails), ``merge-incompatible`` (ports of one
    NIC with different link layers: the merge fails; before 2.26.2 so does the init),
    ``table-full`` (more device ports than NCCL's table holds); for a RoCE port whose GID
    table was read (``host_ports(gid_tables=True)``), the GID NCCL would use, judged by
    :func:`~sysverbs.rank.gid.gid_verdict`: ``gid-lookup-fails``, ``gid-link-local``,
    ``gid-unsuitable``.

    ``meant`` is what the value was meant to select on this host: each entry read as
    its writer meant it (whitespace and commas separate entries, a ``^`` or ``=``
    before an entry is that entry's, a name that is a device's name means that device
    and no longer one, a name that is none is a prefix, an empty port is any port),
    the included ports (all, when only exclusions are written) less the excluded, among
    the ports NCCL can use.  It is None when an entry's meaning is not clear (no name,
    a port that is not a number, a plane ID NCCL refuses).  The one ``fix`` is a value
    that selects exactly ``meant`` (NCCL's matcher, :func:`select_ib`) and has none of
    the warnings about writing; it is the ``fix`` of the first such warning, whose
    message says what was meant (or, without a fix, why there is none).  The warnings
    about the devices themselves (mixed link layers, merges, a full table, GIDs) carry no
    fix: which devices to drop is the user's choice.

    >>> ports = [IbPort(f"mlx5_{i}", 1, True, "InfiniBand", "") for i in (0, 1, 10, 11)]
    >>> [w.code for w in lint_hca("mlx5_1,mlx5_7", ports).warnings]
    ['collision', 'no-match']
    >>> lint_hca("mlx5_1,mlx5_7", ports).warnings[0].fix
    '=mlx5_1'
    >>> r = lint_hca("mlx5_8,mlx5_9", ports)
    >>> r.fix, r.meant, r.warnings[0].message.endswith("(no fix: it means no device of "
    ...                                                 "this host that NCCL can use)")
    ('', (), True)
    """
    version = parse_version(nccl_version)
    text = "" if value is None else text_arg("NCCL_IB_HCA", value)
    env2 = environ_arg(env)
    ports = items_arg(ports, "ports")
    if not all(isinstance(p, IbPort) for p in ports):
        raise WrongTypeError("ports must be IbPort objects (see host_ports())")
    host = _Host.of(ports)
    found = _lint(text, ports, host, env2, version)
    warns = found.warnings
    first = next((i for i, w in enumerate(warns) if w.code not in _ABOUT_DEVICES), None)
    fix = ""
    if first is not None:
        fix, why = _find_fix(text, found, ports, host, env2, version)
        w = warns[first]
        if fix:
            assert found.meant is not None
            shown = _some([f"{d}:{p}" for d, p in found.meant])
            warns[first] = w._replace(
                message=f"{w.message} (meant: {shown}; the fix selects exactly that)",
                fix=fix)
        else:
            warns[first] = w._replace(message=f"{w.message} (no fix: {why})")
    meant: Optional[tuple[tuple[str, int], ...]] = None
    if found.meant is not None:
        order = {(d.device, d.port): i for i, d in enumerate(
            select_ib(ports, {}, nccl_version=version).devices)}
        meant = tuple(sorted(found.meant, key=lambda c: (order.get(c, len(order)),
                                                          _natural(c[0]), c[1])))
    if where != "this host":
        if not isinstance(where, str):
            raise WrongTypeError(f"where must be a str, not {type(where).__name__}")
        warns = [w._replace(message=w.message.replace("this host", where)) for w in warns]
    return LintResult(text, found.selection, tuple(warns), meant, fix)

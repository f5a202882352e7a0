"""The environment for one rank: NCCL_IB_HCA, UCX_NET_DEVICES, NCCL_SOCKET_IFNAME and
NCCL_IB_GID_INDEX for the NICs it should use, each value with its reason (docs/environment.md).

* ``NCCL_IB_HCA`` is ``=dev:port,...``: NCCL reads one leading ``^`` then one
  leading ``=`` and applies them to the whole list (NVIDIA/nccl
  ``src/transport/net_ib/init.cc``: ``searchNot``/``searchExact`` before
  ``parseStringList``), so ``=mlx5_1:1`` cannot also select ``mlx5_10``.
* ``UCX_NET_DEVICES`` is UCX's exact resource names, ``dev:port,...`` (openucx/ucx
  ``src/ucp/core/ucp_context.c``: ``ucp_is_resource_in_device_list`` compares each
  entry with ``strcmp``; ``all`` selects everything; UCX 1.21 and later also accept
  the bare device name, older ones, such as Debian 12's 1.13, do not).
* ``NCCL_SOCKET_IFNAME`` is ``=netdev,...`` when a netdev of a chosen NIC is running and
  carries an address NCCL's bootstrap can use (``ncclOsFindInterfaces`` in
  ``src/os/linux.cc``: IPv4 or IPv6, not loopback, interface IFF_RUNNING); else it is
  left alone, with a note.  Addresses come from the kernel (rtnetlink
  ``RTM_GETADDR``): under another sysfs root they cannot be known.
* ``NCCL_IB_GID_INDEX`` (RoCE only; NCCL takes one value for every device) is the
  index NCCL's own scan picks (:mod:`sysverbs.rank.gid`) when it is the same
  suitable index on every chosen RoCE port; when the indexes differ it is left
  alone with a warning (NCCL then scans each device itself).  When NCCL's scan
  would land on an unusable GID because the ports have only IPv6 GIDs (bnxt_re),
  ``NCCL_IB_ADDR_FAMILY=AF_INET6`` is set.

Other frameworks' variables (NVSHMEM, UCCL, vLLM): :mod:`sysverbs.rank.frameworks`.

>>> import tempfile
>>> from sysverbs.testing import HostBuilder
>>> from sysverbs.rank.environment import rank_environment
>>> b = HostBuilder().rxe(name="rxe0", netdev="v0", ib_attrs={
...     "ports/1/gids/1": "0000:0000:0000:0000:0000:ffff:c0a8:0701",
...     "ports/1/gid_attrs/types/1": "RoCE v2", "ports/1/gid_attrs/ndevs/1": "v0"})
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = b.materialize(tmp)
...     env = rank_environment(sysfs_path=host.sysfs, dev_dir=host.dev, environ={})
>>> env.exports()
{'NCCL_IB_HCA': '=rxe0:1', 'UCX_NET_DEVICES': 'rxe0:1', 'NCCL_IB_GID_INDEX': '1'}
>>> print(env.render("dotenv").splitlines()[-1])
NCCL_IB_GID_INDEX=1
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..engine.api import environ_arg, index_arg, int_arg, items_arg
from ..ground.errors import NotFoundError, UsageError, WrongTypeError
from ..ground.records import FrozenRecord, init
from .gid import (
    AF_INET6,
    GidChoice,
    GidEntry,
    GidTable,
    gid_family,
    gid_text,
    gid_verdict,
    nccl_gid_index,
    read_gid_table,
    valid_gid,
)
from .rtnetlink import interface_addresses

# typing, dataclasses and json are not imported at run time: ``sysverbs env`` and
# ``run`` pay for every module they load (benchmarks/bench_run.py; the records are
# FrozenRecords, tests/test_env_speed.py checks what the command loads)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any, Optional, Union

    from ..placement import Topology
    from .lint import LintWarning

    NicArg = Union[str, Sequence[Any]]

__all__ = [
    "Nic",
    "Netdev",
    "Variable",
    "RankEnvironment",
    "rank_environment",
    "predict",
    "read_nics",
    "keep_user_set",
    "interface_addresses",
    "FORMATS",
    # NCCL's GID index choice, as a pure function over a port's GID table
    # (docs/environment.md, "The GID index, as NCCL picks it").
    "GidEntry",
    "GidTable",
    "GidChoice",
    "nccl_gid_index",
    "read_gid_table",
]

FORMATS = ("sh", "dotenv", "json")
SCHEMA = "sysverbs.env/1"
#: NCCL's MAX_IB_DEVS (entries parseStringList reads) and UCX's 64-entry bitmap.
NCCL_MAX_ENTRIES = 32
UCX_MAX_ENTRIES = 64


class Netdev(FrozenRecord):
    """A network interface of a chosen NIC: ``running`` as IFF_RUNNING (None:
    unknown), ``addresses`` its IP addresses (None: unknown, e.g. another sysfs root)."""

    __slots__ = _fields = ("name", "running", "addresses")
    name: str
    running: Optional[bool]
    addresses: Optional[tuple[str, ...]]

    def __init__(self, name: str, running: Optional[bool] = None,
                 addresses: Optional[tuple[str, ...]] = None) -> None:
        init(self, name, running, addresses)


class Nic(FrozenRecord):
    """One chosen NIC port, with what the environment needs to know about it."""

    __slots__ = _fields = ("device", "port", "link_layer", "state", "netdevs", "gids", "note")
    device: str
    port: int
    link_layer: Optional[str]
    state: Optional[str]
    netdevs: tuple[Netdev, ...]
    gids: Optional[GidTable]
    note: Optional[str]

    def __init__(self, device: str, port: int, link_layer: Optional[str],
                 state: Optional[str] = None, netdevs: tuple[Netdev, ...] = (),
                 gids: Optional[GidTable] = None, note: Optional[str] = None) -> None:
        init(self, device, port, link_layer, state, netdevs, gids, note)


class Variable(FrozenRecord):
    """One variable: ``value`` None means left alone (``reason`` says why)."""

    __slots__ = _fields = ("name", "value", "reason")
    name: str
    value: Optional[str]
    reason: str

    def __init__(self, name: str, value: Optional[str], reason: str) -> None:
        init(self, name, value, reason)


class RankEnvironment(FrozenRecord):
    """What :func:`rank_environment` answers: the NICs, the variables (each with its
    reason), warnings, notes, NCCL's GID index choice of each RoCE port, and ``gpu``:
    the index of the GPU placement put the rank on (None when the NICs were named or
    the host has no GPU)."""

    __slots__ = _fields = ("nics", "variables", "warnings", "notes", "gid_choices", "gpu")
    nics: tuple[Nic, ...]
    variables: tuple[Variable, ...]
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    gid_choices: tuple[GidChoice, ...]
    gpu: Optional[int]

    def __init__(self, nics: tuple[Nic, ...], variables: tuple[Variable, ...],
                 warnings: tuple[str, ...] = (), notes: tuple[str, ...] = (),
                 gid_choices: tuple[GidChoice, ...] = (), gpu: Optional[int] = None) -> None:
        init(self, nics, variables, warnings, notes, gid_choices, gpu)

    def exports(self) -> dict[str, str]:
        """The variables to set, in order."""
        return {v.name: v.value for v in self.variables if v.value is not None}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "nics": [{"device": n.device, "port": n.port, "link_layer": n.link_layer,
                      "state": n.state, "netdevs": [d.name for d in n.netdevs]}
                     for n in self.nics],
            "variables": [{"name": v.name, "value": v.value, "reason": v.reason}
                          for v in self.variables],
            "gid_index": [{"device": c.device, "port": c.port, "index": c.index,
                           "gid": gid_text(c.gid), "rule": c.rule, "suitable": c.suitable,
                           "error": c.error, "steps": [str(s) for s in c.steps]}
                          for c in self.gid_choices],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }

    def render(self, fmt: str = "sh") -> str:
        """``sh`` (``export`` lines), ``dotenv`` (``NAME=value``) or ``json``; reasons,
        warnings and notes as ``#`` comments."""
        if fmt == "json":
            import json

            return json.dumps(self.to_json(), indent=2) + "\n"
        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r} (have: {', '.join(FORMATS)})")
        nics = ", ".join(f"{n.device}:{n.port}" for n in self.nics) or "none"
        lines = [f"# sysverbs env for {nics}"]
        lines += [f"# warning: {w}" for w in self.warnings]
        lines += [f"# note: {n}" for n in self.notes]
        for v in self.variables:
            if v.value is None:
                lines.append(f"# {v.name} left alone: {v.reason}")
                continue
            lines.append(f"# {v.name}: {v.reason}")
            if fmt == "sh":
                lines.append(f"export {v.name}={_sh_quote(v.value)}")
            else:
                lines.append(f"{v.name}={_dotenv_quote(v.value)}")
        return "\n".join(lines) + "\n"


_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=:,.-+/@%")


def _sh_quote(value: str) -> str:
    if value and value[0] != "=" and all(c in _SAFE for c in value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"


def _dotenv_quote(value: str) -> str:
    if value and all(c in _SAFE for c in value):
        return value
    import json

    return json.dumps(value)


# ----------------------------------------------------------------------------- the rules


def _socket_ifname(nics: Sequence[Nic], environ: Mapping[str, str]) -> Variable:
    name = "NCCL_SOCKET_IFNAME"
    family = environ.get("NCCL_SOCKET_FAMILY")
    want = {"AF_INET": 4, "AF_INET6": 6}.get(family or "")
    chosen: list[str] = []
    why: list[str] = []
    unknown = False
    for nic in nics:
        for nd in nic.netdevs:
            if nd.addresses is None:
                unknown = True
                continue
            if nd.running is False:
                why.append(f"{nd.name} is not running")
                continue
            usable = [a for a in nd.addresses if _bootstrap_address(a, want)]
            if not usable:
                why.append(f"{nd.name} has no usable address"
                           + (f" ({', '.join(nd.addresses)})" if nd.addresses else ""))
                continue
            if nd.name not in chosen and "," not in nd.name:
                chosen.append(nd.name)
                why.append(f"{nd.name} ({nic.device}:{nic.port}) has {', '.join(usable)}")
    if chosen:
        return Variable(name, "=" + ",".join(chosen),
                        "the netdevs of the chosen NICs that carry an address; '=' makes "
                        "NCCL match the names exactly: " + "; ".join(why))
    if unknown and not why:
        return Variable(name, None, "the addresses of the netdevs are unknown (another "
                        "sysfs root, or no rtnetlink): NCCL picks its bootstrap interface")
    if not any(n.netdevs for n in nics):
        return Variable(name, None, "the chosen NICs have no netdev")
    return Variable(name, None, "no netdev of the chosen NICs carries an address NCCL can "
                    "bootstrap over (" + "; ".join(why) + "); NCCL picks its own interface")


def _bootstrap_address(text: str, want: Optional[int]) -> bool:
    import ipaddress

    try:
        addr = ipaddress.ip_address(text)  # a zone index ("%eth0") parses since Python 3.9
    except ValueError:
        return False
    if want is not None and addr.version != want:
        return False
    return not (addr.is_loopback or addr.is_link_local)


def _gid_variables(nics: Sequence[Nic], environ: Mapping[str, str]
                   ) -> tuple[list[Variable], list[str], list[GidChoice]]:
    # the RoCE ports NCCL uses (ACTIVE Ethernet ports; a state not given counts as
    # ACTIVE): those nccl check judges too
    roce = [n for n in nics if n.link_layer == "Ethernet" and n.state in (None, "ACTIVE")
            and n.gids is not None]
    if not roce:
        why = ("no chosen NIC is an ACTIVE RoCE port: on InfiniBand ports NCCL uses GID 0 "
               "or the routable "
               "FLID GID (NCCL_IB_ROUTABLE_FLID_GID_INDEX) and ignores NCCL_IB_GID_INDEX")
        return [Variable("NCCL_IB_GID_INDEX", None, why)], [], []
    base = {k: v for k, v in environ.items() if k != "NCCL_IB_GID_INDEX"}
    warnings: list[str] = []
    out: list[Variable] = []
    choices = [nccl_gid_index(n.gids, base) for n in roce if n.gids is not None]
    if (not all(c.suitable for c in choices) and not base.get("NCCL_IB_ADDR_FAMILY")
            and any(_has_v2(n.gids, AF_INET6) for n in roce if n.gids is not None)):
        v6 = dict(base, NCCL_IB_ADDR_FAMILY=AF_INET6)
        choices6 = [nccl_gid_index(n.gids, v6) for n in roce if n.gids is not None]
        if all(c.suitable for c in choices6):
            bad = [f"{c.device}:{c.port}" for c in choices if not c.suitable]
            out.append(Variable("NCCL_IB_ADDR_FAMILY", AF_INET6,
                                f"{', '.join(bad)} have no usable IPv4 RoCE v2 GID "
                                "(NCCL's default family is AF_INET) but every chosen RoCE "
                                "port has an IPv6 one"))
            choices = choices6
    for c in choices:
        verdict = gid_verdict(c)
        if verdict is not None:
            warnings.append(verdict.message)
    indexes = {c.index for c in choices}
    detail = "; ".join(f"{c.device}:{c.port} -> {c.index} ({gid_text(c.gid)})" for c in choices)
    user = environ.get("NCCL_IB_GID_INDEX")
    if all(c.suitable for c in choices) and len(indexes) == 1:
        index = indexes.pop()
        reason = (f"the index NCCL's own scan picks on every chosen RoCE port: {detail}")
        if user and user != str(index):
            reason += f" (replaces NCCL_IB_GID_INDEX={user} from the environment)"
        out.append(Variable("NCCL_IB_GID_INDEX", str(index), reason))
    elif len(indexes) > 1:
        warnings.append("the chosen RoCE ports need different GID indexes and NCCL takes one "
                        f"NCCL_IB_GID_INDEX for all devices: {detail}")
        out.append(Variable("NCCL_IB_GID_INDEX", None,
                            "the ports need different indexes; unset, NCCL scans each device "
                            "itself" + (f" (unset NCCL_IB_GID_INDEX={user} too)" if user
                                        else "")))
    else:
        out.append(Variable("NCCL_IB_GID_INDEX", None,
                            f"no suitable GID to pin: {detail}"))
    return out, warnings, choices


def _has_v2(table: GidTable, family: str) -> bool:
    from .gid import roce_version

    return any(valid_gid(e.address) and gid_family(e.address) == family
               and roce_version(e.type_text)[0] == 2 for e in table.entries)


def predict(nics: Sequence[Nic], environ: Mapping[str, str]) -> RankEnvironment:
    """The environment for these NICs (pure: everything is in ``nics``)."""
    nics = items_arg(nics, "nics")
    if not all(isinstance(n, Nic) for n in nics):
        raise WrongTypeError("nics must be a sequence of Nic (see read_nics())")
    environ = environ_arg(environ, "environ")
    warnings: list[str] = []
    notes: list[str] = []
    for n in nics:
        if n.note:
            notes.append(f"{n.device}:{n.port}: {n.note}")
        if n.state is not None and n.state != "ACTIVE":
            warnings.append(f"{n.device}:{n.port} is {n.state}, not ACTIVE: NCCL skips it")
    variables: list[Variable] = []
    entries = [f"{n.device}:{n.port}" for n in nics
               if "," not in n.device and ":" not in n.device]
    for n in nics:
        if "," in n.device or ":" in n.device:
            warnings.append(f"{n.device!r} cannot be written in a device list "
                            "(',' and ':' separate entries and fields): left out")
    if not entries:
        why = "no NIC chosen"
        variables += [Variable("NCCL_IB_HCA", None, why), Variable("UCX_NET_DEVICES", None, why)]
    else:
        if len(entries) > NCCL_MAX_ENTRIES:
            warnings.append(f"{len(entries)} NICs: NCCL reads only the first "
                            f"{NCCL_MAX_ENTRIES} entries of NCCL_IB_HCA")
        if any(len(n.device) > 63 for n in nics):
            warnings.append("a device name is longer than 63 characters: NCCL cuts it")
        variables.append(Variable(
            "NCCL_IB_HCA", "=" + ",".join(entries),
            "exact device names with ports: NCCL applies the leading '=' to the whole list, "
            "so no name can match a longer one (mlx5_1 would match mlx5_10..19)"))
        if len(entries) > UCX_MAX_ENTRIES:
            warnings.append(f"{len(entries)} NICs: UCX accepts at most {UCX_MAX_ENTRIES} "
                            "entries in UCX_NET_DEVICES")
        variables.append(Variable(
            "UCX_NET_DEVICES", ",".join(entries),
            "UCX compares each entry with its resource names ('dev:port') exactly; it has "
            "no prefixes, '=' or '^' in this variable"))
    variables.append(_socket_ifname(nics, environ))
    gid_vars, gid_warn, choices = _gid_variables(nics, environ)
    variables += gid_vars
    warnings += gid_warn
    return RankEnvironment(tuple(nics), tuple(variables), tuple(warnings), tuple(notes),
                           tuple(choices))


# ----------------------------------------------------------------------------- reading


def _split(arg: NicArg) -> tuple[str, Optional[int]]:
    if isinstance(arg, str):
        name, sep, port = arg.rpartition(":")
        if sep and port.isdigit() and name:
            return name, int(port)
        return arg, None
    if (isinstance(arg, (bytes, bytearray)) or not isinstance(arg, Sequence) or not arg
            or not isinstance(arg[0], str)):
        raise WrongTypeError(f"a NIC is a name or a (device, port) tuple, not {arg!r}")
    if len(arg) < 2 or arg[1] is None:
        return arg[0], None
    return arg[0], int_arg(arg[1], "a NIC's port")


def _net_state(root: bytes, name: str) -> Optional[bool]:
    """IFF_RUNNING as the kernel computes it (``dev_get_flags``: IFF_UP and operstate up
    or unknown): the ``operstate`` file alone says it, since it reads ``down`` whenever
    the interface is not up (net/core/net-sysfs.c, ``operstate_show``)."""
    from ..devices.attributes import read_text

    oper = read_text(root + b"/class/net/" + os.fsencode(name) + b"/operstate", 32)
    return None if oper is None else oper in ("up", "unknown")


def read_nics(nics: Optional[Iterable[NicArg]] = None, *, sysfs_path: Optional[str] = None,
              dev_dir: Optional[str] = None, addresses: Optional[Mapping[str, Sequence[str]]]
              = None, list_options: Optional[Mapping[str, Any]] = None) -> list[Nic]:
    """The chosen NICs with their state, GID tables and netdevs, from sysfs.

    ``nics``: names (``"mlx5_0"``, ``"mlx5_0:1"``) or tuples whose first two items are
    (device, port) — placement's assignments are such tuples; a device without a
    port means its ACTIVE ports (else port 1).  None: every ACTIVE InfiniBand or
    Ethernet port of every device ``get_device_list`` gives (``list_options`` are
    its options).  ``addresses``: netdev -> IP addresses; default: the kernel's,
    through rtnetlink, on the live host (a sysfs root of ``/sys``), else unknown.
    A named device or port that the tree does not have is a
    :class:`~sysverbs.ground.errors.NotFoundError` (a ``LookupError``); a NIC that
    is neither a name nor a tuple a :class:`~sysverbs.ground.errors.WrongTypeError`.
    """
    from ..devices.attributes import numbered_entries, read_text, resolve_ibdev
    from ..devices.location import LocationScan, device_location, ipoib_netdevs
    from ..ground.hostroot import HostRoot

    if nics is not None:
        nics = items_arg(nics, "nics")
    where = HostRoot.resolve(sysfs_path, dev_dir)
    live, root = where.live, where.sysfs
    if addresses is None and live:
        addresses = interface_addresses()
    wanted: list[tuple[str, Optional[int], bool]] = []
    if nics is None:
        from ..engine import api

        opts = dict(list_options or {})
        opts.setdefault("sysfs_path", sysfs_path)
        opts.setdefault("dev_dir", dev_dir)
        if sysfs_path is not None:
            opts.setdefault("source", "sysfs")
        devices = api.get_device_list(**opts)
        try:
            wanted = [(d.name, None, True) for d in devices]
        finally:
            api.free_device_list(devices)
    else:
        wanted = [(*_split(a), False) for a in nics]
    out: list[Nic] = []
    scan = LocationScan()  # the char-device directories read once, not once per NIC
    for name, port, auto in wanted:
        ibdev, _ = resolve_ibdev(name, root)
        if not os.path.isdir(ibdev):
            raise NotFoundError(
                f"no RDMA device {name!r} in {os.fsdecode(root)}/class/infiniband")
        ports = [port] if port is not None else numbered_entries(ibdev + b"/ports")
        states = {p: _state(read_text(ibdev + b"/ports/%d/state" % p, 64)) for p in ports}
        links = {p: read_text(ibdev + b"/ports/%d/link_layer" % p, 64) for p in ports}
        if port is None:
            active = [p for p in ports if states[p] == "ACTIVE"
                      and links[p] in ("InfiniBand", "Ethernet")]
            if auto:
                ports = active
            else:
                ports = active or ports[:1]
        if not ports:
            continue
        topo = None
        parent = read_text(ibdev + b"/parent", 64)
        for p in ports:
            if not os.path.isdir(ibdev + b"/ports/%d" % p):
                raise NotFoundError(f"{name} has no port {p}")
            gids = read_gid_table(name, p, sysfs_path=os.fsdecode(root), link_layer=links[p])
            # RoCE: the GIDs' netdevs and a software device's parent, as topology finds
            # them; InfiniBand: the IPoIB netdevs of the port GUID (GID 0's interface id,
            # as device_location() takes it, without reading the rest of the device);
            # otherwise (no GIDs yet) the topology's answer
            names = [] if links[p] != "Ethernet" else list(dict.fromkeys(
                [e.ndev for e in gids.entries if e.ndev] + ([parent] if parent else [])))
            if links[p] == "InfiniBand":
                gid0 = int(gids.gid(0))  # zero: an unused or unreadable entry, no GUID
                names = list(ipoib_netdevs(ibdev, gid0 & ((1 << 64) - 1) if gid0 else None))
            elif not names:
                if topo is None:
                    topo = device_location(name, sysfs_path=root, dev_dir=dev_dir, scan=scan)
                names = list(topo.port_netdevs(p))
            netdevs = tuple(
                Netdev(nd, _net_state(root, nd) if live or addresses is not None else None,
                       None if addresses is None else tuple(addresses.get(nd, ())))
                for nd in names)
            out.append(Nic(name, p, links[p], states[p], netdevs, gids))
    return out


def _state(text: Optional[str]) -> str:
    """A port's state as NCCL's device table reads it (``host_ports``: the kernel's
    ``%d: %s``, 4 is ACTIVE); ``unknown`` when unreadable or malformed."""
    m = re.fullmatch(r"(\d{1,10}): (\S.*)", text or "")
    if m is None:
        return "unknown"
    return "ACTIVE" if int(m.group(1)) == 4 else m.group(2)


def _placed(local_rank: Optional[int], env: Mapping[str, str], sysfs_path: Optional[str],
            proc_path: Optional[str], dev_dir: Optional[str], host: Optional[Topology] = None
            ) -> tuple[Optional[list[tuple[str, int]]], str, Optional[int]]:
    """Placement's (device, port) list for the rank, its reason and the rank's GPU (its
    index); None when the host has no GPU, or placement chose no NIC for the rank's GPU,
    with the reason.  On a host with GPUs, a rank that has no GPU is a
    :class:`~sysverbs.ground.errors.NotFoundError` and no rank at all (with several GPUs)
    a :class:`~sysverbs.ground.errors.UsageError`."""
    from ..placement import assign_rank, read_host
    from ..placement import local_rank as rank_from

    if host is None:
        host = read_host(sysfs_path=sysfs_path, proc_path=proc_path, dev_dir=dev_dir)
    if not host.gpus:
        return None, "no GPU on this host, so no placement", None
    if local_rank is None and rank_from(env)[0] is None:
        if len(host.gpus) > 1:
            raise UsageError(
                f"this host has {len(host.gpus)} GPUs and no local rank "
                f"({rank_from(env)[1]}): say which rank this is (--local-rank N, or "
                "LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID...) or name the NICs")
        local_rank = 0
    chosen = assign_rank(host, local_rank, env)  # NotFoundError: the rank has no GPU
    gpu = None if chosen.gpu is None else chosen.gpu.index
    if not chosen.nics:
        return None, f"placement chose no NIC ({chosen.reason})", gpu
    return [(n.device, n.port) for n in chosen.nics], chosen.reason, gpu


def rank_environment(nics: Optional[Iterable[NicArg]] = None, *, local_rank: Optional[int]
                     = None, environ: Optional[Mapping[str, str]] = None,
                     sysfs_path: Optional[str] = None, dev_dir: Optional[str] = None,
                     proc_path: Optional[str] = None, conf_root: Optional[str] = None,
                     addresses: Optional[Mapping[str, Sequence[str]]] = None,
                     list_options: Optional[Mapping[str, Any]] = None,
                     keep_set: bool = False, where: str = "this host",
                     host: Optional[Topology] = None) -> RankEnvironment:
    """The environment for one rank.

    ``nics``: the NICs chosen for the rank (see :func:`read_nics`).  None: placement
    chooses (:func:`sysverbs.placement.assign_rank` for ``local_rank``, default from
    LOCAL_RANK/OMPI_COMM_WORLD_LOCAL_RANK/SLURM_LOCALID, and the visible GPUs of
    ``environ``; with one GPU and no rank, that GPU); on a host without GPUs, or when
    placement chooses no NIC for the rank's GPU, every usable ACTIVE port — and then
    ``local_rank`` N takes the N-th of them (modulo their number).  On a host with GPUs,
    a rank without a GPU (``local_rank=8`` with 8 GPUs) is a
    :class:`~sysverbs.ground.errors.NotFoundError`, and no rank with several GPUs a
    :class:`~sysverbs.ground.errors.UsageError`.  ``environ``: the environment in force (default
    ``os.environ``), with NCCL's config files applied as NCCL applies them
    (:func:`sysverbs.rank.nccl.nccl_environment`; read on the live host, or under
    ``conf_root`` when given).  It decides NCCL's GID scan (NCCL_IB_ADDR_FAMILY,
    NCCL_IB_ADDR_RANGE, NCCL_IB_ROCE_VERSION_NUM).  ``proc_path`` stands for ``/proc``
    (GPU UUIDs for CUDA_VISIBLE_DEVICES).  ``keep_set``: a variable ``environ`` already
    sets is kept, as ``sysverbs run`` keeps it: left alone here, with a note when its
    value differs, and NCCL_IB_HCA is checked as it is in force (``sysverbs env`` sets
    it).  ``where``: how the check's messages name the host (``sysverbs env`` says
    ``fixture NAME`` or ``the tree DIR``, as ``sysverbs nccl check`` does).  ``host``:
    the placement host of that tree already read (the command's host model), instead of
    reading it again.
    """
    env = environ_arg(environ, "environ")
    user = dict(env) if keep_set else {}
    if local_rank is not None:
        index_arg(local_rank, "local_rank")
    extra: list[str] = []
    if conf_root is not None or sysfs_path is None:
        from .nccl import nccl_environment

        env, conf_sources = nccl_environment(env, root=conf_root)
        extra.extend(f"{name} comes from NCCL's config file {path}"
                     for name, path in sorted(conf_sources.items()))
    round_robin = nics is None
    gpu = None
    if nics is None:
        placed, why, gpu = _placed(local_rank, env, sysfs_path, proc_path, dev_dir, host)
        if placed is not None:
            nics, round_robin = placed, False
            extra.append(f"placement: {why}")
        else:
            extra.append(f"{why}: every ACTIVE InfiniBand/Ethernet port of the usable "
                         "devices" + (f", local rank {local_rank} takes one of them "
                                      "round-robin" if local_rank is not None else ""))
    chosen = read_nics(nics, sysfs_path=sysfs_path, dev_dir=dev_dir, addresses=addresses,
                       list_options=list_options)
    if round_robin and chosen:
        chosen, left_out = _one_link_layer(chosen)
        extra.extend(left_out)
    if round_robin and local_rank is not None and chosen:
        chosen = [chosen[local_rank % len(chosen)]]
    result = predict(chosen, env)
    result = keep_user_set(result, user)
    if sysfs_path is not None and addresses is None:
        extra.append("another sysfs root: the netdevs' addresses are unknown")
    checked, more_notes = _nccl_check(result, env, sysfs_path, dev_dir, list_options, where)
    # nccl check judges the GIDs with the same verdict: each warning is said once
    said = {w.message for w in checked}
    mine = tuple(w for w in result.warnings if w not in said)
    return RankEnvironment(result.nics, result.variables,
                           mine + tuple(_hca_warning(result, env, w) for w in checked),
                           tuple(extra) + result.notes + more_notes, result.gid_choices, gpu)


def _hca_warning(result: RankEnvironment, env: Mapping[str, str], w: LintWarning) -> str:
    """A warning of ``nccl check`` on the NCCL_IB_HCA in force, as ``env`` says it."""
    value = result.exports().get("NCCL_IB_HCA", env.get("NCCL_IB_HCA"))
    return f"NCCL_IB_HCA={value!r}: {w.message} [nccl check: {w.code}]"


def keep_user_set(result: RankEnvironment, environ: Mapping[str, str]) -> RankEnvironment:
    """``result`` with each variable ``environ`` already sets left alone, as ``sysverbs
    run`` keeps it (pure): its reason says so, and a note when the value differs from
    the one that would be written."""
    variables: list[Variable] = []
    notes: list[str] = []
    for v in result.variables:
        have = environ.get(v.name)
        if v.value is None or have is None:
            variables.append(v)
            continue
        why = f"already set to {have!r} in the environment: kept, as sysverbs run keeps it"
        if have != v.value:
            why += f" (would write {v.value!r}: {v.reason})"
            notes.append(f"{v.name} is already set to {have!r}: kept (sysverbs env would "
                         f"write {v.value!r}; unset it to take that)")
        variables.append(Variable(v.name, None, why))
    return result._replace(variables=tuple(variables), notes=result.notes + tuple(notes))


def _one_link_layer(nics: list[Nic]) -> tuple[list[Nic], list[str]]:
    """Every usable port of a host, of one link layer: NCCL cannot join InfiniBand and
    RoCE ports in one communicator (``nccl check``'s ``mixed-link-layer``), so the
    link layer placement gives every rank (:func:`sysverbs.placement.host_link_layer`)
    is kept, and a note says which were left out."""
    from ..placement import host_link_layer

    keep = host_link_layer([n.link_layer for n in nics])
    if keep is None:
        return nics, []
    out = [f"{n.device}:{n.port}" for n in nics if n.link_layer != keep]
    return [n for n in nics if n.link_layer == keep], [
        f"{keep} ports only (NCCL cannot mix InfiniBand and RoCE in one communicator): "
        f"left out {', '.join(out)}; name them with --device to use them instead"]


def _nccl_check(result: RankEnvironment, env: Mapping[str, str], sysfs_path: Optional[str],
                dev_dir: Optional[str], list_options: Optional[Mapping[str, Any]],
                where: str) -> tuple[tuple[LintWarning, ...], tuple[str, ...]]:
    """``sysverbs nccl check`` on the NCCL_IB_HCA written: its warnings, so that what
    ``env`` writes passes the check clean (or the command says why not); a note when
    libibverbs lists no device under another root (its device nodes are not under the
    dev dir), where NCCL's view cannot be known."""
    from . import nccl

    value = result.exports().get("NCCL_IB_HCA", env.get("NCCL_IB_HCA"))
    if value is None or not result.nics:
        return (), ()
    opts: dict[str, Any] = dict(list_options or {})
    opts.update(sysfs_path=sysfs_path, dev_dir=dev_dir)
    if sysfs_path is not None:
        opts.setdefault("source", "sysfs")
    try:
        ports = nccl.host_ports(gid_tables=True, **opts)
    except OSError as e:
        ports, why = [], e.strerror or str(e)
    else:
        why = "no device has its node under the dev dir"
    if not ports and sysfs_path is not None:
        return (), (f"NCCL_IB_HCA not checked against NCCL's rules: libibverbs lists no "
                    f"device under this root ({why})",)
    # in the environment written (its NCCL_IB_GID_INDEX, NCCL_IB_ADDR_FAMILY)
    lint = nccl.lint_hca(value, ports, {**env, **result.exports()}, where=where)
    return lint.warnings, ()

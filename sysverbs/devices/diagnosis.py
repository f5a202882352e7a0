"""Why is my RDMA device missing?  One answer per device the kernel shows.

:func:`diagnose` looks at every RDMA device in ``<sysfs>/class/infiniband`` (and
every uverbs entry naming one), works out whether ``ibv_get_device_list()`` would
return it, which provider would drive it and whether it can be opened, and says
why not: each :class:`Reason` has a stable ``code`` and an actionable sentence.
Whether libibverbs would drop a device, and why, comes from the same code that
emulates libibverbs (the sysfs scan, the provider loading and the matching), not
from a second implementation; nothing is printed and no process-wide state changes.

>>> import tempfile
>>> from sysverbs import testing
>>> from sysverbs import diagnose
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = testing.materialize(testing.fixture_path("mlx5-cx6"), tmp)
...     found = diagnose(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
...                      rdma_core="44")
>>> [(d.name, d.listed, d.usable, d.provider) for d in found][:2]
[('mlx5_0', True, False, 'mlx5'), ('mlx5_1', True, False, 'mlx5')]
>>> [r.code for r in found[1].reasons]
['dev_node_wrong', 'port_down']

The fixture's ``/dev`` nodes are plain files, so no device can be opened.  With
``recorded=True`` the tree is taken for what it is, a recording of another host: each
plain file stands for the node the recording has, which is reported instead
(``node``), and nothing is opened:

>>> with tempfile.TemporaryDirectory() as tmp:
...     host = testing.materialize(testing.fixture_path("mlx5-cx6"), tmp)
...     found = diagnose(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
...                      rdma_core="44", recorded=True)
>>> [(d.name, d.usable, [r.code for r in d.reasons]) for d in found][:2]
[('mlx5_0', True, []), ('mlx5_1', True, ['port_down'])]
>>> print(found[0].summary())
mlx5_0: usable (provider mlx5, uverbs0: recorded char device 231:192)
>>> [r.code for r in found.host]
['recorded_host']

Codes, errors (the device cannot be used) first, then warnings; :data:`CODES` has
the list.  ``sysverbs doctor`` prints the report for this machine (docs/cli.md).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from ..engine.api import resolve
from ..engine.device import makedev, open_cdev
from ..engine.devlist import AUTO_ORDER, MAX_ABI, MIN_ABI, scan_source
from ..ground import inputs
from ..ground.errors import SourceUnavailable, WrongTypeError
from ..ground.hostroot import DEFAULT_DEV_DIR
from ..ground.records import DeviceRecord
from ..ground.sysfs_read import cstr, listdir
from ..providers.drivers import load_for_mode
from ..providers.matching import DEV_PATH_TOO_LONG, PROVIDER_ABI, explain_match, modalias_of
from ..providers.table import Provider, latest_release, pabi_for, provider_dir, provider_table
from ..sources.base import LibraryKey
from ..sources.sysfs import ScanError, Skipped, read_class_abi, scan_sysfs_detailed
from . import access
from .attributes import LinkLayer, PortState, device_status
from .memlock import current as current_memlock
from .rdmacm import RDMA_USER_CM_MAX_ABI_VERSION, RDMA_USER_CM_MIN_ABI_VERSION, rdma_cm_abi
from .readable import unknown_files

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..engine.api import ListOptions

__all__ = ["CODES", "DeviceNode", "Diagnosis", "DiagnosisList", "Reason", "diagnose"]

ERROR = "error"
WARNING = "warning"
NOTE = "note"

#: Every reason code, its severity and what it means.
CODES: dict[str, tuple[str, str]] = {
    "no_kernel_support": (ERROR, "the kernel shows no RDMA device (no class/infiniband)"),
    "no_uverbs_module": (ERROR, "ib_uverbs is not loaded (no class/infiniband_verbs)"),
    "sysfs_path_too_long": (ERROR, "the sysfs path is too long for libibverbs (ENOMEM)"),
    "kernel_abi": (ERROR, "the kernel's uverbs ABI is unreadable or not 3..6 (ENOSYS)"),
    "no_uverbs_device": (ERROR, "the device has no uverbs char device"),
    "bad_uverbs_entry": (ERROR, "libibverbs skips the device's uverbs entry"),
    "no_dev_node": (ERROR, "no /dev/infiniband node for the device"),
    "no_providers_installed": (ERROR, "no provider library is installed"),
    "no_provider": (ERROR, "no provider of this rdma-core release matches the device"),
    "provider_not_installed": (ERROR, "the matching provider is not installed or enabled"),
    "provider_not_linked": (ERROR, "the matching provider is not linked into the static "
                            "libibverbs"),
    "provider_abi": (ERROR, "the device's uverbs ABI is outside the provider's range"),
    "dev_path_too_long": (ERROR, "the uverbs sysfs path is too long for libibverbs"),
    "dev_node_wrong": (ERROR, "the /dev node is not the device's char device"),
    "dev_node_access": (ERROR, "this user may not read and write the /dev node"),
    "dev_node_open_failed": (ERROR, "opening the /dev node failed"),
    "unknown": (ERROR, "a file the verdict rests on cannot be read or holds what the kernel "
                "never writes: whether the device works is unknown"),
    "port_down": (WARNING, "a port is not ACTIVE"),
    "no_gids": (WARNING, "a port has no GID"),
    "memlock": (WARNING, "RLIMIT_MEMLOCK is too small for memory registration"),
    "memlock_low": (WARNING, "RLIMIT_MEMLOCK is finite: less than NCCL and UCX ask for"),
    "no_rdma_cm": (WARNING, "librdmacm's rdma_cm char device is missing"),
    "rdma_cm_abi": (WARNING, "the rdma_cm ABI is not 3..4: rdma_get_devices fails (EPERM)"),
    "recorded_host": (NOTE, "a recording: its /dev nodes are stand-ins for the recorded ones"),
    "management_device": (NOTE, "an SMI (management) device of an XDR adapter: no verbs "
                          "device, by design"),
}
CODES.update(access.CODES)  # device_cgroup_denied, no_ipc_lock, netns_exclusive


@dataclass(frozen=True)
class Reason:
    """One finding: a stable ``code`` (see :data:`CODES`), a sentence that says what to
    do, ``"error"``, ``"warning"`` or ``"note"`` (information only), and the port it is
    about (or None)."""

    code: str
    message: str
    severity: str
    port: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.severity}: {self.message} [{self.code}]"


@dataclass(frozen=True)
class DeviceNode:
    """A listed device's ``/dev/infiniband`` node as :func:`diagnose` found it.

    ``kind``: ``"char"``, ``"block"``, ``"file"``, ``"directory"`` or ``"other"``;
    ``major`` and ``minor``: a char or block device's numbers, else None.
    ``stand_in``: the node is a recording's plain-file stand-in (``recorded=True``);
    ``path``, ``kind`` and the numbers are then the recorded host's node: umockdev
    replays a recorded uverbs node as the char device of the uverbs entry's sysfs
    ``dev`` numbers.
    """

    path: str
    kind: str
    major: Optional[int]
    minor: Optional[int]
    stand_in: bool = False


@dataclass(frozen=True)
class Diagnosis:
    """One RDMA device the kernel shows.

    ``listed``: ``ibv_get_device_list()`` would return it.  ``usable``: listed, and
    its char device can be opened (no error among ``reasons``).  ``provider``: the
    provider that matches it (also when that provider is not installed), or None.
    ``uverbs``: its uverbs char device name, if any.  ``node``: its ``/dev`` node, when
    it is listed and the node exists (a :class:`DeviceNode`), else None.
    """

    name: str
    usable: bool
    provider: Optional[str]
    reasons: tuple[Reason, ...]
    listed: bool
    uverbs: Optional[str]
    node: Optional[DeviceNode] = None

    @property
    def management(self) -> bool:
        """An XDR adapter's SMI device (``management_device``): not a verbs device, so
        neither usable nor a problem."""
        return any(r.code == "management_device" for r in self.reasons)

    @property
    def unknown(self) -> bool:
        """A file its verdict rests on could not be used (``unknown``): ``usable`` is
        False because it cannot be said to work, not because it was found broken."""
        return any(r.code == "unknown" for r in self.reasons)

    @property
    def errors(self) -> tuple[Reason, ...]:
        return tuple(r for r in self.reasons if r.severity == ERROR)

    def summary(self) -> str:
        """``name: state (provider P, uverbsN)``: the first line of ``str(self)``; a
        recording's stand-in node adds the recorded node (``uverbs0: recorded char
        device 231:192``)."""
        state = ("usable" if self.usable else "management device, no verbs" if self.management
                 else "unknown" if self.unknown
                 else "listed, not usable" if self.listed else "MISSING")
        head = f"{self.name}: {state}"
        if self.provider:
            head += f" (provider {self.provider}"
            if self.uverbs:
                head += f", {self.uverbs}"
                node = self.node
                if node is not None and node.stand_in:
                    head += f": recorded {node.kind} device {node.major}:{node.minor}"
            head += ")"
        return head

    def __str__(self) -> str:
        return "\n".join([self.summary()] + [f"  {r}" for r in self.reasons])


class DiagnosisList(list):  # type: ignore[type-arg]
    """The result of :func:`diagnose`: a ``list`` of :class:`Diagnosis` (by name) plus
    ``host``: findings about the machine rather than one device."""

    __slots__ = ("host",)

    def __init__(self, items: list[Diagnosis], host: tuple[Reason, ...]) -> None:
        super().__init__(items)
        self.host = host

    def report(self) -> str:
        """A human-readable report of everything found."""
        lines = [str(r) for r in self.host]
        for diag in self:
            lines.append(str(diag))
        if not lines:
            lines.append("no RDMA device")
        return "\n".join(lines)


def _reason(code: str, message: str, port: Optional[int] = None) -> Reason:
    return Reason(code, message, CODES[code][0], port)


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _fs(path: bytes) -> str:
    return os.fsdecode(path)


# ------------------------------------------------------------------------- the engine


def _candidates(key: LibraryKey) -> tuple[list[DeviceRecord], list[Skipped], bool]:
    """The records libibverbs would see (the same source code path), plus the skipped
    sysfs entries and whether netlink answered."""
    if key.source in ("auto", "sysfs"):
        if key.source == "auto":
            for name in AUTO_ORDER:
                if name == "sysfs":
                    break
                try:
                    found = scan_source(key._replace(source=name))
                except SourceUnavailable:
                    continue
                return list(found.records), [], bool(found.netlink)
        records, skipped = scan_sysfs_detailed(key.sysfs_root, key.dev_dir)
        return records, skipped, False
    found = scan_source(key)
    return list(found.records), [], bool(found.netlink)


def _load(key: LibraryKey) -> tuple[tuple[Provider, ...], tuple[bytes, ...]]:
    load = load_for_mode(key.providers, key.release, key.config_dir, os.environ, key.static)
    return tuple(load.providers), tuple(body for body, _ in load.messages)


_SKIP_TEXT = {
    "not_a_directory": "it is not a directory",
    "ibdev_unreadable": "its ibdev file is missing, unreadable or 64 bytes or longer",
    "name_too_long": "its name is 64 bytes or longer",
    "ibdev_path_too_long": "the IB device path is 256 bytes or longer",
    "no_ibdev_dir": "the IB device directory it names does not exist",
    "bad_dev": "its dev file is missing, empty or not MAJOR:MINOR",
}


#: Where a recording's device nodes were on the recorded host (materialize() writes
#: the recording's /dev/infiniband/NAME at <dev_dir>/NAME).
RECORDED_DEV_DIR = os.fsdecode(DEFAULT_DEV_DIR)


def _node_path(key: LibraryKey, name: bytes, recorded: bool) -> str:
    """The node as messages name it: the recorded host's path for a recording."""
    if recorded:
        return f"{RECORDED_DEV_DIR}/{_fs(name)}"
    return _fs(key.dev_dir + b"/" + name)


def _no_dev_node(key: LibraryKey, dev_name: bytes, recorded: bool) -> Reason:
    node = _node_path(key, dev_name, recorded)
    if recorded:
        return _reason(
            "no_dev_node",
            f"The recording has no {node} (no N: line), so libibverbs on the recorded "
            "host drops the device: there, check that udev created the node (udevadm "
            "trigger --subsystem-match=infiniband_verbs) or, in a container, that the "
            f"device was passed in (docker run --device={node}).",
        )
    return _reason(
        "no_dev_node",
        f"{node} does not exist, so libibverbs drops the device. In a container, pass "
        f"the device in (docker run --device={node}, or -v /dev/infiniband:/dev/infiniband "
        "with a device cgroup rule 'c 231:* rwm'); on a host, check that udev created it "
        "(udevadm trigger --subsystem-match=infiniband_verbs).",
    )


def _provider_hint(rec: DeviceRecord, key: LibraryKey) -> str:
    name = os.fsdecode(rec.ibdev_name)
    no_netlink = ("over RDMA netlink, which sysfs mode (SYSFS_PATH, or a kernel without "
                  "RDMA netlink) does not have.")
    for prov in provider_table(latest_release()):
        if not prov.driver_ids or not name.startswith(prov.name):
            continue
        if not prov.pci_prefixes and not prov.patterns:
            return (f" The {prov.name} provider recognises devices only by the kernel's "
                    f"driver id {no_netlink}")
        if not modalias_of(rec):  # a sub-function's parent is an auxiliary device
            return (" Its parent device has no modalias (it is no PCI function: a "
                    f"sub-function or another auxiliary device), so the {prov.name} "
                    f"provider can recognise it only by the kernel's driver id {no_netlink}")
    for release in range(key.release + 1, latest_release() + 1):
        later, _ = explain_match(rec, provider_table(release))
        if later is not None:
            return (f" rdma-core {release} and later have a provider for it ({later.name}): "
                    "upgrade rdma-core (ibverbs-providers).")
    return " It may need a vendor's own provider library."


def _not_installed(prov: Provider, key: LibraryKey, messages: tuple[bytes, ...]) -> Reason:
    lib = f"lib{prov.library}-rdmav{pabi_for(key.release)}.so"
    path = os.path.join(provider_dir(), lib)
    said = [os.fsdecode(m).strip() for m in messages if lib.encode() in m]
    if not inputs.isdir(key.config_dir):
        text = (f"The {prov.name} provider is not enabled: the provider config directory "
                f"{_fs(key.config_dir)} does not exist; install ibverbs-providers "
                "(Debian/Ubuntu) or rdma-core (RHEL, Fedora, SUSE).")
    elif inputs.exists(path):
        text = (f"The {prov.name} provider ({path}) is installed but not enabled: "
                f"{_fs(key.config_dir)} has no file with the line 'driver {prov.library}'.")
    else:
        text = (f"The {prov.name} provider ({lib}) is not installed: install "
                "ibverbs-providers (Debian/Ubuntu) or rdma-core (RHEL, Fedora, SUSE).")
    if said:
        text += " libibverbs says: " + " ".join(said)
    return _reason("provider_not_installed", text)


def _not_linked(prov: Provider, key: LibraryKey) -> Reason:
    linked = ",".join(key.static)
    if linked:
        has = f"it links {', '.join(key.static)} (in link order)"
        define = f"RDMA_STATIC_PROVIDERS={linked},{prov.library}"
    else:
        has = "it links no provider (RDMA_STATIC_PROVIDERS unset, or none)"
        define = f"RDMA_STATIC_PROVIDERS={prov.library}"
    return _reason(
        "provider_not_linked",
        f"The {prov.name} provider is not linked into this statically linked libibverbs: "
        f"{has}, and a static libibverbs loads no provider library. Build with "
        f"-D{define} (or RDMA_STATIC_PROVIDERS=all) and link again.")


def _match(rec: DeviceRecord, key: LibraryKey, installed: tuple[Provider, ...],
           messages: tuple[bytes, ...]) -> tuple[Optional[str], list[Reason]]:
    """Which provider takes the record, and why none of the installed ones does."""
    prov, refused = explain_match(rec, installed)
    if prov is not None:
        return prov.name, []
    name = _fs(rec.ibdev_name)
    for p, verdict in refused:
        if verdict == PROVIDER_ABI:
            return p.name, [_reason(
                "provider_abi",
                f"The kernel's uverbs ABI for {name} is {rec.abi_ver}, but the {p.name} "
                f"provider supports {p.min_abi} to {p.max_abi}: use an rdma-core release "
                "that matches the kernel (or a kernel that matches rdma-core).")]
        if verdict == DEV_PATH_TOO_LONG:
            return p.name, [_reason(
                "dev_path_too_long",
                f"{_fs(rec.sysfs_root)}/class/infiniband_verbs/{_fs(rec.dev_name)} is 256 "
                "bytes or longer, so libibverbs drops the device: use a shorter sysfs path.")]
    table_prov, _ = explain_match(rec, provider_table(key.release))
    if table_prov is not None and key.providers == "static":
        return table_prov.name, [_not_linked(table_prov, key)]
    if table_prov is not None:
        return table_prov.name, [_not_installed(table_prov, key, messages)]
    modalias = os.fsdecode(modalias_of(rec)) or "no modalias"
    return None, [_reason(
        "no_provider",
        f"No provider in rdma-core {key.release} supports {name} ({modalias}), so "
        f"libibverbs drops it.{_provider_hint(rec, key)}")]


def _found_node(node: str, st: os.stat_result) -> DeviceNode:
    mode = st.st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "char" if stat.S_ISCHR(mode) else "block"
        return DeviceNode(node, kind, os.major(st.st_rdev), os.minor(st.st_rdev))
    kind = "file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode) else "other"
    return DeviceNode(node, kind, None, None)


def _node_reasons(key: LibraryKey, rec: DeviceRecord, probe_open: bool, recorded: bool
                  ) -> tuple[list[Reason], Optional[DeviceNode]]:
    path = key.dev_dir + b"/" + rec.dev_name
    node = _fs(path)
    major, minor = rec.cdev
    try:
        st = inputs.stat(path)
    except (OSError, ValueError):
        return [_no_dev_node(key, rec.dev_name, recorded)], None
    if recorded and stat.S_ISREG(st.st_mode):
        # materialize()'s stand-in for a recorded node (an N: line).  umockdev replays
        # it as a char device (a uverbs entry is no block device) with the numbers of
        # the entry's sysfs dev file, which are the ones libibverbs expects: the
        # recorded node is right, and there is nothing here to check or open.
        recorded_node = _node_path(key, rec.dev_name, True)
        return [], DeviceNode(recorded_node, "char", major, minor, stand_in=True)
    found = _found_node(node, st)
    if not stat.S_ISCHR(st.st_mode):
        return [_reason(
            "dev_node_wrong",
            f"{node} is not a character device, so opening the device fails: it must be the "
            f"uverbs char device {major}:{minor} (bind-mount the host's /dev/infiniband, "
            "do not copy it).")], found
    if (major or minor) and st.st_rdev != makedev(major, minor):
        return [_reason(
            "dev_node_wrong",
            f"{node} is char device {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}, but sysfs "
            f"says {major}:{minor}, so opening the device fails: recreate the node "
            f"(mknod {node} c {major} {minor}) or pass the host's node in.")], found
    effective = os.access in os.supports_effective_ids
    if not inputs.access(path, os.R_OK | os.W_OK, effective_ids=effective):
        if access.access_errno(path) == errno.EPERM:  # the device cgroup, not the node's mode
            return [_reason(*access.cgroup_denied_here(node, major, minor))], found
        return [_access_reason(node, st)], found
    if probe_open:
        try:
            fd = open_cdev(path, makedev(major, minor) if (major or minor) else 0)
        except OSError as e:
            if e.errno == errno.EACCES:
                return [_access_reason(node, st)], found
            if e.errno == errno.EPERM:  # the device cgroup: nothing else gives EPERM here
                return [_reason(*access.cgroup_denied_here(node, major, minor))], found
            return [_reason("dev_node_open_failed",
                            f"Opening {node} failed: {os.strerror(e.errno or 0)}.")], found
        os.close(fd)
    return [], found


def _access_reason(node: str, st: os.stat_result) -> Reason:
    mode = stat.filemode(st.st_mode)
    return _reason(
        "dev_node_access",
        f"{node} ({mode}, uid {st.st_uid}, gid {st.st_gid}) is not readable and writable "
        f"by this user (uid {os.geteuid()}): add the user to the node's group, fix the "
        "udev rule that sets its mode, or run with the right privileges.")


def _port_reasons(ibdev_path: bytes) -> list[Reason]:
    out: list[Reason] = []
    attrs = device_status(ibdev_path)
    for port in attrs.ports:
        eth = port.link_layer is LinkLayer.ETHERNET
        if port.state is not None and port.state is not PortState.ACTIVE:
            phys = port.phys_state.name if port.phys_state is not None else "unknown"
            if port.state is PortState.INIT and not eth:
                text = (f"Port {port.port} is INIT (physical state {phys}): the link is up but "
                        "no subnet manager has configured it; start opensm or check the "
                        "fabric's subnet manager.")
            elif eth:
                ndevs = sorted({g.ndev for g in port.gids if g.ndev}) or [attrs.parent or "?"]
                text = (f"Port {port.port} is {port.state.name} (physical state {phys}): "
                        f"bring its netdev up (ip link set {ndevs[0]} up) and check the "
                        "cable and the switch port.")
            else:
                text = (f"Port {port.port} is {port.state.name} (physical state {phys}): "
                        "check the cable, the switch port and the subnet manager.")
            out.append(_reason("port_down", text, port.port))
        if port.raw["state"] is not None and not port.gids:
            if eth:
                text = (f"Port {port.port} has no GIDs: RoCE needs the port's netdev up with "
                        "an IP address (an IPv6 link-local address gives GID 0).")
            else:
                text = (f"Port {port.port} has no GIDs: the port is not initialised "
                        "(check the link and the subnet manager).")
            out.append(_reason("no_gids", text, port.port))
    return out


def _recorded_note(key: LibraryKey) -> Reason:
    text = ("A recorded host, not this machine: its /dev/infiniband nodes are stand-ins "
            "(plain files), so each listed device shows the node the recording has, and "
            "none is opened. This process's RLIMIT_MEMLOCK is not the recorded host's: "
            "not checked.")
    if not inputs.isdir(key.sysfs_root + b"/class/misc"):
        text += " The recording has no class/misc: librdmacm's rdma_cm not checked."
    return _reason("recorded_host", text)


def _host_reasons(key: LibraryKey, any_device: bool, recorded: bool) -> list[Reason]:
    out: list[Reason] = []
    memlock = None if recorded else current_memlock()
    if memlock is not None and (any_device or memlock[0] == "memlock"):
        out.append(_reason(*memlock))
    if not any_device:
        return out
    abi, source = rdma_cm_abi(key.sysfs_root)
    if source is not None and not RDMA_USER_CM_MIN_ABI_VERSION <= abi <= (
        RDMA_USER_CM_MAX_ABI_VERSION
    ):
        out.append(_reason(
            "rdma_cm_abi",
            f"{source} says rdma_cm ABI {abi}; librdmacm supports "
            f"{RDMA_USER_CM_MIN_ABI_VERSION} to {RDMA_USER_CM_MAX_ABI_VERSION}, so "
            "rdma_get_devices() fails with EPERM: use a matching rdma-core."))
    misc = key.sysfs_root + b"/class/misc/rdma_cm"
    if recorded and not inputs.isdir(key.sysfs_root + b"/class/misc"):
        return out  # the recording does not cover misc devices (the recorded_host note)
    node = _node_path(key, b"rdma_cm", recorded)
    if not inputs.isdir(misc):
        out.append(_reason(
            "no_rdma_cm",
            "The rdma_ucm module is not loaded (no class/misc/rdma_cm): librdmacm "
            "(rdma_cm, RDMA connections) needs it: modprobe rdma_ucm."))
    elif not inputs.exists(key.dev_dir + b"/rdma_cm"):
        said = f"The recording has no {node}" if recorded else f"{node} does not exist"
        out.append(_reason(
            "no_rdma_cm",
            f"{said}: librdmacm needs it; in a container pass it in "
            f"(docker run --device={node})."))
    return out


def diagnose(*, probe_open: bool = True, recorded: bool = False,
             **options: Unpack[ListOptions]) -> DiagnosisList:
    """One :class:`Diagnosis` per RDMA device the kernel shows, sorted by name.

    The options are those of :func:`sysverbs.get_device_list`.  ``probe_open``: try
    to open each listed device's char device (as ``ibv_open_device`` would) to find
    permission and container problems; nothing else is changed.  The result is what
    a fresh process would see: the caching of a rejected kernel ABI value by an
    earlier call in this process is not taken into account.

    ``recorded``: the tree is a recording of another host written by
    :func:`sysverbs.testing.materialize` (a bundled fixture: ``sysverbs doctor
    --fixture``), not this machine.  A plain file at a device's node is then the
    stand-in for the node the recording has: the device's ``node`` is the recorded
    one (a char device with the sysfs ``dev`` numbers, as umockdev replays it) and
    nothing is opened; a missing node is one the recorded host lacked.  This
    process's RLIMIT_MEMLOCK is not checked, nor rdma_cm when the recording has no
    ``class/misc``; the ``recorded_host`` note says so.  Leave it False for a live
    host or a ``/dev`` you were given, where a plain file is the error it is.
    """
    if not isinstance(recorded, bool):
        raise WrongTypeError(f"recorded is a bool, not {type(recorded).__name__}")
    opts = resolve(**options)
    key = opts.key()
    root = key.sysfs_root
    host: list[Reason] = []
    device_wide: list[Reason] = []  # apply to every device
    r: Optional[Reason] = None

    ib_dir = root + b"/class/infiniband"
    try:
        kernel_names = [n for n in listdir(ib_dir) if not n.startswith(b".")]
    except (OSError, ValueError):
        kernel_names = []
        host.append(_reason(
            "no_kernel_support",
            "The recording shows no RDMA devices: it has no class/infiniband, so the "
            "recorded host had no RDMA driver loaded (mlx5_ib, irdma, efa, bnxt_re..., or "
            "rdma_rxe for soft-RoCE)." if recorded else
            f"The kernel shows no RDMA devices: {_fs(ib_dir)} does not exist. Load the RDMA "
            "driver of the adapter (mlx5_ib, irdma, efa, bnxt_re..., or rdma_rxe for "
            "soft-RoCE); in a container, make sure /sys is the host's sysfs."))

    records: list[DeviceRecord] = []
    skipped: list[Skipped] = []
    netlink = False
    kernel_missing = bool(host)
    try:
        records, skipped, netlink = _candidates(key)
    except ScanError as e:
        if kernel_missing and e.errno == errno.ENOSYS:
            e = ScanError(0, e.path)  # no RDMA at all: no_kernel_support says it all
        if not e.errno:
            r = None
        elif e.errno == errno.ENOMEM:
            r = _reason("sysfs_path_too_long",
                        f"{_fs(e.path)} is 256 bytes or longer: libibverbs fails with ENOMEM; "
                        "use a shorter SYSFS_PATH.")
        else:
            r = _reason("no_uverbs_module",
                        f"{_fs(e.path)} does not exist, so libibverbs finds nothing (ENOSYS): "
                        "load the userspace verbs module (modprobe ib_uverbs).")
        if r is not None:
            host.append(r)
            device_wide.append(r)
    except SourceUnavailable as e:  # a source asked for by name
        r = _reason("no_uverbs_module", f"The {key.source} source is unavailable: {e}.")
        host.append(r)
        device_wide.append(r)

    if records and not netlink:
        abi = read_class_abi(root)
        path = _fs(root + b"/class/infiniband_verbs/abi_version")
        if abi is None:
            r = _reason("kernel_abi", f"{path} cannot be read, so libibverbs fails (ENOSYS).")
        elif not MIN_ABI <= abi <= MAX_ABI:
            r = _reason(
                "kernel_abi",
                f"{path} says uverbs ABI {abi}; libibverbs supports {MIN_ABI} to {MAX_ABI} and "
                "fails (ENOSYS; a second call in the same process passes, since it caches "
                "the value): use an rdma-core that matches the kernel.")
        else:
            r = None
        if r is not None:
            host.append(r)
            device_wide.append(r)

    installed, messages = _load(key)
    if key.providers == "installed" and not installed and records:
        host.append(_reason(
            "no_providers_installed",
            "No provider library is installed or enabled, so libibverbs can drive no "
            "device: install ibverbs-providers (Debian/Ubuntu) or rdma-core (RHEL, Fedora, "
            "SUSE)."))

    by_name: dict[bytes, list[Any]] = {}
    for name in kernel_names:
        by_name.setdefault(name, [])
    for rec in reversed(records):  # readdir order
        by_name.setdefault(rec.ibdev_name, []).append(rec)
    for skip in skipped:
        if skip.reason == "not_a_directory" or skip.ibdev_name is None:
            continue
        by_name.setdefault(cstr(skip.ibdev_name), []).append(skip)

    away = access.netns_away(root, key.source, [n for n, e in by_name.items() if not e])
    out: list[Diagnosis] = []
    for name, entries in by_name.items():
        reasons: list[Reason] = list(device_wide)
        provider: Optional[str] = None
        listed = False
        uverbs: Optional[str] = None
        node: Optional[DeviceNode] = None
        recs = [e for e in entries if isinstance(e, DeviceRecord)]
        # a broken second uverbs entry does not matter when libibverbs takes another one
        skips = [] if recs else [e for e in entries if isinstance(e, Skipped)]
        for skip in skips:
            if skip.reason == "no_dev_node":
                reasons.append(_no_dev_node(key, skip.dev_name, recorded))
            else:
                reasons.append(_reason(
                    "bad_uverbs_entry",
                    f"libibverbs skips {_fs(root)}/class/infiniband_verbs/"
                    f"{_fs(skip.dev_name)}: {_SKIP_TEXT.get(skip.reason, skip.reason)}."))
            uverbs = uverbs or _fs(skip.dev_name)
        if not entries and not device_wide and name.startswith(b"smi"):
            reasons.append(_reason(
                "management_device",
                f"{_fs(name)} is the SMI (subnet management) device of an XDR adapter's "
                "plane: the kernel gives it no uverbs char device by design, so libibverbs "
                "does not list it; use its mlx5 device for verbs."))
        elif not entries and not device_wide and name in away:
            reasons.append(_reason(*away[name]))
        elif not entries and not device_wide:
            reasons.append(_reason(
                "no_uverbs_device",
                f"The kernel created no uverbs char device for {_fs(name)}, so libibverbs "
                "cannot see it. Its driver may not offer user verbs, or ib_uverbs has not "
                "bound it."))
        for rec in recs[:1]:
            uverbs = _fs(rec.dev_name)
            provider, why = _match(rec, key, installed, messages)
            reasons.extend(why)
            if not why and not device_wide:
                listed = True
                why, node = _node_reasons(key, rec, probe_open, recorded)
                reasons.extend(why)
        ibdev_path = ib_dir + b"/" + name
        if name and b"/" not in name and inputs.isdir(ibdev_path):
            reasons.extend(_port_reasons(ibdev_path))
            reasons.extend(_reason("unknown", u.message(_fs(name)), u.port)
                           for u in unknown_files(ibdev_path))
        reasons.sort(key=lambda r: (r.severity != ERROR, list(CODES).index(r.code)))
        usable = listed and not any(r.severity == ERROR for r in reasons)
        out.append(Diagnosis(_fs(name), usable, provider, tuple(reasons), listed, uverbs,
                             node))
    out.sort(key=lambda d: _natural(d.name))
    if not out and inputs.isdir(ib_dir):
        host.insert(0, _reason(
            "no_kernel_support",
            f"The kernel shows no RDMA devices ({_fs(ib_dir)} is empty): no adapter has an "
            "RDMA driver loaded (mlx5_ib, irdma, efa, bnxt_re..., or rdma_rxe for soft-RoCE)."))
    host.extend(_host_reasons(key, bool(out), recorded))
    if recorded:
        host.append(_recorded_note(key))
    return DiagnosisList(out, tuple(host))

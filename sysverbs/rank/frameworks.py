"""Each framework's NIC variables, in its own syntax, established from its source
(docs/environment.md, "Frameworks").

:data:`FRAMEWORKS` says which variables ``sysverbs env --for NAME`` writes for each
framework; :data:`SOURCES` where each variable's syntax was read (repository, file,
commit); :data:`NOT_ESTABLISHED` the frameworks whose NIC variable could not be
established from a source, for which nothing is written (their users load the JSON
GPU->NICs map of :func:`host_map`).  Everything here is a pure function of its
arguments: the NICs come from :func:`sysverbs.rank.environment.rank_environment` and the
whole host's pairs from :func:`sysverbs.placement.assign`.

>>> nvshmem_hca_list([("mlx5_0", 1), ("mlx5_3", 1)]).value
'mlx5_0:1,mlx5_3:1'
>>> uccl_rdma_dev([("mlx5_0", 1), ("mlx5_0", 2)]).value
'mlx5_0'
>>> vllm_mapping([("0000:1b:00.0", "0000:1a:00.0")]).value
'0000:1b:00.0=0000:1a:00.0'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Optional

from ..ground.errors import UsageError
from .environment import RankEnvironment, Variable

__all__ = [
    "FRAMEWORKS",
    "HOST_FRAMEWORKS",
    "NOT_ESTABLISHED",
    "SOURCES",
    "HostPair",
    "Source",
    "framework_names",
    "for_frameworks",
    "nvshmem_hca_list",
    "uccl_rdma_dev",
    "vllm_mapping",
    "vllm_selection",
]


class Source(NamedTuple):
    """Where a variable's syntax was read: ``repo``, ``path``, ``commit`` (None: read
    from a summary of the file, its commit not known) and the rule, in a few words."""

    repo: str
    path: str
    commit: Optional[str]
    rule: str


NCCL_COMMIT = "5067397c2676d5aed50042fc39e5c8ee96eb0027"
UCX_COMMIT = "9466d104a317c8ffddd9734e72055d8bbda021b3"
NVSHMEM_COMMIT = "2d7d25f0816235e3c2b51779571ec032606ea0dd"
UCCL_COMMIT = "da914a2054c29725464803e379bb3b98de90dfa1"
MOONCAKE_COMMIT = "78297b7b80502fe30d01a0db0e484e402cb64fb6"

#: Each variable's source (facts, not code).
SOURCES: dict[str, Source] = {
    "NCCL_IB_HCA": Source(
        "NVIDIA/nccl", "src/transport/net_ib/init.cc", NCCL_COMMIT,
        "one leading '^' then one leading '=' for the whole list; 'dev:port' entries"),
    "NCCL_SOCKET_IFNAME": Source(
        "NVIDIA/nccl", "src/os/linux.cc", NCCL_COMMIT,
        "'=' then exact interface names, the bootstrap's IFF_RUNNING interfaces"),
    "NCCL_IB_GID_INDEX": Source(
        "NVIDIA/nccl", "src/transport/net_ib/gdr.cc", NCCL_COMMIT,
        "one index for every RoCE device (sysverbs.rank.gid: NCCL's scan)"),
    "NCCL_IB_ADDR_FAMILY": Source(
        "NVIDIA/nccl", "src/transport/net_ib/gdr.cc", NCCL_COMMIT,
        "AF_INET (default) or AF_INET6: the family of the GID NCCL's scan takes"),
    "UCX_NET_DEVICES": Source(
        "openucx/ucx", "src/ucp/core/ucp_context.c", UCX_COMMIT,
        "ucp_is_resource_in_device_list: each ','-separated entry strcmp'd with the "
        "resource name 'dev:port'; 'all' for every device"),
    "NVSHMEM_HCA_LIST": Source(
        "NVIDIA/nvshmem", "src/modules/transport/common/transport_common.cpp", NVSHMEM_COMMIT,
        "nvshmemt_parse_hca_list: one leading '^' excludes; 'name[:port]' entries, names "
        "strcmp'd (ibrc.cpp, ibgda.cpp, ibdevx.cpp), port -1 (any) when absent; at most "
        "MAX_NUM_HCAS=48 entries, a name in char[64]"),
    "NVSHMEM_ENABLE_NIC_PE_MAPPING": Source(
        "NVIDIA/nvshmem", "src/include/host/env/env_defs.h", NVSHMEM_COMMIT,
        "must be 1 for NVSHMEM_HCA_LIST to be effective (its description); then a PE "
        "takes device mype_node % n of its list (src/host/transport/transport.cpp)"),
    "UCCL_P2P_RDMA_DEV": Source(
        "uccl-project/uccl", "p2p/rdma/rdma_device.cc", UCCL_COMMIT,
        "get_best_dev_idx: ','-separated tokens, blanks trimmed; a token that is a whole "
        "number is an index into ibv_get_device_list's order, else a device name "
        "compared exactly; no port field"),
    "UCCL_IB_HCA": Source(
        "uccl-project/uccl", "include/util/net.h", UCCL_COMMIT,
        "parse_interfaces/match_if_list with a leading '^' and '=' (ep/src/rdma.cpp): "
        "NCCL_IB_HCA's syntax; UCCL reads NCCL_IB_HCA when it is unset"),
    "MC_CUSTOM_TOPO_JSON": Source(
        "kvcache-ai/Mooncake", "mooncake-transfer-engine/src/topology.cpp", MOONCAKE_COMMIT,
        "the file it names, read when the transfer engine discovers its topology "
        "(Topology::parse): a JSON object whose keys are 'cpu:NODE' and 'cuda:ORDINAL', "
        "each [[preferred device names], [other device names]]; every name is a NIC "
        "Mooncake opens"),
    "VLLM_GPU_NIC_PCIE_MAPPING": Source(
        "vllm-project/vllm", "vllm/v1/executor/vllm_net_devices.py", None,
        "parse_gpu_nic_mapping: ','-separated GPU_BDF=NIC_BDF pairs (one NIC per GPU); "
        "the NIC's RDMA device is the first name, sorted, whose device link is that BDF"),
    "VLLM_NIC_SELECTION_VARS": Source(
        "vllm-project/vllm", "vllm/v1/executor/vllm_net_devices.py", None,
        "parse_nic_selection_vars: ','-separated VAR[:suffix]; vLLM sets VAR to the "
        "device name + suffix, before any value already set (joined by ','); needs "
        "VLLM_GPU_NIC_PCIE_MAPPING"),
}

#: What ``--for NAME`` writes, in order.
FRAMEWORKS: dict[str, tuple[str, ...]] = {
    "nccl": ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX", "NCCL_IB_ADDR_FAMILY"),
    "ucx": ("UCX_NET_DEVICES",),
    "nvshmem": ("NVSHMEM_HCA_LIST", "NVSHMEM_ENABLE_NIC_PE_MAPPING"),
    "uccl": ("UCCL_P2P_RDMA_DEV", "UCCL_IB_HCA"),
    "vllm": ("VLLM_GPU_NIC_PCIE_MAPPING", "VLLM_NIC_SELECTION_VARS"),
    "mooncake": ("MC_CUSTOM_TOPO_JSON",),
}

#: Frameworks whose NIC variable no source establishes: nothing is written for them.
NOT_ESTABLISHED: dict[str, str] = {
    "sglang": "SGLang takes its NICs per launch argument and through Mooncake or NIXL",
    "nixl": "NIXL picks its NICs through UCX (--for ucx) or its own plugins' options",
}

#: Frameworks whose variables describe the whole host, not one rank.
HOST_FRAMEWORKS = frozenset({"vllm", "mooncake"})

#: NVSHMEM's MAX_NUM_HCAS (entries nvshmemt_parse_hca_list reads) and its name buffer.
NVSHMEM_MAX_ENTRIES = 48
NVSHMEM_NAME_MAX = 63

#: The variables vLLM may set per worker, with the suffix each takes (None: the port).
VLLM_TARGETS: dict[str, tuple[str, ...]] = {
    "nccl": ("NCCL_IB_HCA",),
    "ucx": ("UCX_NET_DEVICES",),
    "nvshmem": ("NVSHMEM_HCA_LIST",),
    "uccl": ("UCCL_P2P_RDMA_DEV",),
}
_NO_PORT = frozenset({"UCCL_P2P_RDMA_DEV"})


class HostPair(NamedTuple):
    """One GPU of the host and its first NIC: ``vllm_name`` is the RDMA device vLLM
    finds at ``nic_address`` (None: none it can find)."""

    gpu: str
    gpu_address: str
    device: Optional[str]
    port: Optional[int]
    nic_address: Optional[str]
    vllm_name: Optional[str]


def framework_names(text: str) -> list[str]:
    """``--for nccl,ucx,...``: known names, in order, each once (a
    :class:`~sysverbs.ground.errors.UsageError` for an unknown one)."""
    names: list[str] = []
    for word in text.split(","):
        name = word.strip().lower()
        if name not in FRAMEWORKS and name not in NOT_ESTABLISHED:
            known = ", ".join([*FRAMEWORKS, *NOT_ESTABLISHED])
            raise UsageError(f"--for: unknown framework {word!r} (known: {known})")
        if name not in names:
            names.append(name)
    return names


def _writable(device: str) -> bool:
    return bool(device) and not any(c in device for c in ",: \t\n\r^=")


def nvshmem_hca_list(entries: Sequence[tuple[str, int]]) -> Variable:
    """``NVSHMEM_HCA_LIST`` for these (device, port) pairs: ``dev:port,...``."""
    name = "NVSHMEM_HCA_LIST"
    items = [f"{d}:{p}" for d, p in entries if _writable(d) and len(d) <= NVSHMEM_NAME_MAX]
    if not items:
        return Variable(name, None, "no NIC NVSHMEM can name (',', ':', blanks or '^' in "
                        "the name, or longer than 63 characters)")
    if len(items) > NVSHMEM_MAX_ENTRIES:
        return Variable(name, None, f"{len(items)} NICs: NVSHMEM reads at most "
                        f"{NVSHMEM_MAX_ENTRIES} entries")
    return Variable(name, ",".join(items),
                    "exact device names with ports: NVSHMEM compares each name with strcmp "
                    "and takes ':port' as the port (no prefixes, no '=')")


def uccl_rdma_dev(entries: Sequence[tuple[str, int]]) -> Variable:
    """``UCCL_P2P_RDMA_DEV`` for these pairs: the device names, each once."""
    name = "UCCL_P2P_RDMA_DEV"
    devices = list(dict.fromkeys(d for d, _ in entries))
    bad = [d for d in devices if not _writable(d) or d.isdigit()]
    ok = [d for d in devices if d not in bad]
    if not ok:
        return Variable(name, None, "no NIC UCCL can name (a name that is a number is "
                        "read as an index; ',' and blanks split or are trimmed)")
    ports = sorted({p for d, p in entries if d in ok})
    why = "device names, compared exactly (UCCL has no port field here"
    why += ")" if ports == [1] else f"; the chosen ports are {ports}: UCCL picks its own)"
    return Variable(name, ",".join(ok), why)


def vllm_mapping(pairs: Sequence[tuple[str, str]]) -> Variable:
    """``VLLM_GPU_NIC_PCIE_MAPPING`` for (GPU BDF, NIC BDF) pairs."""
    name = "VLLM_GPU_NIC_PCIE_MAPPING"
    if not pairs:
        return Variable(name, None, "no GPU of this host has a NIC vLLM can find")
    return Variable(name, ",".join(f"{g}={n}" for g, n in pairs),
                    "each GPU's first NIC by PCI address, for the whole host: vLLM gives "
                    "each worker the RDMA device at its GPU's NIC address")


def _prefix_safe(devices: Iterable[str], all_devices: Iterable[str]) -> bool:
    """No device of the host has a mapped name as a proper prefix (NCCL and UCCL
    match ``NCCL_IB_HCA`` entries without ``=`` as prefixes)."""
    others = list(all_devices)
    return not any(o != d and o.startswith(d) for d in devices for o in others)


def vllm_selection(pairs: Sequence[HostPair], frameworks: Sequence[str],
                   all_devices: Sequence[str]) -> tuple[Variable, list[str], list[str]]:
    """``VLLM_NIC_SELECTION_VARS``: which variables vLLM sets per worker (those of the
    other frameworks asked for; NCCL's and UCX's when none is), the names it took and
    the notes on those it could not take."""
    name = "VLLM_NIC_SELECTION_VARS"
    wanted = [f for f in frameworks if f in VLLM_TARGETS] or ["nccl", "ucx"]
    mapped = [p for p in pairs if p.device is not None and p.device == p.vllm_name]
    if not mapped:
        return Variable(name, None, "no GPU has a NIC vLLM can find"), [], []
    devices = sorted({p.device for p in mapped if p.device is not None})
    ports = {p.port for p in mapped}
    notes: list[str] = []
    out: list[str] = []
    for fw in wanted:
        for var in VLLM_TARGETS[fw]:
            if var in _NO_PORT:
                out.append(var)
                continue
            if len(ports) != 1:
                notes.append(f"{var} not in {name}: the GPUs' NICs use different ports "
                             f"({sorted(p for p in ports if p is not None)}) and vLLM "
                             "appends one suffix for all")
                continue
            if var == "NCCL_IB_HCA" and not _prefix_safe(devices, all_devices):
                notes.append(f"{var} not in {name}: vLLM writes the bare name, which NCCL "
                             "matches as a prefix of other devices of this host")
                continue
            out.append(f"{var}:{next(iter(ports))}")
    if not out:
        return Variable(name, None, "no variable vLLM can write exactly for this host"), [], notes
    return (Variable(name, ",".join(out),
                     "vLLM sets these per worker to its GPU's RDMA device and the suffix"),
            [v.split(":")[0] for v in out], notes)


def _host_variables(names: Sequence[str], pairs: Sequence[HostPair],
                    all_devices: Sequence[str]) -> tuple[list[Variable], list[str], list[str]]:
    notes: list[str] = []
    for p in pairs:
        if p.device is None:
            notes.append(f"vLLM: {p.gpu} ({p.gpu_address}) has no NIC: a vLLM worker on "
                         "it stops (no entry in VLLM_GPU_NIC_PCIE_MAPPING)")
        elif p.device != p.vllm_name:
            notes.append(f"vLLM: {p.gpu}'s NIC {p.device} cannot be found by its PCI "
                         f"address {p.nic_address} ("
                         + (f"{p.vllm_name} is found there" if p.vllm_name else
                            "its device link is not a PCI function") + "): left out")
    good = [(p.gpu_address, p.nic_address) for p in pairs
            if p.device is not None and p.device == p.vllm_name and p.nic_address]
    mapping = vllm_mapping([(g, n) for g, n in good if n is not None])
    selection, taken, more = vllm_selection(pairs, names, all_devices)
    if mapping.value is None or selection.value is None:
        why = "vLLM needs both VLLM_GPU_NIC_PCIE_MAPPING and VLLM_NIC_SELECTION_VARS"
        mapping = Variable(mapping.name, None, mapping.reason if mapping.value is None
                           else why)
        selection = Variable(selection.name, None, selection.reason)
        taken = []
    return [mapping, selection], taken, notes + more


def for_frameworks(env: RankEnvironment, names: Sequence[str], *,
                   pairs: Sequence[HostPair] = (), all_devices: Sequence[str] = (),
                   environ: Optional[Mapping[str, str]] = None,
                   mooncake_file: Optional[str] = None) -> RankEnvironment:
    """``env`` restricted to the variables of the frameworks ``names``, with theirs
    added (pure).  ``pairs``: the host's GPU->first-NIC pairs (for vLLM),
    ``all_devices`` its RDMA device names; ``environ``: a variable already set there
    is kept, as :func:`~sysverbs.rank.environment.keep_user_set` keeps it;
    ``mooncake_file``: where Mooncake's topology file was written (``env --map``)."""
    from .environment import keep_user_set

    entries = [(n.device, n.port) for n in env.nics]
    have = {v.name: v for v in env.variables}
    nccl = have.get("NCCL_IB_HCA")
    made: dict[str, Variable] = {}
    notes: list[str] = []
    if entries:
        hca = nvshmem_hca_list(entries)
        made[hca.name] = hca
        made["NVSHMEM_ENABLE_NIC_PE_MAPPING"] = Variable(
            "NVSHMEM_ENABLE_NIC_PE_MAPPING", "1" if hca.value else None,
            "NVSHMEM applies NVSHMEM_HCA_LIST only with it; each PE then takes one device "
            "of its list" if hca.value else "no NVSHMEM_HCA_LIST to apply")
        made["UCCL_P2P_RDMA_DEV"] = uccl_rdma_dev(entries)
    if nccl is not None:
        made["UCCL_IB_HCA"] = Variable(
            "UCCL_IB_HCA", nccl.value, "NCCL_IB_HCA's value: UCCL parses it with NCCL's "
            "rules" if nccl.value else nccl.reason)
    made["MC_CUSTOM_TOPO_JSON"] = Variable(
        "MC_CUSTOM_TOPO_JSON", mooncake_file,
        "Mooncake's topology file, written by sysverbs env --for mooncake --map FILE: each "
        "GPU's NICs preferred" if mooncake_file else "no topology file: sysverbs env --for "
        "mooncake --map FILE writes one")
    taken: list[str] = []
    if "vllm" in names:
        host_vars, taken, more = _host_variables(names, pairs, all_devices)
        made.update((v.name, v) for v in host_vars)
        notes += more
    variables: list[Variable] = []
    for fw in names:
        if fw in NOT_ESTABLISHED:
            notes.append(f"{fw}: nothing written ({NOT_ESTABLISHED[fw]}); its users can "
                         "load the GPU->NICs map of sysverbs env --map")
            continue
        for var in FRAMEWORKS[fw]:
            v = made.get(var, have.get(var))
            if v is None:
                continue
            if var == "UCCL_IB_HCA" and "NCCL_IB_HCA" in taken and v.value is not None:
                v = Variable(var, None, "unset, UCCL reads NCCL_IB_HCA, which vLLM sets "
                             "per worker (VLLM_NIC_SELECTION_VARS)")
            elif var in taken and v.value is not None:
                v = Variable(var, None, "vLLM sets it per worker (VLLM_NIC_SELECTION_VARS) "
                             "before any value set here, which would then follow it")
            variables.append(v)
    out = env._replace(variables=tuple(variables), notes=env.notes + tuple(notes))
    return keep_user_set(out, environ or {})

"""Whether NCCL would use GPUDirect RDMA between each GPU and its NICs, and why not
(``gdr_unavailable``, ``gdr_disabled_by_distance``; docs/diagnose.md).

NCCL's rules, from NVIDIA/nccl (master of 2026-06-11, NCCL 2.30+; :data:`RULES` has each
with its source line):

* A NIC supports GPU memory (``gdrSupport``, src/graph/topo.cc:1651) when its network
  says ``NCCL_PTR_CUDA`` (the IB transport: a peer-memory module is loaded, one of
  :data:`PEERMEM_FILES` exists, src/transport/net_ib/gdr.cc:18-20) or, with DMA-BUF
  enabled for the communicator, ``NCCL_PTR_DMABUF`` (``ibv_reg_dmabuf_mr`` does not fail
  with EOPNOTSUPP: a kernel of 5.12 or later whose RDMA driver registers DMA-BUF, gdr.cc:56-60).
  DMA-BUF is enabled (src/init.cc:399-420) when ``NCCL_DMABUF_ENABLE`` is not 0, the CUDA
  driver is 11.7 or later and the GPU reports ``CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED``,
  which NVIDIA's open kernel module does and its proprietary one does not.
* The GPU itself must say it can (``gdrSupport`` of NCCL's GPU node: CUDA's
  ``cudaDevAttrGPUDirectRDMASupported``, src/plugin/net.cc:426-436, topo.cc:1807); CUDA
  says no for the GPUs of :data:`NO_GDR_GPUS` (GeForce; the GB10 of DGX Spark, an
  integrated GPU on unified memory, which has no DMA-BUF either), and NCCL then uses GDR
  with no NIC, whatever the peer-memory module (paths.cc:486).
* The DMA-BUF path is decided at run time by a trial ``ibv_reg_dmabuf_mr(fd=-1)`` on each
  NIC (gdr.cc:46-68): sysverbs knows the kernel drivers of :data:`DMABUF_DRIVERS` to pass
  it on Linux 5.12 and later; with another NIC the pair is ``unknown`` ("NCCL decides by
  ..."), never a guessed "GDR on".
* ``ncclTopoCheckGdr`` (src/graph/paths.cc:468-541): GDR is off when the NIC or the GPU
  lacks support, else when the GPU<->NIC path type is beyond the level:
  ``NCCL_NET_GDR_LEVEL`` when set (a path type name, or the old numbers 0-5), else
  ``P2C`` while ``NCCL_NET_GDR_C2C`` is not 0 (its default 1 since NCCL 2.27.3) and
  ``PXB`` otherwise.  On Grace (a GPU with a C2C link to its CPU) a NIC on that CPU's
  PCIe is ``P2C`` (paths.cc:206 and 805-808), so GDR is on by default there.

What sysfs cannot show is left undecided, never alarmed on: without an NVIDIA driver
(no ``/proc/driver/nvidia``, no ``/sys/module/nvidia``) nothing applies; a tree without
``/sys/module`` (a recording) says nothing about the peer-memory module; an unknown kernel
or module flavour leaves DMA-BUF unknown.

>>> facts = GdrFacts(driver=True, modules_known=True, peermem=None, flavour="proprietary",
...                  kernel=(6, 8))
>>> s = gdr_support(facts, {})
>>> s.state, s.code
('none', 'gdr_unavailable')
>>> gdr_support(facts._replace(flavour="open"), {}).state
'dmabuf'
>>> gdr_support(facts._replace(flavour="open"), {"NCCL_DMABUF_ENABLE": "0"}).state
'none'
>>> spark = facts._replace(flavour="open", gpus=(("000f:01:00.0", "NVIDIA GB10", 0x2E12),))
>>> gdr_support(spark, {}).state
'none'
>>> gdr_level({})
('P2C', 'NCCL_NET_GDR_LEVEL unset, NCCL_NET_GDR_C2C=1')
>>> gdr_level({"NCCL_NET_GDR_C2C": "0"})[0], gdr_level({"NCCL_NET_GDR_LEVEL": "3"})[0]
('PXB', 'PHB')
>>> gdr_allowed("PHB", "PXB"), gdr_allowed("PIX", "PXB"), gdr_allowed("P2C", "P2C")
(False, True, True)
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple, Optional

from ..devices.attributes import read_text
from .ctext import load_param

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ..placement import Assignment, Gpu, Topology

__all__ = ["CODES", "DMABUF_DRIVERS", "NO_GDR_GPUS", "PATH_TYPES", "PEERMEM_FILES", "RULES",
           "GdrFacts", "GdrPair", "GdrSupport", "gdr_allowed", "gdr_findings", "gdr_level",
           "gdr_pairs", "gdr_support", "gpu_facts", "gpu_without_gdr", "nic_dmabuf",
           "pair_verdict", "read_gdr_facts"]

#: The findings, as ``sysverbs.devices.diagnosis.CODES`` has its own: (severity, meaning).
CODES = {
    "gdr_unavailable": ("warning", "NCCL would not use GPUDirect RDMA on any NIC: no "
                        "peer-memory module and no DMA-BUF path"),
    "gdr_disabled_by_distance": ("warning", "a GPU's NIC is farther than NCCL_NET_GDR_LEVEL "
                                 "allows: NCCL stages its transfers through host memory"),
}
#: NCCL's path types, nearest first (``topoPathTypeStr``, src/graph/topo.cc:34).
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
#: ``NCCL_NET_GDR_LEVEL``'s old numbers (``levelsOldToNew``, src/graph/paths.cc:243).
OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")
#: The files whose existence says a peer-memory module is loaded (``KNL_MODULE_LOADED``,
#: src/transport/net_ib/gdr.cc:18-20), relative to the sysfs root.
PEERMEM_FILES = ("kernel/mm/memory_peers/nv_mem/version",
                 "kernel/mm/memory_peers/nv_mem_nc/version",
                 "module/nvidia_peermem/version")
#: The first kernel with ``ibv_reg_dmabuf_mr`` (uverbs ``REG_DMABUF_MR``, Linux 5.12).
DMABUF_KERNEL = (5, 12)
#: The NICs' PCI drivers known to pass NCCL's trial ``ibv_reg_dmabuf_mr`` on a kernel of
#: :data:`DMABUF_KERNEL` or later (mlx5_ib's DMA-BUF memory regions came with uverbs'
#: method, in Linux 5.12); any other NIC is left to NCCL's trial (``unknown``).
DMABUF_DRIVERS = frozenset({"mlx5_core"})
#: GPUs whose CUDA reports no GPUDirect RDMA (``cudaDevAttrGPUDirectRDMASupported`` 0):
#: (PCI device id or None, a word of the driver's model name, why, source).  A GPU
#: matches by its device id or by the word in ``/proc/driver/nvidia/gpus/<bdf>/information``'s
#: ``Model``.
NO_GDR_GPUS = (
    (0x2E12, "GB10", "GB10 (DGX Spark) is an integrated GPU on unified memory: CUDA reports "
     "neither GPU_DIRECT_RDMA_SUPPORTED nor DMA_BUF_SUPPORTED, nvidia_peermem does not load",
     "NVIDIA, forums.developer.nvidia.com/t/dgx-spark-gpudirect-rdma/348787/6"),
    (None, "GeForce", "CUDA reports no GPUDirect RDMA on a GeForce GPU",
     "NVIDIA/nccl#618, NVIDIA/gdrcopy#211"),
)
#: Each rule and where NCCL has it (NVIDIA/nccl 5067397, 2026-06-11).
RULES = (
    ("peer memory: any of PEERMEM_FILES exists -> NCCL_PTR_CUDA",
     "src/transport/net_ib/gdr.cc:18-20, init.cc:547-549"),
    ("DMA-BUF on the NIC: ibv_reg_dmabuf_mr(fd=-1) not EOPNOTSUPP (kernel >= 5.12)",
     "src/transport/net_ib/gdr.cc:56-60, init.cc:551-553"),
    ("DMA-BUF for the communicator: NCCL_DMABUF_ENABLE (default 1), CUDA >= 11.7, "
     "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (open kernel module)", "src/init.cc:399-420"),
    ("NIC gdr = NCCL_PTR_CUDA or (dmaBufSupport and NCCL_PTR_DMABUF)",
     "src/graph/topo.cc:1651-1655"),
    ("no GDR when the NIC or the GPU has no support", "src/graph/paths.cc:485-486"),
    ("level: NCCL_NET_GDR_LEVEL, else P2C if NCCL_NET_GDR_C2C (default 1) else PXB",
     "src/graph/paths.cc:465, 511-513"),
    ("NCCL_NET_GDR_LEVEL: a path type name, or old numbers 0-5 -> LOC PIX PXB PHB SYS SYS",
     "src/graph/paths.cc:243-279"),
    ("no GDR when the GPU-NIC path is beyond the level", "src/graph/paths.cc:528-535"),
    ("C2C GPU + NIC on its CPU's PCIe (PHB) -> P2C", "src/graph/paths.cc:206, 805-808"),
    ("GPU gdr = cudaDevAttrGPUDirectRDMASupported (CUDA >= 11.3; older: a loopback regMr)",
     "src/plugin/net.cc:424-495, init.cc:740, topo.cc:1807"),
    ("ibv_reg_dmabuf_mr absent from libibverbs (before IBVERBS_1.12) -> EOPNOTSUPP",
     "src/misc/ibvsymbols.cc:124-125, ibvwrap.cc:224-229"),
)
GRACE_ROOT_PORTS = frozenset({0x22B1, 0x22B2, 0x22B8, 0x2F95, 0x2F96})  # Grace, Vera
NVIDIA = 0x10DE
_RELEASE = re.compile(r"([0-9]+)\.([0-9]+)")


class GdrFacts(NamedTuple):
    """What the host shows: ``driver`` (an NVIDIA kernel driver is loaded),
    ``modules_known`` (the tree has ``/sys/module``), ``peermem`` (the first of
    :data:`PEERMEM_FILES` that exists, else None), ``flavour`` of the NVIDIA module
    (``"open"``, ``"proprietary"``, None unknown), ``kernel`` (major, minor) or None,
    ``gpus``: each NVIDIA GPU's (PCI address, model, PCI device id)."""

    driver: bool
    modules_known: bool
    peermem: Optional[str]
    flavour: Optional[str]
    kernel: Optional[tuple[int, int]]
    gpus: tuple[tuple[str, Optional[str], Optional[int]], ...] = ()


class GdrSupport(NamedTuple):
    """The host's verdict: ``state`` ``"peermem"``, ``"dmabuf"`` (NCCL would register GPU
    memory that way), ``"none"`` (it would not: ``code`` is ``gdr_unavailable``),
    ``"unknown"`` or ``"n/a"`` (no NVIDIA driver); ``reason`` says why."""

    state: str
    reason: str

    @property
    def code(self) -> Optional[str]:
        return "gdr_unavailable" if self.state == "none" else None


class GdrPair(NamedTuple):
    """One GPU and one of its NIC ports: NCCL's ``path`` type, the ``level``, ``enabled``
    (None: undecided), ``code``, the finding a pair without GPUDirect RDMA gives
    (:func:`pair_verdict`), and ``reason``."""

    gpu: int
    pci_bus_id: str
    device: str
    port: int
    path: Optional[str]
    level: str
    enabled: Optional[bool]
    code: Optional[str]
    reason: str

    def as_dict(self) -> dict[str, object]:
        return dict(self._asdict())


def _flavour(proc: str, sysfs: str) -> Optional[str]:
    """``open`` or ``proprietary``: ``/proc/driver/nvidia/version`` names the open module
    ("Open Kernel Module"); else the module's taint (``P``: proprietary licence)."""
    text = read_text(os.fsencode(os.path.join(proc, "driver", "nvidia", "version")), 4096)
    if text is not None and "Kernel Module" in text:
        return "open" if "Open Kernel Module" in text else "proprietary"
    taint = read_text(os.fsencode(os.path.join(sysfs, "module", "nvidia", "taint")))
    if taint is None:
        return None
    return "proprietary" if "P" in taint else "open"


def read_gdr_facts(sysfs: str, proc: str) -> GdrFacts:
    """The facts of the host whose sysfs and proc roots are given (never raises: what
    cannot be read is None)."""
    from ..ground import inputs

    driver = (inputs.isdir(os.path.join(proc, "driver", "nvidia"))
              or inputs.isdir(os.path.join(sysfs, "module", "nvidia")))
    modules_known = inputs.isdir(os.path.join(sysfs, "module"))
    peermem = next((f for f in PEERMEM_FILES if inputs.exists(os.path.join(sysfs, f))), None)
    release = read_text(os.fsencode(os.path.join(proc, "sys", "kernel", "osrelease")))
    m = _RELEASE.match(release.strip()) if release is not None else None
    kernel = (int(m.group(1)), int(m.group(2))) if m else None
    return GdrFacts(driver, modules_known, peermem, _flavour(proc, sysfs), kernel)


def gdr_support(facts: GdrFacts, environ: Mapping[str, str]) -> GdrSupport:
    """Whether NCCL's IB transport would register GPU memory (pure)."""
    if not facts.driver:
        return GdrSupport("n/a", "no NVIDIA driver (no /proc/driver/nvidia, no "
                          "/sys/module/nvidia)")
    lacking = [(address, model, gpu_without_gdr(model, device))
               for address, model, device in facts.gpus]
    if lacking and all(why for _, _, why in lacking):
        return GdrSupport("none", "no GPU of this host can: " + "; ".join(
            f"{address} ({model or 'NVIDIA GPU'}): {why}" for address, model, why in lacking))
    if facts.peermem is not None:
        return GdrSupport("peermem", f"/sys/{facts.peermem} exists (nvidia_peermem)")
    off: list[str] = []
    if load_param(environ, "NCCL_DMABUF_ENABLE", 1) == 0:
        off.append("NCCL_DMABUF_ENABLE=0")
    if facts.kernel is not None and facts.kernel < DMABUF_KERNEL:
        off.append(f"kernel {facts.kernel[0]}.{facts.kernel[1]} < 5.12 has no "
                   "ibv_reg_dmabuf_mr")
    if facts.flavour == "proprietary":
        off.append("the proprietary NVIDIA kernel module gives no DMA-BUF")
    if not facts.modules_known:
        return GdrSupport("unknown", "no /sys/module in this tree: the peer-memory module "
                          "is unknown")
    if off:
        return GdrSupport("none", "no peer-memory module (/sys/module/nvidia_peermem) and "
                          f"no DMA-BUF path ({'; '.join(off)})")
    if facts.kernel is None or facts.flavour is None:
        return GdrSupport("unknown", "no peer-memory module; DMA-BUF depends on the "
                          f"{'kernel release' if facts.kernel is None else 'module flavour'}"
                          ", which cannot be read")
    return GdrSupport("dmabuf", "no peer-memory module; DMA-BUF: kernel "
                      f"{facts.kernel[0]}.{facts.kernel[1]} and the open NVIDIA module "
                      "(CUDA's DMA_BUF_SUPPORTED; each NIC's driver must pass NCCL's trial "
                      "ibv_reg_dmabuf_mr: mlx5 does)")


def gpu_without_gdr(model: Optional[str], device: Optional[int]) -> Optional[str]:
    """Why CUDA reports no GPUDirect RDMA for a GPU of this model name and PCI device
    id (:data:`NO_GDR_GPUS`), or None (pure)."""
    words = (model or "").split()
    for dev, word, why, source in NO_GDR_GPUS:
        if (dev is not None and device == dev) or word in words:
            return f"{why} ({source})"
    return None


def nic_dmabuf(driver: Optional[str]) -> bool:
    """Whether a NIC of this PCI driver passes NCCL's trial DMA-BUF registration on a
    kernel that has it (:data:`DMABUF_DRIVERS`; False: unknown, pure)."""
    return driver in DMABUF_DRIVERS


def gpu_facts(gpus: Iterable[Gpu]) -> tuple[tuple[str, Optional[str], Optional[int]], ...]:
    """:attr:`GdrFacts.gpus` of the GPUs placement read: each NVIDIA GPU's (PCI address,
    model, PCI device id)."""
    return tuple((g.address, g.model, g.pci.device) for g in gpus if g.vendor == "nvidia")


def gdr_level(environ: Mapping[str, str]) -> tuple[str, str]:
    """The farthest path type with GDR (``ncclTopoCheckGdr``'s ``netGdrLevel``), and
    whence."""
    text = environ.get("NCCL_NET_GDR_LEVEL")
    if text is not None:
        if text in PATH_TYPES:
            return text, f"NCCL_NET_GDR_LEVEL={text}"
        if text[:1].isdigit():
            old = load_param({"v": text}, "v", 0)
            return OLD_LEVELS[min(max(old, 0), len(OLD_LEVELS) - 1)], \
                f"NCCL_NET_GDR_LEVEL={text}"
    c2c = load_param(environ, "NCCL_NET_GDR_C2C", 1)
    return ("P2C" if c2c else "PXB"), f"NCCL_NET_GDR_LEVEL unset, NCCL_NET_GDR_C2C={c2c}"


def gdr_allowed(path: str, level: str) -> bool:
    """``distance <= netGdrLevel`` (pure)."""
    return PATH_TYPES.index(path) <= PATH_TYPES.index(level)


def _c2c(host: Topology, gpu: object) -> bool:
    """The GPU hangs directly below a Grace/Vera root port: a superchip's GPU, linked to
    that CPU by C2C (NCCL learns it from NVML; sysfs shows the root port)."""
    pci = getattr(gpu, "pci", None)
    if pci is None or not pci.bridges:
        return False
    rp = host.pci.get(pci.bridges[-1])
    return rp is not None and rp.vendor == NVIDIA and rp.device in GRACE_ROOT_PORTS




def pair_verdict(support: GdrSupport, gpu_lacks: Optional[str], path: Optional[str],
                 level: str, whence: str, device: str, driver: Optional[str]
                 ) -> tuple[Optional[bool], Optional[str], str]:
    """Would NCCL use GDR between a GPU and one NIC (None: undecided), the finding when it
    would not (``gdr_unavailable``: no peer-memory module nor DMA-BUF, or the GPU's own
    lack; ``gdr_disabled_by_distance``: only the path is beyond the level), and why, in
    NCCL's order: the NIC's support, the GPU's, then the distance (paths.cc:485-535);
    the DMA-BUF trial of a NIC whose ``driver`` is not one of :data:`DMABUF_DRIVERS` is
    NCCL's to make (pure)."""
    if support.state in ("n/a", "none"):
        if support.state == "none":
            return False, "gdr_unavailable", support.reason
        return None, None, support.reason
    if gpu_lacks is not None:
        return False, "gdr_unavailable", f"the GPU has no GPUDirect RDMA: {gpu_lacks}"
    if path is None:
        return None, None, "the GPU-NIC path is unknown"
    near = gdr_allowed(path, level)
    why = (f"path {path}{' (C2C GPU, NIC on its CPU)' if path == 'P2C' else ''} "
           f"{'within' if near else 'beyond'} the GDR level {level} ({whence})")
    if not near:  # beyond the level GDR is off whatever the support
        return False, "gdr_disabled_by_distance", why
    if support.state == "unknown":
        return None, None, why
    if support.state == "dmabuf" and not nic_dmabuf(driver):
        return None, None, (f"{why}; unknown: NCCL decides by a trial ibv_reg_dmabuf_mr on "
                            f"{device} at run time (its PCI driver {driver or 'is unknown'}"
                            f"{'' if driver is None else ' is not one known to register DMA-BUF'})")
    return True, None, why


def gdr_pairs(host: Topology, assignments: Iterable[Assignment], support: GdrSupport,
              environ: Mapping[str, str]) -> tuple[GdrPair, ...]:
    """Each NVIDIA GPU and each NIC port placement gives it: would NCCL use GDR."""
    level, whence = gdr_level(environ)
    out: list[GdrPair] = []
    for a in assignments:
        g = a.gpu
        if g is None or g.vendor != "nvidia":
            continue
        c2c = _c2c(host, g)
        lacks = gpu_without_gdr(g.model, g.pci.device)
        for n in a.nics:
            path = "P2C" if c2c and n.nccl == "PHB" else n.nccl
            pci = host.pci.get(n.address) if n.address is not None else None
            verdict = pair_verdict(support, lacks, path, level, whence, n.device,
                                   pci.driver if pci is not None else None)
            out.append(GdrPair(g.index, g.address, n.device, n.port, path, level, *verdict))
    return tuple(out)


def gdr_findings(support: GdrSupport, pairs: Iterable[GdrPair]) -> list[tuple[str, str]]:
    """(code, message) of each finding: ``gdr_unavailable`` once for the host, or one
    ``gdr_disabled_by_distance`` per GPU and NIC port beyond the level and one
    ``gdr_unavailable`` per GPU and NIC port off for the GPU's own lack (a host whose
    other GPUs can)."""
    if support.code is not None:
        return [(support.code, f"NCCL would not use GPUDirect RDMA: {support.reason}. "
                 "Load nvidia_peermem (modprobe nvidia_peermem), or use the open NVIDIA "
                 "kernel module on Linux >= 5.12 with NCCL_DMABUF_ENABLE unset; a GPU "
                 "whose CUDA reports no GPUDirect RDMA has neither: NCCL stages through "
                 "host memory")]
    out: list[tuple[str, str]] = []
    for p in pairs:
        if p.code is None:
            continue
        head = f"GPU{p.gpu} ({p.pci_bus_id}) -> {p.device}:{p.port}: {p.reason}"
        if p.code == "gdr_unavailable":
            out.append(("gdr_unavailable", f"{head}, so NCCL stages this GPU's transfers "
                        "through host memory (no GPUDirect RDMA)"))
        else:
            out.append(("gdr_disabled_by_distance",
                        f"{head}, so NCCL stages this NIC's transfers through host memory "
                        "(no GPUDirect RDMA). Give the rank a NIC nearer its GPU, or set "
                        f"NCCL_NET_GDR_LEVEL={p.path} if this path is fast enough"))
    return out

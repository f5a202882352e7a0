"""The hardware :class:`~sysverbs.testing.HostBuilder` knows: adapter and GPU models
by short name, each driver's row of :data:`DRIVERS`, and the options its device
methods take."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional, TypedDict, Union

from .layout import ETH_CLASS, IB_CLASS, Value

__all__ = ["PciModel", "MLX5_MODELS", "MLX4_MODELS", "EFA_MODELS", "PciRdmaOptions",
           "DeviceOptions", "DEVICE_OPTION_NAMES", "Driver", "DRIVERS", "GpuModel",
           "GPU_MODELS"]


@dataclass(frozen=True)
class PciModel:
    """PCI ids of one adapter model (and of its virtual functions)."""

    device: int
    vf_device: Optional[int]
    name: str


#: mlx5 models by short name: PCI device id, VF device id, marketing name.
MLX5_MODELS: Mapping[str, PciModel] = {
    "cx4": PciModel(0x1013, 0x1014, "ConnectX-4"),
    "cx4lx": PciModel(0x1015, 0x1016, "ConnectX-4 Lx"),
    "cx5": PciModel(0x1017, 0x1018, "ConnectX-5"),
    "cx6": PciModel(0x101B, 0x101C, "ConnectX-6"),
    "cx6dx": PciModel(0x101D, 0x101E, "ConnectX-6 Dx"),
    "cx6lx": PciModel(0x101F, 0x101E, "ConnectX-6 Lx"),
    "cx7": PciModel(0x1021, 0x101E, "ConnectX-7"),
    "bf3": PciModel(0xA2DC, 0x101E, "BlueField-3"),
    # 15b3:1023 as rdma-core's kernel-boot/rdma_topo names it; its VF id is a choice (the
    # mlx5Gen VF of the CX-7 row: no capture of a CX-8 VF's id was found)
    "cx8": PciModel(0x1023, 0x101E, "ConnectX-8"),
}
MLX4_MODELS: Mapping[str, PciModel] = {
    "cx3": PciModel(0x1003, 0x1004, "ConnectX-3"),
    "cx3pro": PciModel(0x1007, 0x1004, "ConnectX-3 Pro"),
}
EFA_MODELS: Mapping[str, PciModel] = {
    "efa0": PciModel(0xEFA0, None, "EFA"),
    "efa1": PciModel(0xEFA1, None, "EFA"),
    "efa2": PciModel(0xEFA2, None, "EFA"),
}


class PciRdmaOptions(TypedDict, total=False):
    """:class:`DeviceOptions` but ``name`` (which :meth:`HostBuilder.pci_rdma` takes
    as an argument)."""

    uverbs: Optional[int]  # the N of uverbsN (default: the next free one)
    verbs: bool  # False: no uverbs device (like an XDR smi device)
    abi_version: Value  # the uverbs abi_version file
    node_type: Value  # 1..7 or any Value (raw bytes for broken files)
    node_guid: Union[int, Value]  # an int, a raw value; None: a made-up one
    dev_node: bool  # False: no /dev/infiniband/uverbsN
    ib_attrs: Optional[Mapping[str, Value]]  # more or replaced files of the ib device
    uverbs_attrs: Optional[Mapping[str, Value]]  # ... of the uverbs device


class DeviceOptions(PciRdmaOptions, total=False):
    """The options every device method of :class:`HostBuilder` takes; a missing one
    is the driver's default (its row of :data:`DRIVERS`)."""

    name: Optional[str]  # the IB device name (default: the driver's own naming)


DEVICE_OPTION_NAMES = frozenset(DeviceOptions.__annotations__)


@dataclass(frozen=True)
class Driver:
    """How one driver's RDMA devices look: a row of :data:`DRIVERS`."""

    driver: str  # the IB driver (FakeDevice.driver)
    name: str  # the default IB device name, formatted with index, bus and ifname
    abi_version: int  # the driver's uverbs ABI (include/uapi/rdma/*-abi.h)
    node_type: int
    fw_ver: str
    link_layer: str
    guid_base: Optional[int]  # made-up node GUIDs: base + a sequence number
    node_guid: Union[int, Value] = None  # the default node_guid (None: made up)
    #: vendor, device, sub vendor, sub device (None: the device id), class, PCI driver
    pci: Optional[tuple[int, int, int, Optional[int], int, str]] = None
    aux: Optional[tuple[str, str]] = None  # the auxiliary device: name (with index), driver
    ib_files: tuple[tuple[str, str], ...] = ()  # more ib device files (with device)


#: Every driver HostBuilder lays out, by the key its methods use.
DRIVERS: Mapping[str, Driver] = {
    "mlx5": Driver("mlx5", "mlx5_{index}", 1, 1, "20.39.1002", "InfiniBand",
                   0xB8599F0300A20000,
                   pci=(0x15B3, 0x101B, 0x15B3, 0x0007, IB_CLASS, "mlx5_core"),
                   aux=("mlx5_core.rdma.{index}", "mlx5_ib.rdma"),
                   ib_files=(("hca_type", "MT{device}"), ("board_id", "MT_0000000222"),
                             ("hw_rev", "0x0"))),
    "mlx5-sf": Driver("mlx5", "mlx5_{index}", 1, 1, "32.43.1014", "Ethernet",
                      0x02AC5D0300000000, aux=("mlx5_core.rdma.{index}", "mlx5_ib.rdma"),
                      ib_files=(("hca_type", "MT41692"), ("hw_rev", "0x0"))),
    "mlx5-bond": Driver("mlx5", "mlx5_bond_{index}", 1, 1, "28.43.1014", "Ethernet",
                        0xB8599F0300B10000,
                        ib_files=(("hca_type", "MT{device}"), ("hw_rev", "0x0"))),
    "mlx4": Driver("mlx4", "mlx4_{index}", 4, 1, "2.42.5000", "InfiniBand", 0x0002C90300A10000,
                   pci=(0x15B3, 0x1003, 0x15B3, 0x0006, IB_CLASS, "mlx4_core"),
                   ib_files=(("hca_type", "MT{device}"), ("board_id", "MT_1090120019"))),
    "efa": Driver("efa", "rdmap{bus}s0", 1, 7, "0.0.0.0", "Unspecified", None, node_guid=0,
                  pci=(0x1D0F, 0xEFA1, 0x1D0F, None, ETH_CLASS, "efa")),
    "irdma": Driver("irdma", "irdma{index}", 5, 1, "1.71", "Ethernet", 0xB49691FFFED27E00,
                    pci=(0x8086, 0x1593, 0x8086, 0x0002, ETH_CLASS, "ice"),
                    aux=("ice.roce.{index}", "irdma")),
    "irdma-iwarp": Driver("irdma", "irdma{index}", 5, 4, "1.71", "Ethernet", 0xB49691FFFED27E00,
                          pci=(0x8086, 0x1593, 0x8086, 0x0002, ETH_CLASS, "ice"),
                          aux=("ice.iwarp.{index}", "irdma")),
    "bnxt_re": Driver("bnxt_re", "bnxt_re{index}", 1, 1, "227.0.131.0", "Ethernet",
                      0x0A0B0CFFFE0D0000,
                      pci=(0x14E4, 0x16D7, 0x14E4, 0x1402, ETH_CLASS, "bnxt_en"),
                      aux=("bnxt_en.rdma.{index}", "bnxt_re")),
    "rxe": Driver("rxe", "rxe{index}", 2, 1, "", "Ethernet", None),
    "siw": Driver("siw", "siw_{ifname}", 1, 4, "0.0.0", "Ethernet", 0x5254006500000000),
}


@dataclass(frozen=True)
class GpuModel:
    """PCI identity of one GPU model, and what the NVIDIA driver's /proc file says."""

    vendor: int
    device: int
    sub_device: int
    pci_class: int
    driver: str
    name: str
    vbios: str = "??.??.??.??.??"
    link: tuple[str, int] = ("16.0 GT/s PCIe", 16)


#: GPU models by short name (ids as ``lspci -nn`` shows them on the real machines).
GPU_MODELS: Mapping[str, GpuModel] = {
    "a100": GpuModel(0x10DE, 0x20B0, 0x134F, 0x030200, "nvidia", "NVIDIA A100-SXM4-40GB",
                     "92.00.36.00.02"),
    "a100-80g": GpuModel(0x10DE, 0x20B2, 0x1463, 0x030200, "nvidia", "NVIDIA A100-SXM4-80GB",
                         "92.00.45.00.03"),
    "h100": GpuModel(0x10DE, 0x2330, 0x16C1, 0x030200, "nvidia", "NVIDIA H100 80GB HBM3",
                     "96.00.74.00.0B", ("32.0 GT/s PCIe", 16)),
    "h100-pcie": GpuModel(0x10DE, 0x2331, 0x1626, 0x030200, "nvidia", "NVIDIA H100 PCIe",
                          "96.00.30.00.01", ("32.0 GT/s PCIe", 16)),
    "h200": GpuModel(0x10DE, 0x2335, 0x18BE, 0x030200, "nvidia", "NVIDIA H200",
                     "96.00.99.00.01", ("32.0 GT/s PCIe", 16)),
    "b200": GpuModel(0x10DE, 0x2901, 0x1999, 0x030200, "nvidia", "NVIDIA B200",
                     "97.00.4B.00.01", ("32.0 GT/s PCIe", 16)),
    "l40s": GpuModel(0x10DE, 0x26B9, 0x1851, 0x030200, "nvidia", "NVIDIA L40S",
                     "95.02.66.00.02"),
    "rtx6000ada": GpuModel(0x10DE, 0x26B1, 0x16A1, 0x030000, "nvidia",
                           "NVIDIA RTX 6000 Ada Generation", "95.02.5D.00.03"),
    # Grace superchips' GPUs (docs/placement.md, "Grace and Data Direct"): ids and
    # subsystems from lspci on a GH200 and in NVIDIA's GPU Operator docs (GB200), the GB300
    # from an NCCL topology dump (64 GT/s x16); the other links and VBIOS are a choice.
    "gh200": GpuModel(0x10DE, 0x2342, 0x16EB, 0x030200, "nvidia", "NVIDIA GH200 480GB",
                      link=("32.0 GT/s PCIe", 16)),
    "gb200": GpuModel(0x10DE, 0x2941, 0x2046, 0x030200, "nvidia", "NVIDIA GB200",
                      link=("32.0 GT/s PCIe", 16)),
    "gb300": GpuModel(0x10DE, 0x31C2, 0x21F1, 0x030200, "nvidia", "NVIDIA GB300",
                      link=("64.0 GT/s PCIe", 16)),
    "mi300x": GpuModel(0x1002, 0x74A1, 0x74A1, 0x120000, "amdgpu", "AMD Instinct MI300X",
                       link=("32.0 GT/s PCIe", 16)),
}

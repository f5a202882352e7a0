"""What a source (sysfs, netlink, udev) reports about one uverbs device, before matching."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .enums import NodeType

__all__ = ["DeviceRecord"]


@dataclass
class DeviceRecord:
    """libibverbs' ``struct verbs_sysfs_dev``.  Names and paths are bytes, as in C."""

    dev_name: bytes  # the uverbs entry name, e.g. b"uverbs0"
    ibdev_name: bytes  # the IB device name, e.g. b"mlx5_0" (may be empty)
    ibdev_path: bytes  # <S>/class/infiniband/<ibdev_name>
    sysfs_root: bytes  # <S>, used to build dev_path
    cdev: tuple[int, int]  # (major, minor) of the char device
    abi_ver: int  # per-device uverbs ABI, unsigned 32-bit
    node_type: NodeType
    time_created_ns: int  # st_mtime in ns of ibdev_path (sysfs mode identity)
    ibdev_idx: int = -1  # kernel index in netlink mode, -1 in sysfs mode
    driver_id: int = 0  # RDMA_DRIVER_UNKNOWN unless the kernel said (netlink)
    node_guid: Optional[int] = None  # pre-cached GUID (netlink mode)
    modalias: Optional[bytes] = field(default=None, repr=False)  # cache for matching
    modalias_read: bool = field(default=False, repr=False)

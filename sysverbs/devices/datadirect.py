"""The ConnectX-8 Data Direct DMA function of an RDMA device, from the kernel: the mlx5
uverbs method ``MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH`` (Linux 6.12), issued with
``fcntl.ioctl`` on the device's ``uverbsN`` character device; no rdma-core.

The method needs a user context on the file, so :func:`data_direct_path` first sends
``UVERBS_METHOD_GET_CONTEXT`` (with mlx5's ``alloc_ucontext`` request, as libmlx5
sends it), then the method; closing the file frees the context.  The kernel answers the
DMA function's kobject path (``devices/pci0009:00/.../0009:03:00.0``: the caller adds
``/sys``), ``ENODEV`` when the device has no DMA function, ``ENOSPC`` for a short
buffer; a kernel or driver without the method answers ``EPROTONOSUPPORT`` (rxe, siw,
mlx5 before 6.12).  Every failure is an :class:`OSError` with the kernel's errno.

The layout below is data: each value with the uAPI header line it comes from, in
linux-libc-dev 6.12.95-1~bpo12+1 (``/usr/include/rdma/``; the same lines are in
rdma-core's ``kernel-headers/rdma/`` at 691953d8).  Debian 12's own headers (6.1) have
all of them but the two Data Direct ids.
"""

from __future__ import annotations

import array
import errno
import fcntl
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["ATTR", "DATA_DIRECT_ATTR", "DATA_DIRECT_METHOD", "GET_CONTEXT_METHOD", "HEADER",
           "IDS", "RDMA_VERBS_IOCTL", "data_direct_path", "get_context_request",
           "data_direct_request", "request", "uverbs_device"]

#: (field, struct format) of ``struct ib_uverbs_ioctl_hdr``, rdma_user_ioctl_cmds.h
#: lines 76-85 (24 bytes; ``attrs[]`` follows).
HEADER = (("length", "H"), ("object_id", "H"), ("method_id", "H"), ("num_attrs", "H"),
          ("reserved1", "Q"), ("driver_id", "I"), ("reserved2", "I"))
#: (field, struct format) of ``struct ib_uverbs_attr``, rdma_user_ioctl_cmds.h lines
#: 54-74 (16 bytes: ``attr_data`` is a 2-byte union, ``data`` an aligned u64).
ATTR = (("attr_id", "H"), ("len", "H"), ("flags", "H"), ("attr_data", "H"), ("data", "Q"))
#: The ids, each with its header line.
IDS = {
    # rdma_user_ioctl_cmds.h 40-42: _IOWR(RDMA_IOCTL_MAGIC 0x1b, 1, the 24-byte header)
    "RDMA_VERBS_IOCTL": 0xC0181B01,
    # ib_user_ioctl_cmds.h 38: UVERBS_ID_NS_SHIFT 12 (a driver's ids start at 1 << 12)
    "UVERBS_ID_DRIVER_NS": 1 << 12,
    # ib_user_ioctl_cmds.h 41: enum uverbs_default_objects, first
    "UVERBS_OBJECT_DEVICE": 0,
    # ib_user_ioctl_cmds.h 71: enum uverbs_methods_device, the fourth
    "UVERBS_METHOD_GET_CONTEXT": 3,
    # ib_user_ioctl_cmds.h 62-63: UVERBS_ATTR_UHW_IN = UVERBS_ID_DRIVER_NS, then UHW_OUT
    "UVERBS_ATTR_UHW_IN": 1 << 12,
    "UVERBS_ATTR_UHW_OUT": (1 << 12) + 1,
    # ib_user_ioctl_verbs.h 235-255: enum rdma_driver_id, RDMA_DRIVER_MLX5 (237, after
    # UNKNOWN), RDMA_DRIVER_RXE (251), RDMA_DRIVER_SIW (255).  The kernel refuses a
    # request whose driver_id is not its device's driver's with EINVAL
    # (uverbs_ioctl.c, ib_uverbs_cmd_verbs)
    "RDMA_DRIVER_MLX5": 1,
    "RDMA_DRIVER_RXE": 14,
    "RDMA_DRIVER_SIW": 18,
    # mlx5_user_ioctl_cmds.h 350-351: enum mlx5_ib_device_methods, QUERY_PORT = 1 << 12,
    # then GET_DATA_DIRECT_SYSFS_PATH
    "MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH": (1 << 12) + 1,
    # mlx5_user_ioctl_cmds.h 360: its one attribute, 1 << UVERBS_ID_NS_SHIFT
    "MLX5_IB_ATTR_GET_DATA_DIRECT_SYSFS_PATH": 1 << 12,
    # mlx5-abi.h 83-84: MLX5_LIB_CAP_4K_UAR 1 << 0, MLX5_LIB_CAP_DYN_UAR 1 << 1
    "MLX5_LIB_CAPS": 0x3,
}
RDMA_VERBS_IOCTL = IDS["RDMA_VERBS_IOCTL"]
GET_CONTEXT_METHOD = IDS["UVERBS_METHOD_GET_CONTEXT"]
DATA_DIRECT_METHOD = IDS["MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH"]
DATA_DIRECT_ATTR = IDS["MLX5_IB_ATTR_GET_DATA_DIRECT_SYSFS_PATH"]
#: ``struct mlx5_ib_alloc_ucontext_req_v2``, mlx5-abi.h lines 90-100 (32 bytes):
#: total_num_bfregs, num_low_latency_bfregs, flags, comp_mask, max_cqe_version,
#: reserved0, reserved1, reserved2, lib_caps.
MLX5_UCONTEXT_REQ = "<IIIIBBHIQ"
#: libmlx5's defaults (providers/mlx5/mlx5.c: 16 bfregs, 4 of them low latency, CQE
#: version 1, 4K and dynamic UARs).
MLX5_UCONTEXT_DEFAULTS = (16, 4, 0, 0, 1, 0, 0, 0, IDS["MLX5_LIB_CAPS"])
_HDR = "<" + "".join(f for _, f in HEADER)
_ATTR = "<" + "".join(f for _, f in ATTR)
PATH_MAX = 4096  # the kernel's kobject path fits PATH_MAX


def request(object_id: int, method_id: int, attrs: Sequence[tuple[int, int, int]],
            driver_id: int = 0) -> bytes:
    """The bytes of one ``RDMA_VERBS_IOCTL`` request: the header, then each attribute
    ``(attr_id, len, data)`` (data: a pointer, or up to 8 bytes inline), flags 0."""
    length = struct.calcsize(_HDR) + struct.calcsize(_ATTR) * len(attrs)
    head = struct.pack(_HDR, length, object_id, method_id, len(attrs), 0, driver_id, 0)
    return head + b"".join(struct.pack(_ATTR, a, n, 0, 0, d) for a, n, d in attrs)


def get_context_request(uhw_in: int, uhw_out: int, out_len: int,
                        driver_id: int = IDS["RDMA_DRIVER_MLX5"]) -> bytes:
    """``UVERBS_METHOD_GET_CONTEXT`` on the device object for a device of driver
    ``driver_id``: for mlx5, mlx5's request at address ``uhw_in`` and a response buffer
    of ``out_len`` bytes at ``uhw_out`` (the driver's UHW attributes); for the others
    none (rxe, siw take none)."""
    attrs = [] if driver_id != IDS["RDMA_DRIVER_MLX5"] else [
        (IDS["UVERBS_ATTR_UHW_IN"], struct.calcsize(MLX5_UCONTEXT_REQ), uhw_in),
        (IDS["UVERBS_ATTR_UHW_OUT"], out_len, uhw_out)]
    return request(IDS["UVERBS_OBJECT_DEVICE"], GET_CONTEXT_METHOD, attrs, driver_id)


def data_direct_request(buf: int, buf_len: int,
                        driver_id: int = IDS["RDMA_DRIVER_MLX5"]) -> bytes:
    """``MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH``: its one output attribute, the
    path buffer at address ``buf`` (as libmlx5's ``mlx5dv_get_data_direct_sysfs_path``
    fills it)."""
    return request(IDS["UVERBS_OBJECT_DEVICE"], DATA_DIRECT_METHOD,
                   [(DATA_DIRECT_ATTR, buf_len, buf)], driver_id)


def _address(buf: array.array[int]) -> int:
    address: int = buf.buffer_info()[0]
    return address


def _call(fd: int, req: bytes, step: str) -> None:
    try:
        fcntl.ioctl(fd, RDMA_VERBS_IOCTL, bytearray(req), True)
    except OSError as e:  # the kernel's errno, and which request it answered
        raise OSError(e.errno, f"{e.strerror} (answering {step})") from None


def data_direct_path(node: str, driver_id: int = IDS["RDMA_DRIVER_MLX5"]) -> str:
    """The sysfs path (``/sys`` + the kernel's answer) of the Data Direct DMA function
    of the RDMA device whose uverbs character device is ``node``
    (``/dev/infiniband/uverbsN``), whose driver is ``driver_id`` (the kernel refuses
    another's with ``EINVAL``; only mlx5 has the method, the others answer
    ``EPROTONOSUPPORT``).  :class:`OSError` with the kernel's errno
    otherwise: ``ENODEV`` (no DMA function), ``EPROTONOSUPPORT`` (no such method:
    another driver, or a kernel before 6.12), ``EACCES`` (the node's mode)..."""
    fd = os.open(node, os.O_RDWR | os.O_CLOEXEC)
    try:
        req = array.array("B", struct.pack(MLX5_UCONTEXT_REQ, *MLX5_UCONTEXT_DEFAULTS))
        resp = array.array("B", bytes(512))
        _call(fd, get_context_request(_address(req), _address(resp), len(resp), driver_id),
              "UVERBS_METHOD_GET_CONTEXT")
        out = array.array("B", bytes(PATH_MAX))
        _call(fd, data_direct_request(_address(out), len(out), driver_id),
              "MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH")
    finally:
        os.close(fd)
    path = out.tobytes().split(b"\0", 1)[0].decode("utf-8", "replace")
    if not path:
        raise OSError(errno.ENODEV, "the kernel answered an empty path")
    return "/sys/" + path.lstrip("/")


def uverbs_device(sysfs: str, ibdev: str) -> str:
    """The ``uverbsN`` name of RDMA device ``ibdev``: the ``class/infiniband_verbs/``
    entry whose ``ibdev`` file names it, as libibverbs finds it (a soft device such as
    rxe has no ``device`` link to look below); :class:`OSError` ``ENODEV`` when none."""
    base = os.path.join(sysfs, "class", "infiniband_verbs")
    try:
        names = sorted(n for n in os.listdir(base) if n.startswith("uverbs"))
    except OSError as e:
        raise OSError(errno.ENODEV, f"{ibdev} has no uverbs device ({e.strerror})") from None
    for name in names:
        try:
            with open(os.path.join(base, name, "ibdev"), encoding="utf-8") as f:
                if f.read(256).strip() == ibdev:
                    return name
        except OSError:
            continue
    raise OSError(errno.ENODEV, f"{ibdev} has no uverbs device")

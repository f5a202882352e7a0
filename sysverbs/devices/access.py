"""What keeps a process from a device the kernel has: the device cgroup
(``device_cgroup_denied``) and the RDMA subsystem's network namespaces
(``netns_exclusive``).  (``no_ipc_lock``, the third access finding, is a memlock rule:
``memlock.py``.)

* ``device_cgroup_denied``: the ``/dev/infiniband/uverbsN`` node is there, the right
  char device, readable and writable by this user, and ``open`` fails with EPERM: the
  kernel's device cgroup (cgroup v1's ``devices.deny``, or v2's BPF_CGROUP_DEVICE
  program a container runtime attaches) refuses it.  Nothing else gives EPERM there:
  modes, ACLs and ``nodev`` mounts give EACCES.
* ``netns_exclusive``: the RDMA subsystem is in exclusive network-namespace mode
  (``rdma system set netns exclusive``; RDMA netlink's ``RDMA_NLDEV_SYS_ATTR_NETNS_MODE``
  is 0) and a device this process's ``/sys`` shows is not in its network namespace (the
  RDMA netlink dump, which lists only this namespace's devices, lacks it): libibverbs in
  netlink mode and librdmacm do not see it.  Move it (``rdma dev set DEV netns NS``) or
  run in its namespace.

:func:`netns_finding` and :func:`cgroup_denied` are pure; :func:`netns_state` asks the
kernel.
"""

from __future__ import annotations

import os
import time
from typing import Optional

__all__ = ["CODES", "NETNS_MODE_ATTR", "access_errno", "cgroup_denied",
           "cgroup_denied_here", "netns_away", "netns_finding", "netns_state", "own_cgroup"]

#: The codes of this module and memlock.py's ``no_ipc_lock``, for diagnosis' CODES.
CODES: dict[str, tuple[str, str]] = {
    "device_cgroup_denied": ("error", "the device cgroup refuses the /dev node (open: EPERM)"),
    "no_ipc_lock": ("warning", "root without CAP_IPC_LOCK: registrations count against a "
                    "finite RLIMIT_MEMLOCK, and libibverbs does not warn"),
    "netns_exclusive": ("warning", "RDMA netns mode exclusive: a device /sys shows is in "
                        "another network namespace"),
}
#: ``RDMA_NLDEV_SYS_ATTR_NETNS_MODE`` (u8: 1 shared, 0 exclusive).
NETNS_MODE_ATTR = 66


def own_cgroup(proc_text: Optional[str]) -> str:
    """This process's cgroup, as ``/proc/self/cgroup`` names it (the ``devices``
    controller's line on cgroup v1, the unified one on v2), or ``?``."""
    lines = [ln.split(":", 2) for ln in (proc_text or "").splitlines()]
    for parts in lines:
        if len(parts) == 3 and "devices" in parts[1].split(","):
            return f"{parts[2]} (cgroup v1 devices)"
    for parts in lines:
        if len(parts) == 3 and parts[0] == "0" and parts[1] == "":
            return f"{parts[2]} (cgroup v2: a BPF_CGROUP_DEVICE program)"
    return "?"


def cgroup_denied(node: str, major: int, minor: int, proc_cgroup: Optional[str]
                  ) -> tuple[str, str]:
    """``(code, message)`` for a node whose ``open`` gave EPERM."""
    return ("device_cgroup_denied",
            f"Opening {node} (char {major}:{minor}) failed with EPERM although the node and "
            "its mode are right: the device cgroup of this process's cgroup "
            f"{own_cgroup(proc_cgroup)} refuses it. Allow it (docker "
            f"--device-cgroup-rule='c {major}:* rwm' or --device={node}; Kubernetes: an "
            "RDMA device plugin; cgroup v1: echo 'c "
            f"{major}:* rwm' > devices.allow).")


def netns_finding(mode: Optional[int], sysfs_names: list[str],
                  netlink_names: Optional[list[str]]) -> dict[str, tuple[str, str]]:
    """``{name: (code, message)}`` for each device of ``sysfs_names`` (what this process's
    ``/sys`` shows) missing from ``netlink_names`` (the RDMA netlink dump: this network
    namespace's devices) when ``mode`` is 0 (exclusive); none in shared mode, or when
    the kernel did not answer (None)."""
    if mode != 0 or netlink_names is None:
        return {}
    here = set(netlink_names)
    return {name: ("netns_exclusive",
             f"{name} is in another network namespace: the RDMA subsystem is in exclusive "
             "netns mode (rdma system show) and this process's namespace has no such "
             "device, so libibverbs (netlink) and librdmacm do not list it although /sys "
             f"shows it. Move it (rdma dev set {name} netns NS) or run in its namespace.")
            for name in sysfs_names if name not in here}


def netns_state() -> tuple[Optional[int], Optional[list[str]]]:
    """The kernel's RDMA netns mode (1 shared, 0 exclusive) and the names of the RDMA
    devices in this network namespace, over RDMA netlink; (None, None) when it cannot
    answer (no socket, an old kernel)."""
    from ..ground.errors import SourceUnavailable
    from ..sources.netlink import open_netlink
    from ..sources.netlink.wire import (
        ATTR_DEV_NAME,
        NL_OK,
        NLE_RANGE,
        TYPE_SYS_GET,
        dump_request,
        nlmsg,
        parse_attrs,
        send_request,
    )

    try:
        t = open_netlink()
    except SourceUnavailable:
        return None, None
    mode: list[int] = []
    names: list[str] = []

    def sys_cb(msg: bytes) -> int:
        tb = parse_attrs(msg)
        if tb is None:
            return -NLE_RANGE
        if NETNS_MODE_ATTR in tb:
            mode.append(tb.u8(NETNS_MODE_ATTR))
        return NL_OK

    def dump_cb(msg: bytes) -> int:
        tb = parse_attrs(msg)
        if tb is not None and ATTR_DEV_NAME in tb:
            names.append(tb.string(ATTR_DEV_NAME).decode("utf-8", "surrogateescape"))
        return NL_OK

    try:
        port = getattr(t, "port", 0)
        seq = int(time.time()) & 0xFFFFFFFF
        if send_request(t, nlmsg(TYPE_SYS_GET, 0, seq, port), sys_cb) is not None or not mode:
            return None, None
        if send_request(t, dump_request(seq + 1, port), dump_cb) is not None:
            return mode[0], None
        return mode[0], names
    finally:
        t.close()


def cgroup_denied_here(node: str, major: int, minor: int) -> tuple[str, str]:
    """:func:`cgroup_denied` with this process's ``/proc/self/cgroup``."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as f:
            text: Optional[str] = f.read(65536)
    except OSError:
        text = None
    return cgroup_denied(node, major, minor, text)


def netns_away(sysfs_root: bytes, source: str, names: list[bytes]
               ) -> dict[bytes, tuple[str, str]]:
    """The ``netns_exclusive`` finding of each device of ``names`` (this ``/sys``'s
    devices that no source listed) that is in another network namespace, when the
    listing may come from RDMA netlink (``source`` ``auto`` or ``netlink``) and the
    sysfs root is the live ``/sys``; {} otherwise (a tree is not this kernel's)."""
    if source not in ("auto", "netlink") or sysfs_root != b"/sys" or not names:
        return {}
    mode, here = netns_state()
    text = [n.decode("utf-8", "surrogateescape") for n in names]
    return {name.encode("utf-8", "surrogateescape"): found
            for name, found in netns_finding(mode, text, here).items()}


def access_errno(path: bytes) -> int:
    """The errno of ``faccessat(path, R_OK|W_OK, AT_EACCESS)`` (0: allowed): EPERM is the
    device cgroup (modes and ACLs give EACCES)."""
    import ctypes
    import errno

    from ..ground.inputs import opaque

    opaque("the device cgroup's answer")  # not recorded
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ret = libc.faccessat(-100, path, os.R_OK | os.W_OK, 0x200)  # AT_FDCWD, AT_EACCESS
    except (OSError, AttributeError, ValueError):
        return errno.EACCES
    return ctypes.get_errno() if ret != 0 else 0

"""The NCCL releases modelled, and the releases where one of the rules that
:mod:`sysverbs.rank.nccl` follows changed (docs/nccl.md).

:func:`parse_version` reads the ``nccl_version=`` every function takes; the ``V_*``
constants are the first release of each rule, compared with ``>=``."""

from __future__ import annotations

from ..ground.errors import UsageError, WrongTypeError

# no typing at run time (rank/environment.py says why): VersionArg is for annotations
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Union

    VersionArg = Union[None, str, int, "tuple[int, ...]"]

__all__ = [
    "MAX_IB_DEVS",
    "Version",
    "LATEST",
    "V_STRTOK_PARSER",
    "V_MERGED_IN_INIT",
    "V_PCI_ORDER",
    "V_NO_DEVICE_USING",
    "V_CONF_FILE_ENV",
    "V_CONF_COMMENTS",
    "V_CONF_FGETS",
    "V_OLDEST",
    "V_32_DEVS",
    "V_RO",
    "V_LINE_2048",
    "V_MERGE_RETRY",
    "V_PLANE_TEXT",
    "parse_version",
    "max_ib_devs",
]

#: ``MAX_IB_DEVS`` (src/transport/net_ib/common.h): entries read from NCCL_IB_HCA, and
#: the most device ports the IB transport keeps.
MAX_IB_DEVS = 32

Version = tuple[int, int, int]

#: The newest rules this module knows (NCCL 2.32.3, the PyPI wheel it is tested against).
LATEST: Version = (2, 32, 3)
# Releases where a rule changed (tags of NVIDIA/nccl).  Tables are data:
V_STRTOK_PARSER = (2, 30, 7)  # parseStringList: strtok_r/strsep, rail and plane fields
V_MERGED_IN_INIT = ((2, 20, 0), (2, 24, 0))  # ncclIbInit merges ports: "[0]={...}"
V_PCI_ORDER = (2, 29, 7)  # NCCL_IB_DEVICE_PCI_ORDER: devices sorted by PCI path
V_NO_DEVICE_USING = (2, 24, 0)  # "Using" printed even when no device was found
V_CONF_FILE_ENV = (2, 23, 0)  # NCCL_CONF_FILE replaces ~/.nccl.conf
V_CONF_COMMENTS = (2, 26, 2)  # "#" lines skipped in config files
V_CONF_FGETS = (2, 30, 3)  # fgets(4096) instead of getline, "\r" removed; $HOME
V_OLDEST = (2, 5, 6)  # "=" exists and the device table is capped: the oldest modelled
V_32_DEVS = (2, 18, 5)  # MAX_IB_DEVS 16 -> 32
V_RO = (2, 12, 7)  # "NET/IB : Using%s %s; OOB" ([RO]); before: "Using%s ; OOB"
V_LINE_2048 = (2, 20, 0)  # the Using line's buffer: 1024 -> 2048 bytes
# A merge of ports of different link layers: before 2.26.2 it fails the topology, and so
# ncclCommInitRank (src/graph/topo.cc ncclTopoMakeVnic: NCCLCHECK(ret), v2.24.3-1 line
# 966, v2.25.1-1 line 966); since 2.26.2 ncclTopoAutoMerge keeps the ports apart and
# restarts (v2.26.2-1 topo.cc line 1095, v2.30.7-1 line 1423), and ncclIbConnect and
# ncclIbAccept refuse a connection between link layers (v2.30.7-1
# src/transport/net_ib/connect.cc lines 985 and 1033: "Attempted to connect incompatible
# devices", "Remote %s device is incompatible with the local ...", ncclInternalError).
V_MERGE_RETRY = (2, 26, 2)
# ncclIbGetPlaneIndex's warning names the 12 user-defined plane IDs (NVIDIA/nccl dev
# branch, 2.31.0, commit 8e4996ba; the text is in 2.32.3's libnccl.so.2)
V_PLANE_TEXT = (2, 31, 0)


def parse_version(version: VersionArg) -> Version:
    """``"2.30.4"``, ``"2.30.4-1"``, ``(2, 30, 4)`` or NCCL_VERSION_CODE ``23004``; None
    is the newest (:data:`LATEST`).  Releases before 2.5.6 (no ``=``, an uncapped
    device table) are not modelled: ValueError."""
    v = _parse_version(version)
    if v < V_OLDEST:
        raise UsageError(f"NCCL {v[0]}.{v[1]}.{v[2]} is older than 2.5.6, the oldest "
                         "release modelled")
    return v


def max_ib_devs(nccl_version: VersionArg = None) -> int:
    """``MAX_IB_DEVS``: 32 since 2.18.5, 16 before (entries read from NCCL_IB_HCA and
    device ports kept)."""
    return MAX_IB_DEVS if parse_version(nccl_version) >= V_32_DEVS else 16


def _parse_version(version: VersionArg) -> Version:
    if version is None:
        return LATEST
    if isinstance(version, int):
        if version < 10000:  # codes before 2.9: major*1000 + minor*100 + patch
            return (version // 1000, version % 1000 // 100, version % 100)
        return (version // 10000, version % 10000 // 100, version % 100)
    if isinstance(version, str):
        parts = version.strip().lstrip("v").split("-")[0].split(".")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise UsageError(f"not an NCCL version: {version!r}") from None
    elif isinstance(version, (tuple, list)) and all(
            isinstance(p, int) and not isinstance(p, bool) for p in version):
        nums = list(version)
    else:
        raise WrongTypeError("nccl_version must be a str, an int, a tuple of ints or None, "
                             f"not {version!r}")
    if not 1 <= len(nums) <= 3 or min(nums) < 0:
        raise UsageError(f"not an NCCL version: {version!r}")
    nums += [0] * (3 - len(nums))
    return (nums[0], nums[1], nums[2])

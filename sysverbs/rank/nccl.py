"""NCCL's device filters and device choice, exactly as NCCL reads them (docs/nccl.md).

* :func:`parse_hca` reads ``NCCL_IB_HCA`` (and, with ``max_entries=16``,
  ``NCCL_SOCKET_IFNAME``) into a :class:`HcaFilter` whose ``matches(device, port)``
  says whether NCCL uses that device port.
* :func:`socket_interface` is the interface NCCL's bootstrap picks from a list of
  interfaces (``NCCL_SOCKET_IFNAME``, else NCCL's defaults).
* :func:`nccl_environment` is the environment NCCL sees once it has read its
  config files (``NCCL_CONF_FILE`` or ``~/.nccl.conf``, then ``/etc/nccl.conf``).
* :func:`select_ib` / :func:`predict_ib` are the (device, port, link layer) list
  NCCL's IB transport builds, and :meth:`IbSelection.using_line` its
  ``NET/IB : Using ...`` line.
* :func:`lint_hca` finds the mistakes that make a value mean something else, and what
  NCCL then does that fails or degrades (no device, link layers mixed, merges that
  fail, plane IDs it refuses, a full table); it gives at most one fix per value.

Everything is taken from NCCL's source (NVIDIA/nccl); each function cites the file
and function it follows.  ``nccl_version`` selects the rules of a release (default:
the newest, checked against NCCL 2.32.3 from PyPI).

>>> from sysverbs.rank.nccl import parse_hca
>>> f = parse_hca("mlx5_1")
>>> f.matches("mlx5_1"), f.matches("mlx5_10")         # a prefix match
(True, True)
>>> parse_hca("=mlx5_1").matches("mlx5_10")             # "=": exact names
False
>>> parse_hca("^").matches("mlx5_0")                    # a bare "^" excludes everything
False
>>> parse_hca("mlx5_0:1").matches("mlx5_0", 2), parse_hca("mlx5_0:1").matches("mlx5_0", 1)
(False, True)
>>> parse_hca("mlx5_0:").entries[0].port                # an empty port is "any port"...
-1
>>> parse_hca("mlx5_0:", nccl_version="2.30.4").entries[0].port   # ...since 2.30.7
0
"""

from __future__ import annotations

# The code is in the modules beside this one (versions, ctext, hca, conf, ib, lint);
# this one is their public face, as placement/__init__.py is placement's.
from .conf import nccl_environment as nccl_environment
from .conf import read_conf_file as read_conf_file
from .hca import MAX_IFS as MAX_IFS
from .hca import NAME_MAX as NAME_MAX
from .hca import HcaEntry as HcaEntry
from .hca import HcaFilter as HcaFilter
from .hca import parse_hca as parse_hca
from .hca import socket_interface as socket_interface
from .ib import PLANE_MAX_INDEX as PLANE_MAX_INDEX
from .ib import IbDevice as IbDevice
from .ib import IbPort as IbPort
from .ib import IbSelection as IbSelection
from .ib import host_ports as host_ports
from .ib import no_device_list_note as no_device_list_note
from .ib import predict_ib as predict_ib
from .ib import select_ib as select_ib
from .lint import LintResult as LintResult
from .lint import LintWarning as LintWarning
from .lint import lint_hca as lint_hca
from .versions import LATEST as LATEST
from .versions import MAX_IB_DEVS as MAX_IB_DEVS
from .versions import Version as Version
from .versions import max_ib_devs as max_ib_devs
from .versions import parse_version as parse_version

TYPE_CHECKING = False
if TYPE_CHECKING:  # an annotation's alias: typing is not imported at run time
    from .versions import VersionArg as VersionArg

__all__ = [
    "MAX_IB_DEVS",
    "MAX_IFS",
    "PLANE_MAX_INDEX",
    "HcaEntry",
    "HcaFilter",
    "IbPort",
    "IbDevice",
    "IbSelection",
    "LintWarning",
    "LintResult",
    "parse_hca",
    "parse_version",
    "max_ib_devs",
    "socket_interface",
    "nccl_environment",
    "read_conf_file",
    "select_ib",
    "host_ports",
    "predict_ib",
    "lint_hca",
]

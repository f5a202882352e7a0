"""Which of NCCL's networks a rank would use between nodes: its IB transport, its sockets,
or a net plugin's network (AWS EFA's aws-ofi-nccl, another vendor's).

NCCL builds its list of networks from a net plugin first, then its own ``IB`` and
``Socket``: the plugin is ``libnccl-net.so``, or ``libnccl-net-<NAME>.so`` with
``NCCL_NET_PLUGIN=NAME`` (``none``: no plugin).  Without ``NCCL_NET`` it takes the first
network that initialises with at least one device; ``NCCL_NET=<name>`` takes the network
of that name (``IB``, ``Socket``, a plugin's), and when none has that name, or it has no
device, the communicator fails to initialise (``Failed to initialize any NET plugin``).
What is established and from where: docs/fleet.md, "Verdicts".

On AWS EFA the devices have link layer ``Unknown`` (neither InfiniBand nor Ethernet), so
NCCL's IB transport skips them; NCCL reaches them only through aws-ofi-nccl, whose
network is named ``Libfabric`` (``AWS Libfabric`` in its recent releases) and which AWS'
images install as NCCL's default plugin.  A host with a usable EFA device is taken to
have it, unless ``NCCL_NET_PLUGIN`` names another plugin or ``none``.

>>> net_transport({}, ib_ports=False, efa_devices=True)
'ofi'
>>> net_transport({"NCCL_NET_PLUGIN": "none"}, ib_ports=False, efa_devices=True)
'socket'
>>> net_transport({"NCCL_NET": "ib"}, ib_ports=False, efa_devices=True)
''
>>> net_transport({"NCCL_NET": "Socket"}, ib_ports=True, efa_devices=False)
'socket'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["OFI_NAMES", "TRANSPORTS", "net_transport", "uses_ib"]

#: What :func:`net_transport` answers, besides ``""`` (NCCL would fail to initialise):
#: NCCL's IB transport, its sockets, aws-ofi-nccl's Libfabric network, another plugin's.
TRANSPORTS = ("ib", "socket", "ofi", "plugin")
#: The network names of aws-ofi-nccl (NCCL_NET compares them without case).
OFI_NAMES = ("libfabric", "aws libfabric")
#: NCCL_NET_PLUGIN values that load aws-ofi-nccl (libnccl-net-<value>.so, or a path).
_OFI_PLUGINS = ("ofi", "aws-ofi", "aws-ofi-nccl")


def _plugin(environ: Mapping[str, str], efa_devices: bool) -> str:
    """The plugin NCCL would load: ``ofi``, ``plugin`` (another one) or ``""`` (none)."""
    name = environ.get("NCCL_NET_PLUGIN")
    if name is None or name == "":
        return "ofi" if efa_devices else ""
    if name.lower() == "none":
        return ""
    base = name.rsplit("/", 1)[-1].lower()
    if base in _OFI_PLUGINS or "ofi" in base:
        return "ofi" if efa_devices else ""  # aws-ofi-nccl finds no EFA device: no network
    return "plugin"


def net_transport(environ: Mapping[str, str], *, ib_ports: bool, efa_devices: bool) -> str:
    """The network NCCL would use between nodes (one of :data:`TRANSPORTS`), ``""`` when
    it would fail to initialise.  ``ib_ports``: NCCL's IB transport finds a device port
    (``sysverbs nccl check``); ``efa_devices``: the host has a usable EFA device."""
    plugin = _plugin(environ, efa_devices)
    wanted = environ.get("NCCL_NET", "").lower()
    if not wanted:
        return plugin or ("ib" if ib_ports else "socket")
    if wanted == "ib":
        return "ib" if ib_ports else ""
    if wanted == "socket":
        return "socket"
    if wanted in OFI_NAMES:
        return "ofi" if plugin == "ofi" else ""
    return "plugin" if plugin == "plugin" else ""


def uses_ib(devices: int, disabled: bool, failure: str) -> bool:
    """Whether NCCL's IB transport finds a device port: ``devices`` ports selected
    (``IbSelection.devices``), the transport not disabled (``NCCL_IB_DISABLE``) and its
    initialisation not failing.  The one rule ``sysverbs nccl check`` and ``metrics``/
    ``nfd`` give :func:`net_transport` as ``ib_ports``."""
    return devices > 0 and not disabled and not failure

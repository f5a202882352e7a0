"""``HostBuilder``: fake RDMA hosts in code, as umockdev recordings
(``HostBuilder().mlx5(vfs=8).efa().rxe()``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union, cast

from ..ground.errors import UsageError
from . import layout
from . import umockdev as recording
from .builder_base import FakeDevice
from .builder_machine import bdf_of
from .builder_pci import PciTreeBuilder
from .builder_tables import (
    DRIVERS,
    EFA_MODELS,
    GPU_MODELS,
    MLX4_MODELS,
    MLX5_MODELS,
    DeviceOptions,
    Driver,
    GpuModel,
    PciModel,
    PciRdmaOptions,
)
from .fakehost import FakeHost, write_host
from .layout import (  # noqa: F401 (LO_PATH, NODE_TYPES, UVERBS_*: once defined here)
    ETH_CLASS,
    IB_CLASS,
    LO_PATH,
    NODE_TYPES,
    UVERBS_DYN_MAJOR,
    UVERBS_MAJOR,
    Value,
    guid_text,
    kernel_link,
)
from .layout import encode as _value
from .umockdev import Recording

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["HostBuilder", "FakeDevice", "PciModel", "MLX5_MODELS", "MLX4_MODELS", "EFA_MODELS",
           "GPU_MODELS", "GpuModel", "DeviceOptions", "PciRdmaOptions", "Driver", "DRIVERS"]


class HostBuilder(PciTreeBuilder):
    """Build a fake RDMA host in code; :meth:`build` gives its :class:`Recording`.

    Every method adds hardware and returns the builder, so calls chain::

        host = HostBuilder().mlx5(vfs=8).efa().rxe().build()

    What is laid out is what the kernel lays out (the bundled fixtures' layout): a
    PCI function under ``/devices/pci0000:00/...`` with its modalias, driver link and
    SR-IOV links; ``infiniband/<name>`` and ``infiniband_verbs/uverbsN`` below it
    (``/devices/virtual/...`` for rxe and siw); ``/dev/infiniband/uverbsN`` and its
    ``by-ibdev`` link; and ``/sys/class/infiniband_verbs/abi_version``.

    Options every device method takes (:class:`DeviceOptions`; a missing one is the
    driver's default, from its row of :data:`DRIVERS`):

    * ``name``: the IB device name (default: the driver's own naming);
    * ``uverbs``: the uverbs number (default: the next free one); ``verbs=False``
      leaves the uverbs device out (like an XDR ``smi`` device);
    * ``abi_version``: the uverbs ``abi_version`` file (default: the driver's);
    * ``node_type``: 1..7 or any :data:`Value` (raw bytes for broken files);
    * ``node_guid``: an int (default: a unique made-up GUID) or a raw value;
    * ``dev_node``: False leaves ``/dev/infiniband/uverbsN`` out;
    * ``ib_attrs`` / ``uverbs_attrs``: more or replaced files of the IB device / the
      uverbs device (``{"dev": b"junk"}``, ``{"ibdev": None}`` to remove one).

    ``HostBuilder(class_abi=...)`` sets the class ``abi_version`` (None: no file);
    ``first_bus`` the PCI bus of the first adapter (each adapter gets a bus and a root
    port of its own), so that a second builder can add devices to a host written
    by a first one (with ``build(loopback=False)`` and distinct ``uverbs=`` numbers).
    """
    # ------------------------------------------------------------------ results
    def build(self, *, loopback: bool = True) -> Recording:
        """The host as a recording: the loopback interface first, carrying the class
        files, as in the bundled fixtures; ``loopback=False`` leaves it (and the class
        files) out, to add these devices to a host that has them already."""
        lo = layout.loopback(verbs_abi=self.class_abi)
        records = self._finish(self._records)
        return Recording((lo, *records) if loopback else tuple(records))

    def dumps(self) -> str:
        """The recording as umockdev text."""
        return recording.dumps(self.build())

    def write(self, path: Union[str, os.PathLike[str]]) -> Path:
        """Write the recording to ``path`` (for ``umockdev-run -d``); returns the path."""
        out = Path(path)
        out.write_text(self.dumps(), encoding="utf-8", errors="surrogateescape")
        return out

    def materialize(self, root: Union[str, os.PathLike[str]]) -> FakeHost:
        """Write the host below ``root`` (see :func:`materialize`)."""
        return write_host(self.build(), root)

    # ------------------------------------------------------------------ hardware
    def mlx5(
        self,
        *,
        model: str = "cx6",
        vfs: int = 0,
        link_layer: str = "InfiniBand",
        vf_dev_nodes: bool = True,
        netdev: Optional[str] = None,
        numa_node: Optional[int] = None,
        vendor_name: Optional[str] = None,
        model_name: Optional[str] = None,
        path: Optional[str] = None,
        sfs: int = 0,
        vf_offset: int = 2,
        vf_names: Sequence[str] = (),
        **options: Unpack[DeviceOptions],
    ) -> HostBuilder:
        """An NVIDIA/Mellanox mlx5 adapter (``model``: a key of :data:`MLX5_MODELS`) as
        a PCI function with its auxiliary ``mlx5_core.rdma.N`` device, and ``vfs``
        SR-IOV virtual functions, each an mlx5 device of its own (``mlx5_<N+1>``...).

        ``vendor_name``/``model_name`` add udev's hwdb properties to the PCI
        function's udev record (seen under umockdev); ``vf_dev_nodes=False`` leaves
        the VFs' ``/dev`` nodes out.  ``path`` puts the PF at that sysfs path (below
        a :meth:`host_bridge`, whose NUMA node it takes unless ``numa_node`` is
        given; its VFs beside it on the same bus) instead of on a root port of its
        own; ``sfs`` adds that many sub-functions (:meth:`mlx5_sf`).  The PF takes
        the :class:`DeviceOptions`; the VFs only ``abi_version`` and ``node_type``,
        their function numbers from ``vf_offset`` (the PF's ``sriov_offset``) and
        their IB device names from ``vf_names`` (default: the driver's).
        """
        if model not in MLX5_MODELS:
            raise UsageError(f"unknown mlx5 model {model!r} (have: {', '.join(MLX5_MODELS)})")
        if link_layer not in ("InfiniBand", "Ethernet"):
            raise UsageError("link_layer must be 'InfiniBand' or 'Ethernet'")
        spec = DRIVERS["mlx5"]
        pm = MLX5_MODELS[model]
        if path is not None:
            pf_slot = bdf_of(path)
            root = path.rsplit("/", 1)[0]
            pf_path = path
            numa_node = self._tree_numa(path, numa_node)
            prefix = pf_slot.rsplit(":", 1)[0]
        else:
            root, bus = self._new_bus()
            prefix = f"0000:{bus:02x}"
            pf_slot = f"{prefix}:00.0"
            pf_path = f"{root}/{pf_slot}"
        if numa_node is None:
            numa_node = 0
        vf_slots = [f"{prefix}:{(vf_offset + i) >> 3:02x}.{(vf_offset + i) & 7}"
                    for i in range(vfs)]
        pci_class = IB_CLASS if link_layer == "InfiniBand" else ETH_CLASS
        extra: list[tuple[str, Optional[bytes]]] = []
        pf_links: list[tuple[str, str]] = []
        if vfs:
            extra += [("sriov_numvfs", _value(vfs)), ("sriov_totalvfs", _value(max(vfs, 8))),
                      ("sriov_offset", _value(vf_offset)), ("sriov_stride", _value(1)),
                      ("sriov_vf_device", _value(f"{pm.vf_device or pm.device:x}"))]
            pf_links += [(f"virtfn{i}", f"../{s}") for i, s in enumerate(vf_slots)]
        vf_options: DeviceOptions = {"dev_node": vf_dev_nodes}
        if "abi_version" in options:
            vf_options["abi_version"] = options["abi_version"]
        if "node_type" in options:
            vf_options["node_type"] = options["node_type"]
        functions: list[tuple[str, str, int, list[tuple[str, Optional[bytes]]],
                              list[tuple[str, str]], DeviceOptions, Optional[str],
                              Optional[str]]]
        functions = [(pf_path, pf_slot, pm.device, extra, pf_links, options, netdev, None)]
        functions += [(f"{root}/{slot}", slot, pm.vf_device or pm.device, [],
                       [("physfn", f"../{pf_slot}")],
                       cast(DeviceOptions, {**vf_options, "name": vf_names[i]})
                       if i < len(vf_names) else vf_options, None, pf_slot)
                      for i, slot in enumerate(vf_slots)]
        for fn_path, slot, device, fn_extra, links, opts, fn_netdev, vf_of in functions:
            index = self._count("mlx5")
            self._spec_function(spec, fn_path, device=device, pci_class=pci_class,
                                numa_node=numa_node, extra=fn_extra, links=links,
                                vendor_name=vendor_name, model_name=model_name)
            self._rdma(spec, opts, parent=fn_path, index=index, device_id=device,
                       link_layer=link_layer, netdev=fn_netdev, pci=slot, vf_of=vf_of)
        if path is not None:
            self._tree_functions.update([pf_path] + [f"{root}/{slot}" for slot in vf_slots])
        for n in range(sfs):
            self.mlx5_sf(pf_path, n + 1, link_layer=link_layer)
        return self

    def mlx4(self, *, model: str = "cx3", vfs: int = 0,
             **options: Unpack[DeviceOptions]) -> HostBuilder:
        """A ConnectX-3 (``mlx4_core``) with ``vfs`` virtual functions; one ``mlx4_N``
        IB device per function (the VFs take ``abi_version``, ``node_type`` and
        ``dev_node`` of the :class:`DeviceOptions`)."""
        if model not in MLX4_MODELS:
            raise UsageError(f"unknown mlx4 model {model!r} (have: {', '.join(MLX4_MODELS)})")
        spec = DRIVERS["mlx4"]
        pm = MLX4_MODELS[model]
        root, bus = self._new_bus()
        pf_slot = f"0000:{bus:02x}:00.0"
        vf_slots = [f"0000:{bus:02x}:00.{1 + i}" if i < 7 else
                    f"0000:{bus:02x}:{(1 + i) >> 3:02x}.{(1 + i) & 7}" for i in range(vfs)]
        vf_options: DeviceOptions = {}
        if "abi_version" in options:
            vf_options["abi_version"] = options["abi_version"]
        if "node_type" in options:
            vf_options["node_type"] = options["node_type"]
        if "dev_node" in options:
            vf_options["dev_node"] = options["dev_node"]
        functions: list[tuple[str, int, list[tuple[str, str]], Optional[str], DeviceOptions]]
        functions = [(pf_slot, pm.device,
                      [(f"virtfn{i}", f"../{s}") for i, s in enumerate(vf_slots)], None, options)]
        functions += [(s, pm.vf_device or pm.device, [("physfn", f"../{pf_slot}")], pf_slot,
                       vf_options) for s in vf_slots]
        for slot, device, links, vf_of, opts in functions:
            index = self._count("mlx4")
            path = f"{root}/{slot}"
            self._spec_function(spec, path, device=device, links=links)
            self._rdma(spec, opts, parent=path, index=index, device_id=device, pci=slot,
                       vf_of=vf_of)
        return self

    def efa(self, *, model: str = "efa1", **options: Unpack[DeviceOptions]) -> HostBuilder:
        """An AWS Elastic Fabric Adapter (``efa`` PCI driver), named ``rdmap<bus>s<slot>``
        as rdma-core's udev rules rename it; node type 7 (unspecified), GUID 0."""
        if model not in EFA_MODELS:
            raise UsageError(f"unknown EFA model {model!r} (have: {', '.join(EFA_MODELS)})")
        spec = DRIVERS["efa"]
        root, bus = self._new_bus()
        slot = f"0000:{bus:02x}:00.0"
        path = f"{root}/{slot}"
        self._spec_function(spec, path, device=EFA_MODELS[model].device)
        self._rdma(spec, options, parent=path, index=self._count("efa"), bus=bus, pci=slot)
        return self

    def irdma(self, *, iwarp: bool = False, path: Optional[str] = None,
              **options: Unpack[DeviceOptions]) -> HostBuilder:
        """An Intel E810 (``ice``) with its ``irdma`` auxiliary device: RoCE (node type
        1), or iWARP (``iwarp=True``: node type 4, RNIC).  ``path``: at that sysfs path
        below a :meth:`host_bridge` (as for :meth:`mlx5`)."""
        spec = DRIVERS["irdma-iwarp" if iwarp else "irdma"]
        if options.get("node_type", None) is None:  # None: the driver's
            options.pop("node_type", None)
        if path is not None:
            self._tree_functions.add(path)
        path, slot, numa = self._place(path)
        index = self._count("irdma")
        self._spec_function(spec, path, numa_node=numa)
        self._rdma(spec, options, parent=path, index=index, pci=slot)
        return self

    def bnxt_re(self, **options: Unpack[DeviceOptions]) -> HostBuilder:
        """A Broadcom NetXtreme-E (``bnxt_en``) with its ``bnxt_re`` RoCE device."""
        spec = DRIVERS["bnxt_re"]
        path, slot, _ = self._place(None)
        index = self._count("bnxt_re")
        self._spec_function(spec, path)
        self._rdma(spec, options, parent=path, index=index, pci=slot)
        return self

    def rxe(self, *, netdev: Optional[str] = None,
            **options: Unpack[DeviceOptions]) -> HostBuilder:
        """A soft-RoCE device (``rdma link add rxe0 type rxe netdev eth0``): under
        ``/devices/virtual``, its GUID the EUI-64 of the netdev's MAC, matched by name."""
        index = self._count("rxe")
        ifname = netdev or f"eth{index}"
        mac_tail = 0x123456 + index
        mac = f"52:54:00:{(mac_tail >> 16) & 0xFF:02x}:{(mac_tail >> 8) & 0xFF:02x}:" \
              f"{mac_tail & 0xFF:02x}"
        self._rdma(DRIVERS["rxe"], options, parent=None, index=index, netdev=ifname, mac=mac,
                   guid_fallback=0x505400FFFE000000 | mac_tail,
                   ib_attrs={"parent": ifname, "ports/1/gid_attrs/ndevs/0": ifname,
                             "ports/1/gid_attrs/types/0": "RoCE v2"})
        return self

    def siw(self, *, netdev: Optional[str] = None,
            **options: Unpack[DeviceOptions]) -> HostBuilder:
        """A software iWARP device (``siw``): libibverbs matches it only by driver id,
        which sysfs does not carry, so sysfs mode finds it but no provider claims it."""
        index = self._count("siw")
        ifname = netdev or f"eth{index}"
        self._rdma(DRIVERS["siw"], options, parent=None, index=index, ifname=ifname,
                   netdev=ifname, mac=f"52:54:00:65:00:{index:02x}",
                   ib_attrs={"parent": ifname})
        return self

    def pci_rdma(
        self,
        driver: str,
        name: str,
        *,
        vendor: int,
        device: int,
        sub_vendor: Optional[int] = None,
        sub_device: Optional[int] = None,
        pci_class: int = ETH_CLASS,
        pci_driver: Optional[str] = None,
        aux: Optional[str] = None,
        link_layer: str = "Ethernet",
        **options: Unpack[PciRdmaOptions],
    ) -> HostBuilder:
        """Any PCI RDMA device: ``driver`` names the IB driver, ``vendor``/``device``
        the PCI ids libibverbs matches on, ``aux`` an auxiliary device between them
        (``"bnxt_en.rdma.0"``): a row of :data:`DRIVERS` made from the arguments."""
        spec = Driver(driver, name, 1, 1, "1.0", link_layer, 0x0011220000000000,
                      pci=(vendor, device, vendor if sub_vendor is None else sub_vendor,
                           device if sub_device is None else sub_device, pci_class,
                           pci_driver or driver),
                      aux=None if aux is None else (aux.replace("{", "{{").replace("}", "}}"),
                                                    driver))
        path, slot, _ = self._place(None)
        self._spec_function(spec, path)
        opts = cast(DeviceOptions, dict(options))
        opts["name"] = name
        self._rdma(spec, opts, parent=path, pci=slot)
        return self

    def mlx5_sf(self, pf_path: str, sf: int, *, name: Optional[str] = None,
                netdev: Optional[str] = None, uverbs: Optional[int] = None,
                link_layer: str = "Ethernet") -> HostBuilder:
        """An mlx5 sub-function of the PF at ``pf_path``: the auxiliary device
        ``mlx5_core.sf.<sf>`` below it with its own ``mlx5_core.rdma`` auxiliary
        device, ib device (``mlx5_<N>``) and uverbs device, all below the SF (so
        the ib device's ``device`` link leads to an auxiliary device, not a PCI
        function)."""
        sf_path = self.add_aux_device(pf_path, f"mlx5_core.sf.{sf}", "mlx5_core.sf")
        opts: DeviceOptions = {"name": name, "uverbs": uverbs}
        self._rdma(DRIVERS["mlx5-sf"], opts, parent=sf_path, index=self._count("mlx5"),
                   link_layer=link_layer, netdev=netdev)
        return self

    def mlx5_bond(self, pf_paths: Sequence[str], *, bond: str = "bond0",
                  name: Optional[str] = None, uverbs: Optional[int] = None,
                  model: str = "cx7") -> HostBuilder:
        """A RoCE LAG: the mlx5 PFs at ``pf_paths`` (functions of one card), their
        netdevs enslaved to the bond ``bond`` (``/devices/virtual/net/bond0`` with
        ``lower_*``/``master`` links), and one ib device ``mlx5_bond_<N>`` on the
        first PF, as mlx5_ib registers it when bonding is active (the PFs' own ib
        devices are gone then)."""
        if len(pf_paths) < 2:
            raise UsageError("a bond needs at least two PFs")
        pm = MLX5_MODELS[model]
        bond_path = f"/devices/virtual/net/{bond}"
        slaves: list[tuple[str, str]] = []
        for n, pf in enumerate(pf_paths):
            index = self._count("mlx5")
            self.add_pci_function(pf, 0x15B3, pm.device, 0x15B3, 0x0007, ETH_CLASS, "mlx5_core",
                      numa_node=self._tree_numa(pf, None) if self._host_bridges else 0)
            if self._host_bridges:
                self._tree_functions.add(pf)
            self.add_aux_device(pf, f"mlx5_core.eth.{index}", "mlx5_core.eth")
            self.add_aux_device(pf, f"mlx5_core.rdma.{index}", "mlx5_ib.rdma")
            ifname = f"{bond}s{n}"
            guid = self._guid(0xB8599F0300B00000)
            mac = ":".join(f"{(guid >> s) & 0xFF:02x}" for s in (56, 48, 40, 16, 8, 0))
            net = self._net(pf, ifname, mac)
            slaves.append((ifname, net))
        self._ifindex += 1
        attrs = [*layout.net_attrs("02:00:00:00:00:01", self._ifindex),
                 ("bonding/mode", _value("802.3ad 4")),
                 ("bonding/slaves", _value(" ".join(s for s, _ in slaves)))]
        links = [(f"lower_{ifname}", kernel_link(bond_path, net)) for ifname, net in slaves]
        self._records.append(layout.net_device(None, bond, self._ifindex, attrs, links))
        for _ifname, net in slaves:
            self._extra_links.append((net, "master", kernel_link(net, bond_path)))
        first = pf_paths[0]
        self._rdma(DRIVERS["mlx5-bond"], {"name": name, "uverbs": uverbs}, parent=first,
                   index=self._count("mlx5_bond"), device_id=pm.device,
                   ib_attrs={"ports/1/gid_attrs/ndevs/0": bond}, pci=first.rsplit("/", 1)[1])
        return self

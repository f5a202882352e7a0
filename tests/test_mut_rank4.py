"""The edges of rank/ib.py, rank/frameworks.py and rank/frameworks_map.py that `make
mutation` found untested (issue 41): ib.py's era boundaries, PCI keys, unopened
devices and a failing device list.  Pure functions on hand-written ports and small
generated trees: no subprocess.
"""

from __future__ import annotations

import ipaddress
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from sysverbs.ground.sysfs_read import ReadOnce
from sysverbs.rank.environment import Nic, RankEnvironment, Variable
from sysverbs.rank.frameworks import (
    HostPair,
    for_frameworks,
    nvshmem_hca_list,
    uccl_rdma_dev,
    vllm_mapping,
    vllm_selection,
)
from sysverbs.rank.frameworks_map import host_map, host_pairs, mooncake_topology, vllm_name
from sysverbs.rank.ib import IbPort, host_ports, predict_ib, select_ib
from sysverbs.testing import HostBuilder

PCI = "/sys/devices/pci0000:00/0000:00:01.0/"


# ----------------------------------------------------------------------------- ib.py


def test_ports_without_a_pci_path_are_not_merged_before_2_24() -> None:
    """ncclIbFindMatchingDev merges only ports that have a PCI path: two ports of a soft
    device (no ``device`` link), same GUID and link layer, stay two devices."""
    ports = [IbPort("rxe0", p, True, "Ethernet", "", 7) for p in (1, 2)]
    sel = select_ib(ports, {}, nccl_version="2.23.4")
    assert (sel.merged, sel.virtual_names()) == (((0,), (1,)), ["rxe0", "rxe0"])
    assert [d.pci_path for d in sel.devices] == ["", ""]


def test_a_pci_path_without_a_slash_is_its_own_last_component() -> None:
    """NCCL_IB_DEVICE_PCI_ORDER keys a path with no '/' by the whole text (no
    IndexError), and each device keeps its path."""
    ports = [IbPort("b", 1, True, "InfiniBand", "0000:12:00.0"),
             IbPort("a", 1, True, "InfiniBand", "0000:0c:00.0")]
    sel = select_ib(ports, {})
    assert [(d.device, d.pci_path) for d in sel.devices] == [
        ("a", "0000:0c:00.0"), ("b", "0000:12:00.0")]


def test_a_pci_key_reads_at_most_16_hex_digits() -> None:
    """busIdToInt64 keeps 16 hex digits (char hexStr[17]): a 17th is not read, so
    1000000000000000f is 0x1000000000000000, below 2000000000000000 (17 digits would
    clamp at LONG_MAX and sort it last)."""
    ports = [IbPort(d, 1, True, "InfiniBand", f"/x/{path}") for d, path in (
        ("b", "2000000000000000"), ("a", "1000000000000000f"))]
    assert [d.device for d in select_ib(ports, {}).devices] == ["a", "b"]


def test_a_device_that_does_not_open_is_left_out(tmp_path: Path) -> None:
    """host_ports(open_devices=True) tries ibv_open_device: on a tree whose uverbs node
    is missing (its dev file 0:0, so no /dev/char fallback) the port does not open and
    NCCL skips the device."""
    host = HostBuilder().rxe(name="rxe0", netdev="v0").materialize(tmp_path)
    for dev in (host.sysfs / "class/infiniband_verbs").glob("*/dev"):
        dev.write_text("0:0\n")
    ports = host_ports(open_devices=True, **host.options())
    assert [(p.device, p.opens) for p in ports] == [("rxe0", False)]
    assert [p.opens for p in host_ports(**host.options())] == [True]
    sel = select_ib(ports, {})
    assert (sel.devices, sel.notes) == ((), ("NET/IB : Unable to open device rxe0",))


def test_predict_ib_when_the_device_list_fails(tmp_path: Path) -> None:
    """No class/infiniband_verbs: ibv_get_device_list returns NULL (ENOSYS), NCCL counts
    no device."""
    sel = predict_ib({}, sysfs_path=str(tmp_path), source="sysfs", providers="builtin")
    assert sel.notes == ("ibv_get_device_list fails here (Function not implemented): NCCL "
                         "counts no IB device",)
    assert sel.lines("e") == ["NET/IB : No device found.", "NET/IB : Using [RO]; OOB e"]


def test_the_pci_path_is_read_once_in_a_scope(tmp_path: Path) -> None:
    """Inside a read-once scope the ``device`` link is the scope's input: a link changed
    after the first read gives the first answer again (every reader sees one host)."""
    host = HostBuilder().mlx5().mlx5().materialize(tmp_path)
    link = host.sysfs / "class/infiniband/mlx5_0/device"
    other = os.path.realpath(host.sysfs / "class/infiniband/mlx5_1/device")
    with ReadOnce():
        first = {p.device: p.full_pci_path for p in host_ports(**host.options())}
        link.unlink()
        link.symlink_to(other)
        again = {p.device: p.full_pci_path for p in host_ports(**host.options())}
    assert first["mlx5_0"].endswith("/0000:00:01.0/0000:03:00.0")
    assert again == first


def test_the_pci_path_without_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without /proc (no /proc/self/fd to read the O_PATH descriptor's link), the path
    is os.path.realpath's."""
    host = HostBuilder().mlx5().materialize(tmp_path)
    readlink = os.readlink

    def no_proc(path: str, *args: object, **kw: object) -> str:
        if os.fsdecode(path).startswith("/proc/self/fd/"):
            raise FileNotFoundError(path)
        return readlink(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "readlink", no_proc)
    (port,) = host_ports(**host.options())
    assert port.full_pci_path == os.path.realpath(host.sysfs / "class/infiniband/mlx5_0/device")
    assert port.full_pci_path.endswith("/0000:00:01.0/0000:03:00.0")


def test_a_nic_merges_at_most_two_ports_before_2_24() -> None:
    """ncclIbFindMatchingDev: NCCL_IB_MAX_DEVS_PER_NIC = 2 ports per merged device (2.20
    to 2.23); since 2.24 the topology merges at most 8, then starts a new device."""
    three = [IbPort("mlx5_0", p, True, "InfiniBand", f"{PCI}0000:10:00.0") for p in (1, 2, 3)]
    assert select_ib(three, {}, nccl_version="2.23.4").merged == ((0, 1), (2,))
    nine = [IbPort("mlx5_0", p, True, "InfiniBand", f"{PCI}0000:10:00.0") for p in range(1, 10)]
    assert select_ib(nine, {}).merged == (tuple(range(8)), (8,))


def test_merging_vfs_of_a_four_character_path() -> None:
    """ncclIbGetPciPath with NCCL_IB_MERGE_VFS zeroes the function digit and the two
    device digits, down to a path of four characters: 01.1 and 02.0 are one NIC."""
    ports = [IbPort("a", 1, True, "InfiniBand", "01.1"), IbPort("b", 1, True, "InfiniBand",
                                                                "02.0")]
    assert select_ib(ports, {}).virtual_names() == ["a+b"]
    assert select_ib(ports, {"NCCL_IB_MERGE_VFS": "0"}).virtual_names() == ["a", "b"]


def test_the_incompatible_merge_message_changes_at_2_26_2() -> None:
    """An IB and a RoCE port of one NIC: from 2.26.2 (V_MERGE_RETRY) NCCL warns that it
    attempted to merge them and goes on; before, it fails the topology."""
    ports = [IbPort("mlx5_0", 1, True, "InfiniBand", f"{PCI}0000:10:00.0"),
             IbPort("mlx5_0", 2, True, "Ethernet", f"{PCI}0000:10:00.0")]
    new = select_ib(ports, {}, nccl_version="2.26.2")
    assert new.notes == (
        "NET/IB : Attempted to merge incompatible devices: [0]mlx5_0:1/IB and "
        "[1]mlx5_0:2/RoCE. Try selecting NICs of only one link type using NCCL_IB_HCA",)
    old = select_ib(ports, {}, nccl_version="2.26.1")
    assert old.notes[1] == ("TOPO/NET : Tried merging multiple devices together and failed. "
                            "Try setting NCCL_NET_MERGE_LEVEL=LOC")
    assert new.incompatible == old.incompatible == ((0, 1),)



def test_version_boundaries_of_the_using_line() -> None:
    """Each era starts at its release: [RO] at 2.12.7, a 2048-byte line at 2.20.0 (one
    byte less passed before 2.24), the Using line after "No device found." at 2.24.0."""
    one = [IbPort("mlx5_0", 1, True, "InfiniBand", f"{PCI}0000:10:00.0")]
    assert select_ib(one, {}, nccl_version="2.12.7").using_line("e").endswith(" [RO]; OOB e")
    assert select_ib(one, {}, nccl_version="2.12.6").using_line("e").endswith("IB ; OOB e")
    many = [IbPort(f"mlx5_{'x' * 60}{i}", 1, True, "InfiniBand", f"{PCI}0000:{i:02x}:00.0")
            for i in range(32)]
    line = select_ib(many, {}, nccl_version="2.20.0").using_line("e")
    assert len(line) == len("NET/IB : Using") + 2046 + len(" [RO]; OOB e")
    assert select_ib([], {}, nccl_version="2.24.0").lines("e") == [
        "NET/IB : No device found.", "NET/IB : Using [RO]; OOB e"]
    assert select_ib([], {}, nccl_version="2.23.4").lines("e") == ["NET/IB : No device found."]


def test_version_boundaries_of_the_table() -> None:
    """The PCI order starts at 2.29.7, the topology's merge (up to 8 ports) at 2.24.0."""
    ports = [IbPort("b", 1, True, "InfiniBand", f"{PCI}0000:20:00.0"),
             IbPort("a", 1, True, "InfiniBand", f"{PCI}0000:10:00.0")]
    assert [d.device for d in select_ib(ports, {}, nccl_version="2.29.7").devices] == ["a", "b"]
    assert [d.device for d in select_ib(ports, {}, nccl_version="2.29.6").devices] == ["b", "a"]
    three = [IbPort("mlx5_0", p, True, "InfiniBand", f"{PCI}0000:10:00.0") for p in (1, 2, 3)]
    assert select_ib(three, {}, nccl_version="2.24.0").merged == ((0, 1, 2),)


def test_plane_ids_from_2_31_0_and_a_repeated_one() -> None:
    """2.31.0 words the plane limit anew; a plane ID given twice counts once and the
    devices after it are still checked."""
    ports = [IbPort(f"mlx5_{i}", 1, True, "InfiniBand", f"{PCI}0000:{16 + i:02x}:00.0")
             for i in range(14)]
    thirteen = {"NCCL_IB_HCA": "=" + ",".join(f"mlx5_{i}:1::{i}" for i in range(13))}
    assert select_ib(ports, thirteen, nccl_version="2.31.0").failure == (
        "NCCL cannot use more than 12 user-defined plane IDs.")
    again = {"NCCL_IB_HCA": "=mlx5_0:1::0,mlx5_1:1::0,mlx5_2:1::16384"}
    assert select_ib(ports, again).failure == "NCCL cannot use a plane ID that is 16384."


def test_disabled_and_full_tables() -> None:
    """NCCL_IB_DISABLE: an empty table that does not overflow; a full table names the
    devices it does not read only when they have a usable port."""
    assert select_ib([], {"NCCL_IB_DISABLE": "1"}).overflow is False
    ports = [IbPort(f"d{i}", 1, True, "InfiniBand", f"{PCI}0000:{i + 1:02x}:00.0")
             for i in range(32)]
    ports += [IbPort("down", 1, False, "InfiniBand", f"{PCI}0000:40:00.0"),
              IbPort("up", 1, True, "InfiniBand", f"{PCI}0000:41:00.0")]
    sel = select_ib(ports, {})
    assert (sel.unread, sel.overflow) == (("up",), False)


def test_vf_merging_zeroes_both_device_digits() -> None:
    """NCCL_IB_MERGE_VFS zeroes the two device digits: 10:01.0 and 10:11.0 are one NIC;
    a three-character path only loses its function digit."""
    ports = [IbPort("a", 1, True, "InfiniBand", f"{PCI}0000:10:01.0"),
             IbPort("b", 1, True, "InfiniBand", f"{PCI}0000:10:11.0")]
    assert select_ib(ports, {}).virtual_names() == ["a+b"]
    short = [IbPort("a", 1, True, "InfiniBand", "1.1"), IbPort("b", 1, True, "InfiniBand",
                                                               "1.0")]
    assert select_ib(short, {}).virtual_names() == ["b+a"]  # PCI order: 10 before 11


def test_realpath_needs_no_access_to_the_target(tmp_path: Path) -> None:
    """realpath(3) opens nothing: a ``device`` link to a socket (which cannot be opened
    for reading) resolves; a dangling one is ""."""
    import socket

    host = HostBuilder().rxe(name="rxe0", netdev="v0").materialize(tmp_path)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s"))
        (host.sysfs / "class/infiniband/rxe0/device").symlink_to(tmp_path / "s")
        assert [p.full_pci_path for p in host_ports(**host.options())] == [str(tmp_path / "s")]
    finally:
        sock.close()
    (tmp_path / "s").unlink()
    assert [p.full_pci_path for p in host_ports(**host.options())] == [""]
    # a FIFO: an O_PATH open does not wait for a writer (an O_RDONLY one would, for ever)
    os.mkfifo(tmp_path / "s")
    signal.setitimer(signal.ITIMER_REAL, 5.0)  # SIGALRM's default action ends a hang
    try:
        assert [p.full_pci_path for p in host_ports(**host.options())] == [str(tmp_path / "s")]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

# ----------------------------------------------------------------------- frameworks.py

NVSHMEM_WHY = ("exact device names with ports: NVSHMEM compares each name with strcmp and "
               "takes ':port' as the port (no prefixes, no '=')")


def test_nvshmem_takes_63_characters_and_48_entries() -> None:
    """nvshmemt_parse_hca_list: a name in char[64] (63 characters and its NUL), at most
    MAX_NUM_HCAS = 48 entries."""
    assert nvshmem_hca_list([("x" * 63, 1)]) == Variable(
        "NVSHMEM_HCA_LIST", "x" * 63 + ":1", NVSHMEM_WHY)
    many = nvshmem_hca_list([(f"d{i}", 1) for i in range(48)])
    assert many.value is not None and len(many.value.split(",")) == 48
    assert nvshmem_hca_list([(f"d{i}", 1) for i in range(49)]) == Variable(
        "NVSHMEM_HCA_LIST", None, "49 NICs: NVSHMEM reads at most 48 entries")


def test_uccl_names_on_port_1_and_numbers() -> None:
    assert uccl_rdma_dev([("mlx5_0", 1), ("mlx5_0", 1)]) == Variable(
        "UCCL_P2P_RDMA_DEV", "mlx5_0", "device names, compared exactly (UCCL has no port "
        "field here)")
    assert uccl_rdma_dev([("4", 1), ("a b", 1)]) == Variable(
        "UCCL_P2P_RDMA_DEV", None, "no NIC UCCL can name (a name that is a number is read as "
        "an index; ',' and blanks split or are trimmed)")
    assert vllm_mapping([]) == Variable("VLLM_GPU_NIC_PCIE_MAPPING", None,
                                        "no GPU of this host has a NIC vLLM can find")


def _pair(gpu: int, dev: str | None, port: int = 1, found: object = True) -> HostPair:
    nic = None if dev is None else f"0000:{gpu + 0x10:02x}:00.0"
    return HostPair(f"GPU{gpu}", f"0000:{gpu + 0x20:02x}:00.0", dev, port, nic,
                    dev if found is True else found)  # type: ignore[arg-type]


def test_vllm_selection_without_a_found_nic_says_only_that() -> None:
    """No GPU's NIC found by vLLM: nothing to select, and no note about ports (there
    are none to compare)."""
    sel = vllm_selection([_pair(0, None), _pair(1, "mlx5_1", found=None)], [], ["mlx5_1"])
    assert sel == (Variable("VLLM_NIC_SELECTION_VARS", None, "no GPU has a NIC vLLM can find"),
                   [], [])


def test_vllm_selection_per_variable() -> None:
    """UCCL_P2P_RDMA_DEV takes no port suffix, so different ports leave only it; a bare
    name that prefixes another device leaves NCCL_IB_HCA out."""
    sel = vllm_selection([_pair(0, "mlx5_0"), _pair(1, "mlx5_1", 2)], ["uccl", "nvshmem"],
                         ["mlx5_0", "mlx5_1"])
    assert sel == (Variable("VLLM_NIC_SELECTION_VARS", "UCCL_P2P_RDMA_DEV",
                            "vLLM sets these per worker to its GPU's RDMA device and the "
                            "suffix"), ["UCCL_P2P_RDMA_DEV"],
                   ["NVSHMEM_HCA_LIST not in VLLM_NIC_SELECTION_VARS: the GPUs' NICs use "
                    "different ports ([1, 2]) and vLLM appends one suffix for all"])
    sel = vllm_selection([_pair(0, "mlx5_0")], ["nccl"], ["mlx5_0", "mlx5_01"])
    assert sel == (Variable("VLLM_NIC_SELECTION_VARS", None, "no variable vLLM can write "
                            "exactly for this host"), [],
                   ["NCCL_IB_HCA not in VLLM_NIC_SELECTION_VARS: vLLM writes the bare name, "
                    "which NCCL matches as a prefix of other devices of this host"])


def test_vllm_takes_the_variables_it_sets_per_worker() -> None:
    """With vLLM, a variable it sets per worker is not written here, UCCL_IB_HCA neither
    (UCCL reads NCCL_IB_HCA); a GPU without a NIC and one whose NIC vLLM cannot find
    are said."""
    env = RankEnvironment((Nic("mlx5_0", 1, "InfiniBand"),),
                          (Variable("NCCL_IB_HCA", "=mlx5_0:1", "r"),))
    out = for_frameworks(env, ["uccl", "vllm", "nccl"], all_devices=["mlx5_0", "mlx5_3"],
                         pairs=[_pair(0, "mlx5_0"), _pair(1, None),
                                _pair(2, "mlx5_3", found=None)])
    per_worker = ("vLLM sets it per worker (VLLM_NIC_SELECTION_VARS) before any value set "
                  "here, which would then follow it")
    assert [(v.name, v.value, v.reason) for v in out.variables] == [
        ("UCCL_P2P_RDMA_DEV", None, per_worker),
        ("UCCL_IB_HCA", None, "unset, UCCL reads NCCL_IB_HCA, which vLLM sets per worker "
         "(VLLM_NIC_SELECTION_VARS)"),
        ("VLLM_GPU_NIC_PCIE_MAPPING", "0000:20:00.0=0000:10:00.0",
         "each GPU's first NIC by PCI address, for the whole host: vLLM gives each worker "
         "the RDMA device at its GPU's NIC address"),
        ("VLLM_NIC_SELECTION_VARS", "UCCL_P2P_RDMA_DEV,NCCL_IB_HCA:1",
         "vLLM sets these per worker to its GPU's RDMA device and the suffix"),
        ("NCCL_IB_HCA", None, per_worker)]
    assert out.notes == (
        "vLLM: GPU1 (0000:21:00.0) has no NIC: a vLLM worker on it stops (no entry in "
        "VLLM_GPU_NIC_PCIE_MAPPING)",
        "vLLM: GPU2's NIC mlx5_3 cannot be found by its PCI address 0000:12:00.0 (its "
        "device link is not a PCI function): left out")


def test_vllm_needs_both_variables() -> None:
    """A mapping whose selection cannot be written (a bare name prefixing another
    device) is not written either, and says why."""
    env = RankEnvironment((Nic("mlx5_1", 1, "InfiniBand"),), ())
    out = for_frameworks(env, ["nccl", "vllm"], pairs=[_pair(0, "mlx5_1")],
                         all_devices=["mlx5_1", "mlx5_10"])
    assert [(v.name, v.value, v.reason) for v in out.variables] == [
        ("VLLM_GPU_NIC_PCIE_MAPPING", None, "vLLM needs both VLLM_GPU_NIC_PCIE_MAPPING and "
         "VLLM_NIC_SELECTION_VARS"),
        ("VLLM_NIC_SELECTION_VARS", None, "no variable vLLM can write exactly for this host")]


def test_each_framework_after_one_not_established() -> None:
    """sglang (nothing written) does not end the list; a variable the environment lacks
    is skipped, the next of the framework written; the NVSHMEM and UCCL reasons."""
    env = RankEnvironment((Nic("mlx5_0", 1, "InfiniBand"),),
                          (Variable("NCCL_SOCKET_IFNAME", "=eth0", "r"),))
    out = for_frameworks(env, ["sglang", "nccl", "nvshmem"])
    assert [(v.name, v.value, v.reason) for v in out.variables] == [
        ("NCCL_SOCKET_IFNAME", "=eth0", "r"),
        ("NVSHMEM_HCA_LIST", "mlx5_0:1", NVSHMEM_WHY),
        ("NVSHMEM_ENABLE_NIC_PE_MAPPING", "1", "NVSHMEM applies NVSHMEM_HCA_LIST only with "
         "it; each PE then takes one device of its list")]
    bad = RankEnvironment((Nic("a,b", 1, "InfiniBand"),),
                          (Variable("NCCL_IB_HCA", None, "no NIC"),
                           Variable("UCX_NET_DEVICES", "a", "r")))
    out = for_frameworks(bad, ["nvshmem", "uccl"])
    assert [(v.name, v.value, v.reason) for v in out.variables][1:] == [
        ("NVSHMEM_ENABLE_NIC_PE_MAPPING", None, "no NVSHMEM_HCA_LIST to apply"),
        ("UCCL_P2P_RDMA_DEV", None, "no NIC UCCL can name (a name that is a number is read "
         "as an index; ',' and blanks split or are trimmed)"),
        ("UCCL_IB_HCA", None, "no NIC")]
    good = RankEnvironment((), (Variable("NCCL_IB_HCA", "=mlx5_0:1", "r"),))
    assert [(v.name, v.value, v.reason) for v in for_frameworks(good, ["uccl"]).variables] == [
        ("UCCL_IB_HCA", "=mlx5_0:1", "NCCL_IB_HCA's value: UCCL parses it with NCCL's rules")]


# ------------------------------------------------------------------- frameworks_map.py


def _nic(device: str, address: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(device=device, port=1, address=address, link_layer="Ethernet",
                           netdevs=("v0",), rate_gbps=100)


def test_vllm_name_and_host_pairs_take_the_first() -> None:
    """vLLM takes the first name, sorted, at a NIC's address; a GPU's pair is its first
    NIC; a NIC without a GPU makes no pair."""
    nics = [SimpleNamespace(name=n, address="0000:06:00.0", kind=k)
            for n, k in (("mlx5_bond_0", "bond"), ("mlx5_0", "pf"), ("mlx5_0.sf", "sf"))]
    host = SimpleNamespace(nics=nics)
    assert vllm_name(host, "0000:06:00.0") == "mlx5_0"  # type: ignore[arg-type]
    gpu = SimpleNamespace(name="GPU0", address="0000:05:00.0")
    plan = [SimpleNamespace(gpu=None, nics=[_nic("x")]),
            SimpleNamespace(gpu=gpu, nics=[_nic("mlx5_0", "0000:06:00.0"), _nic("y")])]
    assert host_pairs(host, plan) == [  # type: ignore[arg-type]
        HostPair("GPU0", "0000:05:00.0", "mlx5_0", 1, "0000:06:00.0", "mlx5_0")]


def test_host_map_and_mooncake_skip_nics_without_a_gpu(tmp_path: Path) -> None:
    """The map's GID is NCCL's scan with the environment given (NCCL_IB_GID_INDEX=0
    takes the link-local GID, which NCCL cannot use); entries without a GPU are skipped,
    not the end."""
    attrs = {"ports/1/gids/1": ipaddress.IPv6Address("::ffff:10.0.0.7").exploded,
             "ports/1/gid_attrs/types/1": "RoCE v2", "ports/1/gid_attrs/ndevs/1": "v0"}
    tree = HostBuilder().rxe(name="rxe0", netdev="v0", ib_attrs=attrs).materialize(tmp_path)
    gpu = SimpleNamespace(index=0, name="GPU0", address="0000:05:00.0", uuid="GPU-1")
    host = SimpleNamespace(numa_affinity=lambda x: (1, "why"), numa_nodes={1: None})
    plan = [SimpleNamespace(gpu=None, nics=[_nic("rxe0")], reason="r0"),
            SimpleNamespace(gpu=gpu, nics=[_nic("rxe0")], reason="r1")]
    doc = host_map(host, plan, sysfs_path=str(tree.sysfs))  # type: ignore[arg-type]
    assert doc == {"schema": "sysverbs.nic-map/1", "host": "this host", "gpus": [{
        "index": 0, "name": "GPU0", "address": "0000:05:00.0", "uuid": "GPU-1",
        "numa_node": 1, "reason": "r1", "nics": [{
            "device": "rxe0", "port": 1, "address": None, "link_layer": "Ethernet",
            "netdevs": ["v0"], "rate_gbps": 100, "gid_index": 1, "gid": "::ffff:10.0.0.7",
            "gid_rule": "RoCE: the scan's last choice (AF_INET, NCCL_IB_ROCE_VERSION_NUM "
                        "default 2)"}]}]}
    forced = host_map(host, plan, sysfs_path=str(tree.sysfs),  # type: ignore[arg-type]
                      environ={"NCCL_IB_GID_INDEX": "0"})
    assert {k: v for k, v in forced["gpus"][0]["nics"][0].items() if k.startswith("gid")} == {
        "gid_index": None, "gid": None,
        "gid_rule": "no suitable GID (NCCL's scan: set by NCCL_IB_GID_INDEX=0)"}
    assert mooncake_topology(host, plan) == {  # type: ignore[arg-type]
        "cpu:1": [["rxe0"], []], "cuda:0": [["rxe0"], []]}


def test_mooncake_prefers_each_nodes_devices() -> None:
    """Each NUMA node prefers the devices on it (numa_affinity's node, not its reason);
    vLLM finds no device at an unknown address, nor for a NIC without one."""
    node = {"a": (0, "x"), "b": (1, "y")}
    host = SimpleNamespace(numa_affinity=lambda d: node[d], numa_nodes={0: None, 1: None},
                           nics=[SimpleNamespace(name="a", address=None, kind="pf")])
    plan = [SimpleNamespace(gpu=SimpleNamespace(index=3), nics=[_nic("b"), _nic("a")])]
    assert mooncake_topology(host, plan) == {  # type: ignore[arg-type]
        "cpu:0": [["a"], ["b"]], "cpu:1": [["b"], ["a"]], "cuda:3": [["b", "a"], []]}
    assert vllm_name(host, None) is None  # type: ignore[arg-type]
    assert vllm_name(host, "0000:06:00.0") is None  # type: ignore[arg-type]

"""sysverbs.placement on odd and broken trees: garbage values, duplicate addresses, open
descriptors, reads outside the roots."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sysverbs.ground.errors import NotFoundError
from sysverbs.placement import assign, assign_rank, read_host
from tests.fuzz.profiles import fuzz_settings

from .pcitree import PciTree
from .placement_trees import dgx_a100, two_socket


def test_distance_is_symmetric_and_order_free(tmp_path: Path) -> None:
    host = read_host(dgx_a100(tmp_path).sys)
    ends = [*host.gpus, *host.nics]
    for a in ends:
        for b in ends:
            assert host.distance(a, b).smi == host.distance(b, a).smi
            assert host.distance(a, b).nccl == host.distance(b, a).nccl
            assert host.distance(a, b).hops == host.distance(b, a).hops


def test_duplicate_bdf_on_two_paths(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    t.pci("pci0000:00/0000:00:01.0")
    t.gpu("pci0000:00/0000:00:01.0/0000:05:00.0")
    # an RDMA device whose parent is a second directory with the same BDF elsewhere
    t.rdma("mlx5_0", "pci0000:80/0000:80:01.0/0000:05:00.0", pci_function=False)
    host = read_host(t.sys)
    assert any("two sysfs paths" in p for p in host.problems)
    assert host.pci["0000:05:00.0"].host_bridge == "pci0000:00"  # the first one is kept


_GARBAGE = st.one_of(st.binary(max_size=40), st.sampled_from(
    [b"", b"\n", b"-1\n", b"0x\n", b"99999999999\n", b"1-\n", b"PCI_ID=zz:yy\n",
     b"4: ACTIVE", b"InfiniBand\n", b"a Gb/sec\n", b"\xff\xfe\n"]))


@fuzz_settings(ci=40, deep=400)
@given(values=st.lists(_GARBAGE, min_size=12, max_size=12))
def test_garbage_values_never_raise(tmp_path_factory: pytest.TempPathFactory,
                                    values: list[bytes]) -> None:
    """Any bytes in the files placement reads give an answer, never an exception; and
    the answer is what the tree still says (derived by hand from two_socket: GPU
    08:00.0 + mlx5_0/1 at 04:00.x under pci0000:00, GPU 85:00.0 + mlx5_2/3 at 89:00.x
    under pci0000:80, every port ACTIVE Ethernet 100 Gb/s)."""
    assume(values[7].strip() != b"Ethernet")
    t = two_socket(tmp_path_factory.mktemp("g"))
    targets = [
        "devices/pci0000:00/0000:00:03.0/0000:08:00.0/uevent",
        "devices/pci0000:00/0000:00:03.0/0000:08:00.0/numa_node",
        "devices/pci0000:00/0000:00:03.0/0000:08:00.0/local_cpulist",
        "devices/pci0000:00/0000:00:03.0/0000:08:00.0/class",
        "devices/pci0000:80/0000:80:02.0/0000:89:00.0/uevent",
        "devices/pci0000:80/0000:80:02.0/0000:89:00.0/numa_node",
        "devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0/ports/1/state",
        "devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0/ports/1/link_layer",
        "devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0/ports/1/rate",
        "devices/system/node/node0/cpulist",
        "devices/pci0000:00/0000:00:03.0/uevent",
        "devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0/node_guid",
    ]
    for rel, value in zip(targets, values):
        (t.sys / rel).write_bytes(value)
    host = read_host(t.sys, t.proc)
    from sysverbs.placement import host_json, render_matrix

    render_matrix(host)
    json.dumps(host_json(host))
    plan = assign(host, min_rate_gbps=10, link_layer="Ethernet")
    for a in plan:
        json.dumps(a.as_dict())
    with contextlib.suppress(NotFoundError):  # a rank without a GPU: said, not a crash
        assign_rank(host, env={"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "GPU-1,0"})
    # 08:00.0's uevent (PCI_CLASS) and class file both hold junk in every example, so
    # nothing says it is a display controller; 85:00.0's files are untouched.
    assert [g.address for g in host.gpus] == ["0000:85:00.0"]
    # no device link was touched: every RDMA device stays at its PCI function
    assert [(n.name, n.address) for n in host.nics] == [
        ("mlx5_0", "0000:04:00.0"), ("mlx5_1", "0000:04:00.1"),
        ("mlx5_2", "0000:89:00.0"), ("mlx5_3", "0000:89:00.1")]
    # GPU 85:00.0 keeps both ports of its card, each one root port away (PHB)
    assert [(a.gpu.address, [(n.device, n.smi) for n in a.nics]) for a in plan] == [
        ("0000:85:00.0", [("mlx5_2", "PHB"), ("mlx5_3", "PHB")])]
    # mlx5_0's port files are junk: its state is ACTIVE only if the file says the
    # kernel's "4: ACTIVE"; its link layer is never "Ethernet" (assumed above)
    code = "link_layer" if values[6].strip() == b"4: ACTIVE" else "port_not_active"
    assert {(f.device, f.port, f.code) for f in plan[0].filtered} == {("mlx5_0", 1, code)}
    # node0's cpulist: empty is a memoryless node; bytes no CPU list has are reported
    unreadable = "devices/system/node/node0/cpulist unreadable"
    if values[9] in (b"", b"\n"):
        assert unreadable not in host.problems and host.numa_nodes[0] == frozenset()
    elif values[9].translate(None, b"0123456789-,\n"):
        assert unreadable in host.problems


_HEX4 = st.integers(0, 0xFFFF)


@fuzz_settings(ci=40, deep=400)
@given(driver=st.one_of(st.none(), st.just(""), st.from_regex(r"[a-z0-9_.\-]{1,12}",
                                                             fullmatch=True)),
       cls=st.integers(0, 0xFFFFFF), ids=st.tuples(_HEX4, _HEX4, _HEX4, _HEX4),
       form=st.sampled_from(["kernel", "kernel+modalias", "no slot", "lower case",
                             "reordered", "padded class", "PCI_ID twice"]))
def test_uevent_ids_do_not_depend_on_its_form(tmp_path_factory: pytest.TempPathFactory,
                                              driver: str | None, cls: int,
                                              ids: tuple[int, int, int, int], form: str
                                              ) -> None:
    """The ids of a ``uevent`` as the kernel writes it (read in one match) are those
    of the same lines in any other form (read line by line): lower-case hex, another
    order, a missing line; a key given twice counts as its last value."""
    v, d, sv, sd = ids
    x = (lambda n, w: f"{n:0{w}x}") if form == "lower case" else (lambda n, w: f"{n:0{w}X}")
    lines = [f"PCI_CLASS={x(cls, 6 if form == 'padded class' else 1)}",
             f"PCI_ID={x(v, 4)}:{x(d, 4)}", f"PCI_SUBSYS_ID={x(sv, 4)}:{x(sd, 4)}",
             "PCI_SLOT_NAME=0000:05:00.0"]
    if form == "no slot":
        lines.pop()
    if form == "kernel+modalias":
        lines.append(f"MODALIAS=pci:v0000{v:04X}d0000{d:04X}sv0000{sv:04X}sd0000{sd:04X}"
                     f"bc{cls >> 16:02X}sc{cls >> 8 & 0xFF:02X}i{cls & 0xFF:02X}")
    if form == "reordered":
        lines.reverse()
    if driver is not None:
        lines.insert(0, f"DRIVER={driver}")
    if form == "PCI_ID twice":  # the later line counts
        lines[lines.index(f"PCI_ID={x(v, 4)}:{x(d, 4)}")] = f"PCI_ID={v ^ 1:04X}:{d ^ 1:04X}"
        lines.append(f"PCI_ID={x(v, 4)}:{x(d, 4)}")
    t = PciTree(tmp_path_factory.mktemp("u"))
    t.pci("pci0000:00/0000:00:01.0")
    t.pci("pci0000:00/0000:00:01.0/0000:05:00.0")
    uevent = t.sys / "devices/pci0000:00/0000:00:01.0/0000:05:00.0/uevent"
    uevent.write_text("\n".join(lines) + "\n")
    got = read_host(t.sys).pci["0000:05:00.0"]
    assert (got.vendor, got.device, got.subsystem_vendor, got.subsystem_device) == ids
    assert got.pci_class == cls
    assert got.driver == (driver or None)


def test_reading_a_host_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """The bus walk's directory descriptors are closed, on a whole tree and on one
    whose bus/pci/devices or devices/ cannot be opened as a directory."""
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    t = two_socket(tmp_path / "host")
    before = open_fds()
    host = read_host(t.sys, t.proc)
    assert host.gpus and host.nics and open_fds() == before
    devices = t.sys / "devices"
    devices.rename(t.sys / "devices.real")
    devices.symlink_to("devices.real")  # not opened (O_NOFOLLOW): looked up by path
    assert len(read_host(t.sys).gpus) == len(host.gpus) and open_fds() == before


def test_without_bus_pci_devices_the_tree_is_walked(tmp_path: Path) -> None:
    """A tree with no bus/pci/devices (a partial copy of /sys): the PCI functions are
    found by walking devices/pci*/."""
    t = PciTree(tmp_path)
    t.pci("pci0000:00/0000:00:01.0", listed=False)
    t.gpu("pci0000:00/0000:00:01.0/0000:01:00.0")
    t.rdma("mlx5_0", "pci0000:00/0000:00:01.0/0000:02:00.0")
    for link in (t.sys / "bus/pci/devices").iterdir():
        link.unlink()
    host = read_host(t.sys)
    assert [g.address for g in host.gpus] == ["0000:01:00.0"]
    assert host.smi_class(host.gpus[0], "mlx5_0") == "PIX"


def test_nothing_outside_the_roots_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """Every path placement opens, lists, stats or reads a link of is below the given
    roots, also when the tree's links point out of it (absolute /sys/... links are
    taken as meaning this root; anything else outside is dangling)."""
    t = two_socket(tmp_path / "host")
    os.symlink("/etc", t.sys / "bus/pci/devices/0000:00:1f.0")
    os.symlink("/sys/devices/pci0000:00/0000:00:03.0/0000:08:00.0",
               t.sys / "bus/pci/devices/0000:08:00.0.abs")
    os.symlink("/proc/self", t.sys / "class/net/lo")
    t.rdma("rxe0", None, soft_parent="lo")
    roots = (str(tmp_path / "host"),)
    seen: list[str] = []
    fd_path = os.readlink  # (not the spy)

    def spy(name: str) -> None:
        real = getattr(os, name)

        def wrapper(path: object, *a: object, **k: object) -> object:
            if not isinstance(path, int):
                where = os.fsdecode(path)  # type: ignore[arg-type]
                fd = k.get("dir_fd")
                if isinstance(fd, int):  # a name looked up from an open directory
                    where = os.path.join(fd_path(f"/proc/self/fd/{fd}"), where)
                seen.append(where)
            return real(path, *a, **k)

        monkeypatch.setattr(os, name, wrapper)

    import sysverbs.placement._assign  # noqa: F401  (imports done before spying)
    for name in ("open", "readlink", "listdir", "stat", "lstat", "scandir"):
        spy(name)
    host = read_host(t.sys, t.proc, t.dev)
    from sysverbs.placement import host_json, render_matrix

    render_matrix(host)
    host_json(host)
    assign(host)
    monkeypatch.undo()
    assert len(seen) > 50
    outside = [p for p in seen if not p.startswith(roots)]
    assert outside == []
    assert any("rxe0: unplaced" in p for p in host.problems)

"""The small modules of placement/, compat/pyverbs/ and fleet/ (issue 41: the mutants of ``make
mutation``; rank/'s are in tests/test_mut_small.py): names in the PCI tree, the host
model's records and lookups on a small generated tree, what pyverbs' compat leaves out,
the HTTP server's limits.
No subprocess.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sysverbs.compat.pyverbs import _scope
from sysverbs.fleet import serve
from sysverbs.ground.errors import OutOfScopeError, WrongTypeError
from sysverbs.placement import _names as names_
from sysverbs.placement import read_host
from sysverbs.placement._distance import Distance
from sysverbs.placement._topology import (
    Anchor,
    Nic,
    Port,
    Topology,
    endpoints,
    host_arg,
    smi_between,
    smi_hops,
)
from tests.pcitree import PciTree
from tests.placement_trees import ETH
from tests.test_exporter_serve import exchange

# ------------------------------------------------------------------ placement/_names.py


def test_bdf_keys_sort_as_numbers() -> None:
    names = ["0000:3b:00.1", "10000:00:00.0", "junk", "0001:00:00.0", "0000:3B:00.0",
             "0000:3b:00.8", "0000:02:1f.7", "0002:00:00.0", "pci0000:00"]
    assert [names_.bdf_key(n) for n in names] == [
        (0, "3b:00.1"), (0x10000, "00:00.0"), (1 << 32, ""), (1, "00:00.0"), (0, "3b:00.0"),
        (1 << 32, ""), (0, "02:1f.7"), (2, "00:00.0"), (1 << 32, "")]
    assert sorted(names, key=names_.bdf_key) == [
        "0000:02:1f.7", "0000:3B:00.0", "0000:3b:00.1", "0001:00:00.0", "0002:00:00.0",
        "10000:00:00.0", "junk", "0000:3b:00.8", "pci0000:00"]


@pytest.mark.parametrize("name,kind", [
    ("0000:00:00.0", 1), ("abcdef01:ff:1f.7", 1), ("0000:00:00.0 ", 0), ("000:00:00.0", 0),
    ("0000:00:00.8", 0), ("0000:0:00.0", 0), ("pci0000:00", 2), ("pci10000:ff", 2),
    ("pci0000:0", 0), ("pci0000:000", 0), ("PCI0000:00", 0), ("usb1", 0), ("", 0),
])
def test_name_kinds(name: str, kind: int) -> None:
    for _ in range(2):  # asked, then remembered
        assert names_.name_kind(name) == kind
        assert names_.is_bdf(name) is (kind == 1)
        assert names_.is_host_bridge(name) is (kind == 2)


def test_natural_key() -> None:
    assert names_.natural_key("mlx5_10") == ("mlx", 5, "_", 10, "")
    assert sorted(["mlx5_10", "mlx5_2", "mlx4_0", "irdma1"], key=names_.natural_key) == [
        "irdma1", "mlx4_0", "mlx5_2", "mlx5_10"]


# ------------------------------------------------------------------ placement/_topology.py


def _small_host(tmp: Path) -> Topology:
    """Two GPUs behind one root port, a PF with an SF beside it, rxe on a virtual netdev."""
    t = PciTree(tmp)
    rp = "pci0000:00/0000:00:02.0"
    t.pci(rp)
    t.pci("pci0000:00/0000:00:03.0")
    t.gpu("pci0000:00/0000:00:03.0/0000:05:00.0", uuid="GPU-abcdef12-0000", minor=3)
    t.gpu("pci0000:00/0000:00:03.0/0000:06:00.0", numa=1)
    pf = f"{rp}/0000:03:00.0"
    t.rdma("mlx5_0", pf, ports=(ETH,), netdev="ens1f0")
    t.rdma("mlx5_3", f"{pf}/mlx5_core.sf.2", ports=(ETH,), pci_function=False)
    t.rdma("rxe1", None, ports=(ETH,), soft_parent="veth0")
    t.netdev("veth0", None)
    return read_host(t.sys, t.proc)


def test_topology_lookups(tmp_path: Path) -> None:
    host = _small_host(tmp_path)
    g0, g1 = host.gpus
    assert (g0.name, g1.name) == ("GPU0", "GPU1")
    for key in (0, "0000:05:00.0", "GPU0", "GPU-abcdef12", "GPU-ABCDEF"):
        assert host.gpu(key) is g0, key
    for key in (1, "GPU1", "0000:06:00.0"):
        assert host.gpu(key) is g1, key
    for key in (2, "GPU2", "abcdef12", "GPU-abcdef13", "0000:03:00.0"):
        assert host.gpu(key) is None, key
    assert [host.nic(n) for n in ("mlx5_0", "mlx5_3", "nosuch")] == [
        host.nics[0], host.nics[1], None]
    assert host.nic("rxe1") is host.nics[2]  # the table made at the first call


def test_topology_distances(tmp_path: Path) -> None:
    host = _small_host(tmp_path)
    g0, g1 = host.gpus
    pf, sf, rxe = host.nics
    assert host.distance(pf, sf) == host.distance("mlx5_0", "mlx5_3") == Distance(
        "PIX", "LOC", 0, "two RDMA devices on one PCI function")
    assert host.distance("mlx5_0", "mlx5_0") == Distance("X", "LOC", 0, "same PCI function")
    assert host.distance("0000:03:00.0", "mlx5_0").smi == "X"  # a BDF is not an RDMA device
    anchor = Anchor("ens1f0", "netdev", "0000:03:00.0", host.pci["0000:03:00.0"], None, "net")
    assert host.smi_class(anchor, "mlx5_3") == "X"
    assert anchor.as_dict() == {"name": "ens1f0", "kind": "netdev", "address": "0000:03:00.0",
                                "numa_node": 0, "via": "net"}
    assert host.distance(g0, "mlx5_0") == Distance(
        "PHB", "PHB", 3, "they meet at host bridge pci0000:00")
    assert (host.smi_class(g0, "mlx5_0"), host.nccl_path(g0, "mlx5_0")) == ("PHB", "PHB")
    for a, b, why in ((g0, rxe, "rxe1"), ("rxe1", g0, "rxe1"), (g0, "0000:99:00.0",
                                                                 "0000:99:00.0")):
        assert host.distance(a, b) == Distance(
            None, None, None, f"{why} is not placed on a PCI function")
        assert (host.smi_class(a, b), host.nccl_path(a, b)) == (None, None)
    assert [host.numa_affinity(x) for x in (g1, "0000:06:00.0", "mlx5_3", rxe, "nosuch")] == [
        (1, "numa_node"), (1, "numa_node"), (0, "numa_node"), (None, "unknown"),
        (None, "unknown")]
    ends = endpoints(host, [g1, "mlx5_3", rxe])
    assert ends == [(host.pci["0000:06:00.0"], False, "GPU1"),
                    (host.pci["0000:03:00.0"], True, "mlx5_3"), (None, True, "rxe1")]
    assert smi_between(host, ends[1], ends[1])[:3] == ("X", 0, "same PCI function")
    assert smi_hops(host, g0, g1) == smi_between(host, *endpoints(host, [g0, g1]))


def test_nic_netdevs_and_host_argument(tmp_path: Path) -> None:
    ports = tuple(Port(n, "ACTIVE", "Ethernet", 100.0, None, nd) for n, nd in (
        (1, ("b", "a")), (2, ()), (3, ("a", "c", "b"))))
    assert Nic("x", None, "pf", "", None, ports, False, None).netdevs == ("b", "a", "c")
    host = _small_host(tmp_path)
    assert host_arg(host) is host
    with pytest.raises(WrongTypeError, match=r"^host must be a Topology from read_host\(\), "
                       "not str$"):
        host_arg("host")


# ------------------------------------------------------------------ compat/pyverbs/_scope.py


def test_out_of_scope_names() -> None:
    e = _scope.out_of_scope("sysverbs.compat.pyverbs.qp.QP")
    assert str(e).startswith("sysverbs.compat.pyverbs.qp.QP (pyverbs.qp.QP) is out of scope: "
                             "sysverbs discovers RDMA devices")
    assert (e.name, isinstance(e, OutOfScopeError)) == ("sysverbs.compat.pyverbs.qp.QP", True)
    other = _scope.out_of_scope("pyverbs.cq")
    assert str(other).startswith("pyverbs.cq (pyverbs.cq) is out of scope: ")


@pytest.mark.parametrize("name,refused", [
    ("sysverbs.compat.pyverbs.qp", True), ("sysverbs.compat.pyverbs.providers.mlx5", True),
    ("sysverbs.compat.pyverbs.qpx", False), ("sysverbs.compat.pyverbs", False),
    ("sysverbs.compat.pyverbs.device", False), ("x.sysverbs.compat.pyverbs.qp", False),
    ("sysverbs.compat.pyverbsqp", False), ("pyverbs.qp", False),
])
def test_the_finder_answers_only_pyverbs_modules(name: str, refused: bool) -> None:
    finder = _scope.OutOfScopeFinder()
    if refused:
        with pytest.raises(OutOfScopeError, match=rf"^{re.escape(name)} \(pyverbs"):
            finder.find_spec(name)
    else:
        assert finder.find_spec(name) is None


def test_install_finder_once_and_last(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    others = [f for f in sys.meta_path if not isinstance(f, _scope.OutOfScopeFinder)]
    monkeypatch.setattr(sys, "meta_path", list(others))
    _scope.install_finder()
    _scope.install_finder()
    assert sys.meta_path[:-1] == others
    assert isinstance(sys.meta_path[-1], _scope.OutOfScopeFinder)


def test_a_topology_made_by_hand_is_a_live_one() -> None:
    """Made without read_host (the API's own constructor): no problems, not recorded."""
    host = Topology("/sys", "/proc", "/dev", {}, (), {}, (), ())
    assert (host.problems, host.recorded, host.gpu(0), host.nic("mlx5_0")) == (
        (), False, None, None)


# ------------------------------------------------------------------ fleet/serve.py


def test_the_exporters_limits_are_the_documented_ones() -> None:
    """docs/fleet.md, "The exporter's limits": 5 s and 8 KiB for a request head, 10 s
    for an answer, snapshots reused for 5 s, at most 1,024 connections."""
    assert (serve.READ_TIMEOUT, serve.WRITE_TIMEOUT, serve.MAX_AGE) == (5.0, 10.0, 5.0)
    assert (serve.MAX_REQUEST, serve.MAX_CONNECTIONS) == (8192, 1024)


def test_connection_cap_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    assert [serve.connection_cap(n) for n in (0, 2, 2047, 2048, 2050, -1, -2)] == [
        1, 1, 1023, 1024, 1024, 1024, 1024]
    assert serve.connection_cap(resource.RLIM_INFINITY) == 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = min(soft, 256)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))
    try:
        assert serve.connection_cap() == lower // 2  # the soft limit, not the hard one
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_servers_cap_and_a_close_before_start() -> None:
    caps = []
    for asked in (0, 1, 5, None):
        s = serve.Server("127.0.0.1", 0, lambda: 0, lambda a: ("text/plain", lambda v: b""),
                         max_connections=asked)
        caps.append(s.cap)
        s.close()  # never started: closes its sockets itself
        assert s._listener.fileno() == -1
    assert caps == [1, 1, 5, serve.connection_cap()]


def test_a_request_head_of_exactly_max_request_bytes() -> None:
    """8192 bytes with its blank line is answered; one byte more is 431."""
    s = serve.Server("127.0.0.1", 0, lambda: 1, lambda a: ("text/plain", lambda v: b"ok\n"),
                     read_timeout=5).start()
    try:
        for size, status in ((8192, b"200"), (8193, b"431")):
            start = b"GET /metrics HTTP/1.1\r\nX: "
            head = start + b"x" * (size - len(start) - 4) + b"\r\n\r\n"
            assert len(head) == size
            assert exchange(s.port, head).split(b" ")[1] == status, size
    finally:
        s.close()


def test_a_page_that_cannot_be_made_is_a_500() -> None:
    def fail(value: int) -> bytes:
        raise ValueError("no page")

    errors: list[str] = []
    s = serve.Server("127.0.0.1", 0, lambda: 1, lambda a: ("text/plain", fail),
                     on_error=errors.append).start()
    try:
        for method, body in ((b"GET", b"500 Internal Server Error\n"), (b"HEAD", b"")):
            answer = exchange(s.port, method + b" /metrics HTTP/1.1\r\n\r\n")
            head, _, got = answer.partition(b"\r\n\r\n")
            assert head.split(b"\r\n") == [
                b"HTTP/1.1 500 Internal Server Error", b"Content-Type: text/plain; charset=utf-8",
                b"Content-Length: 26", b"Connection: close"]
            assert got == body
        assert errors == ["the metrics page could not be made: ValueError: no page"] * 2
    finally:
        s.close()

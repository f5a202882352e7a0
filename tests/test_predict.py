"""``sysverbs doctor --predict`` (sysverbs/rank/predict.py) and ``no_rdma_gid_for_address``
(sysverbs/rank/addrgid.py): pure rules on data, then the command on fixture trees.

No real counterpart runs here: UCX's ``ucx_info -d`` and librdmacm's
``rdma_resolve_addr`` need a kernel with RDMA devices (the kernel VM's rxe: the lead's
checklist in docs/diagnose.md, "Predicted"); the UCX rules are openucx's port checks
(``uct_ib_device_port_check``), pinned below."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from sysverbs import testing
from sysverbs.placement import read_host
from sysverbs.rank.addrgid import RocePort, address_gid_findings, roce_ports
from sysverbs.rank.gdr import GdrPair, GdrSupport
from sysverbs.rank.predict import DeviceView, NcclView, PortView, predict, ucx_transports
from sysverbs.rank.whynot import read_findings

IB = PortView("mlx5_0", 1, "ACTIVE", "InfiniBand", 1)
OK = GdrSupport("peermem", "/sys/module/nvidia_peermem/version exists")


def _dev(name: str = "mlx5_0", provider: str = "mlx5", *ports: PortView, usable: bool = True,
         node_type: str = "CA", error: str = "") -> DeviceView:
    return DeviceView(name, provider, True, usable, node_type, error, ports or (IB,))


def _by_lib(devices: list[DeviceView], host: tuple[str, ...] = (), **kw: object) -> dict[
        str, tuple[str, str, tuple[str, ...]]]:
    kw.setdefault("nccl", NcclView("ib", ("mlx5_0:1",), ""))
    kw.setdefault("gdr", OK)
    return {p.library: (p.outcome, p.reason, p.details)
            for p in predict(devices, host, **kw)}  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ UCX


@pytest.mark.parametrize("dev,lines", [
    (_dev(), ["mlx5_0:1 rc_verbs ud_verbs rc_mlx5 ud_mlx5 dc_mlx5"]),
    (_dev("rxe0", "rxe", PortView("rxe0", 1, "ACTIVE", "Ethernet", 2)),
     ["rxe0:1 rc_verbs ud_verbs"]),
    (_dev("rdmap0s6", "efa", PortView("rdmap0s6", 1, "ACTIVE", "Unspecified", 1)),
     ["rdmap0s6:1 srd"]),
    # skipped ports: not ACTIVE (UCS_ERR_UNREACHABLE), RoCE without a GID
    (_dev("mlx5_1", "mlx5", PortView("mlx5_1", 1, "DOWN", "InfiniBand", 1),
          PortView("mlx5_1", 2, "ACTIVE", "Ethernet", 0)), []),
    (_dev("iwp0", "cxgb4", node_type="RNIC"), []),   # iWARP: not IBV_TRANSPORT_IB
    (_dev(usable=False, error="no_dev_node"), []),
])
def test_ucx_transports(dev: DeviceView, lines: list[str]) -> None:
    assert ucx_transports(dev) == lines


def test_ucx_says_why_nothing() -> None:
    assert _by_lib([_dev("iwp0", "cxgb4", node_type="RNIC")])["ucx"][:2] == (
        "no IB transport (tcp, shared memory only)",
        "iWARP devices: UCX's IB transports need the InfiniBand transport type")
    down = _dev("mlx5_0", "mlx5", PortView("mlx5_0", 1, "INIT", "InfiniBand", 1))
    assert _by_lib([down])["ucx"][1] == "no ACTIVE port with a GID"


# ---------------------------------------------------------------- libibverbs, librdmacm


def test_libibverbs_and_librdmacm() -> None:
    good, bad = _dev(), _dev("mlx5_1", usable=False, error="dev_node_access")
    got = _by_lib([good, bad])
    assert got["libibverbs"] == ("lists 2, 1 open", "mlx5_1: dev_node_access", ("mlx5_0",))
    assert got["librdmacm"] == ("connects through 1 device(s)", "rdma_cm present, devices "
                                "open", ("mlx5_0",))
    assert _by_lib([good], ("rdma_cm_abi",))["librdmacm"][:2] == (
        "rdma_get_devices fails (EPERM)", "rdma_cm_abi")
    assert _by_lib([bad])["librdmacm"][:2] == ("rdma_get_devices fails (ENODEV)",
                                               "no listed device opens")
    assert _by_lib([good], ("no_rdma_cm",))["librdmacm"][1] == "no_rdma_cm"
    none = DeviceView("mlx5_0", "", False, False, "CA", "no_provider", (IB,))
    assert _by_lib([none])["libibverbs"][:2] == ("lists no device", "no_provider")
    assert _by_lib([], ("no_kernel_support",))["libibverbs"][:2] == (
        "lists no device", "no_kernel_support")


# ------------------------------------------------------------------------------ NCCL


def _pair(enabled: object) -> GdrPair:
    code = "gdr_disabled_by_distance" if enabled is False else None  # SYS beyond P2C
    return GdrPair(0, "0000:01:00.0", "mlx5_0", 1, "SYS", "P2C", enabled, code, "r")  # type: ignore


@pytest.mark.parametrize("nccl,gdr,pairs,want", [
    (NcclView("", (), "NCCL_NET=IB but no port"), OK, (),
     ("fails to initialise", "NCCL_NET=IB but no port")),
    (NcclView("socket", (), "NCCL's IB transport finds no usable port"), OK, (),
     ("sockets (TCP)", "NCCL's IB transport finds no usable port")),
    (NcclView("ofi", (), ""), OK, (), ("aws-ofi-nccl (Libfabric)", "ofi")),
    (NcclView("ib", ("mlx5_0:1",), ""), OK, (_pair(True),),
     ("IB transport on 1 port(s), GDR (peermem)", OK.reason)),
    (NcclView("ib", ("mlx5_0:1",), ""), GdrSupport("none", "x"), (_pair(False),),
     ("IB transport on 1 port(s), no GDR", "gdr_unavailable")),
    (NcclView("ib", ("mlx5_0:1",), ""), OK, (_pair(True), _pair(False)),
     ("IB transport on 1 port(s), no GDR on 1 of 2 GPU-NIC pairs",
      "gdr_disabled_by_distance")),
    (NcclView("ib", ("mlx5_0:1",), ""), GdrSupport("n/a", "no NVIDIA GPU"), (),
     ("IB transport on 1 port(s), GDR n/a", "no NVIDIA GPU")),
])
def test_nccl(nccl: NcclView, gdr: GdrSupport, pairs: tuple[GdrPair, ...],
              want: tuple[str, str]) -> None:
    assert _by_lib([_dev()], nccl=nccl, gdr=gdr, pairs=pairs)["nccl"][:2] == want


# ------------------------------------------------------------ no_rdma_gid_for_address

PORT = RocePort("mlx5_2", 1, ("ens1f0",), ("fe80::ba59:9fff:fe12:3456", "::ffff:192.168.7.1",
                                           "2001:db8::7"))


@pytest.mark.parametrize("addresses,ports", [
    ({"ens1f0": ("192.168.7.1",)}, []),
    ({"ens1f0": ("2001:db8::7",)}, []),
    ({"ens1f0": ("fe80::ba59:9fff:fe12:3456%ens1f0",)}, []),  # link-local: never counts
    ({"ens1f0": ()}, []),                                    # no address: nothing to say
    ({"ens1f0": ("192.168.7.2",)}, [("mlx5_2", 1, ("192.168.7.2",))]),
    ({"ens1f0": ("192.168.7.2", "2001:db8::7")}, []),         # one with a GID is enough
    # a pod: a veth, no RoCE netdev here, its address on no GID
    ({"lo": ("127.0.0.1", "::1"), "eth0": ("10.244.3.17",)}, [(None, None, ("10.244.3.17",))]),
    # macvlan on the RoCE netdev: the kernel adds its address's GID
    ({"net1": ("192.168.7.1",)}, []),
    ({"lo": ("127.0.0.1",)}, []),
    ({"eth0": ("not-an-address",)}, []),
])
def test_address_gids(addresses: dict[str, tuple[str, ...]], ports: list[object]) -> None:
    found = address_gid_findings([PORT], addresses)
    assert [(f.device, f.port, f.addresses) for f in found] == ports


def test_no_roce_port_no_finding() -> None:
    assert address_gid_findings([], {"eth0": ("10.0.0.1",)}) == []
    assert address_gid_findings([PORT._replace(gids=())], {"eth0": ("10.0.0.1",)}) == []


def test_the_rxe_fixture_has_only_link_local_gids(tmp_path: Path) -> None:
    """rxe: rxe0 on ens3 with only its fe80:: GID; ens3 given an IPv4 address (as the
    kernel would list it) has no GID: the port's finding, read from the tree's sysfs."""
    host = read_host(str(testing.materialize("rxe", tmp_path).sysfs))
    assert roce_ports(host)[0] == RocePort("rxe0", 1, ("ens3",), ("fe80::5054:ff:fe12:3456",))
    found = read_findings(host, {}, live=True, addresses={"ens3": ("192.168.122.10",)})
    assert [(f.device, f.port, f.addresses) for f in found.addr] == [
        ("rxe0", 1, ("192.168.122.10",))]
    assert found.reasons()[0][0] == "no_rdma_gid_for_address"
    assert read_findings(host, {}, live=False, addresses={"ens3": ("1.2.3.4",)}).addr == ()


# ----------------------------------------------------------------------- the command


def test_doctor_predict_on_the_rxe_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    from sysverbs.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with monkeypatch.context() as m:
        for name in [k for k in os.environ if k.startswith("NCCL_")]:
            m.delenv(name)
        m.setattr(sys, "stdout", out)
        rc = main(["doctor", "--predict", "--json", "--fixture", "rxe"])
        out.flush()
    doc = json.loads(out.buffer.getvalue())  # type: ignore[attr-defined]
    assert rc == 0
    assert doc["predict"] == [
        {"library": "libibverbs", "outcome": "lists 2, 2 open",
         "reason": "every listed device opens", "details": ["rxe0", "rxe1"]},
        {"library": "librdmacm", "outcome": "connects through 2 device(s)",
         "reason": "devices open; a recording: rdma_cm not checked",
         "details": ["rxe0", "rxe1"]},
        {"library": "nccl", "outcome": "IB transport on 2 port(s), GDR n/a",
         "reason": "no NVIDIA GPU", "details": ["rxe0:1", "rxe1:1"]},
        {"library": "ucx", "outcome": "2 IB device port(s)",
         "reason": "ACTIVE ports with a GID on open devices",
         "details": ["rxe0:1 rc_verbs ud_verbs", "rxe1:1 rc_verbs ud_verbs"]},
        {"library": "libfabric-verbs",
         "outcome": "verbs;ofi_rxm domains for rxe0, rxe1; dgram for rxe0, rxe1",
         "reason": "each device: an ACTIVE port, a GID or an address for MSG",
         "details": [f"{p} {d}{s} {t}" for d in ("rxe0", "rxe1") for p, s, t in (
             ("verbs;ofi_rxm", "", "FI_EP_RDM"), ("verbs", "", "FI_EP_MSG"),
             ("verbs", "-dgram", "FI_EP_DGRAM"), ("verbs;ofi_rxd", "-dgram", "FI_EP_RDM"))]}]
    assert doc["gdr"] == {"state": "n/a", "reason": "no NVIDIA GPU", "pairs": []}
    assert doc["address_gids"] == []  # a recording: not this namespace's


# --------------------------------------------------- a real network namespace (a pod)

_POD = """
import json, subprocess, sys
from sysverbs.placement import read_host
from sysverbs.rank.rtnetlink import interface_addresses
from sysverbs.rank.whynot import read_findings
got = interface_addresses()
ip = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout
found = read_findings(read_host(sys.argv[1]), {}, live=True)
print(json.dumps({"got": got, "ip": ip, "addr": [f.as_dict() for f in found.addr]}))
"""


def test_a_pods_namespace_from_the_real_kernel(tmp_path: Path) -> None:
    """A new network namespace (as a pod has) with a veth ``eth0`` 10.244.3.17 and an IPv6
    address on its peer: rtnetlink names and addresses them as ``ip -o addr`` does (the
    names from the kernel's RTM_GETLINK: ``/sys/class/net`` is the host's here, and once
    named them wrongly), and the rxe fixture's RoCE ports, whose GIDs carry neither, give
    the namespace's ``no_rdma_gid_for_address``."""
    import shutil
    import subprocess

    from tests.conftest import require

    missing = [t for t in ("unshare", "ip") if shutil.which(t) is None]
    require(f"{', '.join(missing)} not installed" if missing else
            None if os.geteuid() == 0 else "needs root (a network namespace)",
            "unshare and ip in a new network namespace")
    sysfs = str(testing.materialize("rxe", tmp_path).sysfs)
    script = ("ip link add eth0 type veth peer name eth1 && "
              "ip addr add 10.244.3.17/24 dev eth0 && ip -6 addr add 2001:db8::5/64 "
              "dev eth1 nodad && ip link set lo up && "
              'exec "$0" -c "$1" "$2"')
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    p = subprocess.run(["unshare", "-n", "sh", "-c", script, sys.executable, _POD, sysfs],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    want: dict[str, list[str]] = {}
    for line in doc["ip"].splitlines():
        name, _, rest = line.split(None, 1)[1].partition(" ")
        addr = rest.split()[1].split("/")[0]
        want.setdefault(name.split("@")[0], []).append(addr)
    assert {k: sorted(v) for k, v in doc["got"].items()} == {k: sorted(v) for k, v in
                                                              want.items()}
    assert doc["got"]["eth0"] == ["10.244.3.17"] and doc["got"]["eth1"] == ["2001:db8::5"]
    assert [(f["device"], f["port"], f["addresses"]) for f in doc["addr"]] == [
        (None, None, ["10.244.3.17", "2001:db8::5"])]

"""``doctor --predict``'s ``libfabric-verbs`` (sysverbs/rank/predict.py ``fabric_verbs``,
the rules of sysverbs/rank/fabric_rules.py read in libfabric's verbs provider): the pure
rules on data, the command on recorded trees, and this host's real ``fi_info -p verbs``
(Debian's libfabric-bin) beside it.  The kernel VM's checks, on rxe devices in each
access situation, are tests/kernel/test_access_lab.py's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Optional

import pytest

from sysverbs.rank.addrgid import AddressGidFinding
from sysverbs.rank.fabric_rules import RULES
from sysverbs.rank.predict import DeviceView, PortView, Prediction, fabric_verbs
from tests.conftest import require
from tests.fabric_oracle import fi_info_entries, predicted
from tests.inprocess import run_main


def _port(dev: str, netdev: str = "", state: str = "ACTIVE", gids: int = 1,
          link: str = "Ethernet") -> PortView:
    return PortView(dev, 1, state, link, gids, (netdev,) if netdev else ())


def _dev(name: str, *ports: PortView, node_type: str = "CA", provider: str = "mlx5",
         usable: bool = True) -> DeviceView:
    return DeviceView(name, provider, True, usable, node_type, "" if usable else "no_dev_node",
                      ports or (_port(name, f"eth_{name}"),))


def _fab(devices: list[DeviceView], host: tuple[str, ...] = (), env: Optional[dict[str, str]]
         = None, addresses: Optional[dict[str, tuple[str, ...]]] = None,
         addr: tuple[AddressGidFinding, ...] = (), none_why: str = "") -> Prediction:
    return fabric_verbs(devices, host, env or {}, addresses, addr, none_why)


ROCE = _dev("mlx5_0", _port("mlx5_0", "eth0"))
ROCE1 = _dev("mlx5_1", _port("mlx5_1", "eth1"))
IWARP = _dev("cxgb4_0", _port("cxgb4_0", "eth2", gids=0), node_type="RNIC", provider="cxgb4")
ADDRS = {"eth0": ("192.168.7.1",), "eth1": ("192.168.8.1",), "eth2": ("10.0.0.2",)}


def test_a_gid_gives_msg_and_dgram_domains() -> None:
    """No address at all: RoCE's GID (vrb_get_sib) is enough for MSG; rdma_cm there, so
    ofi_rxm layers on it; DGRAM on the InfiniBand transport."""
    p = _fab([ROCE], addresses={})
    assert p.outcome == "verbs;ofi_rxm domains for mlx5_0; dgram for mlx5_0"
    assert p.details == ("verbs;ofi_rxm mlx5_0 FI_EP_RDM", "verbs mlx5_0 FI_EP_MSG",
                         "verbs mlx5_0-dgram FI_EP_DGRAM", "verbs;ofi_rxd mlx5_0-dgram FI_EP_RDM")
    assert p.reason == "each device: an ACTIVE port, a GID or an address for MSG"


def test_without_rdma_cm_no_ofi_rxm() -> None:
    """The kernel VM's state before rdma_ucm: MSG from the GID, but ofi_rxm's core
    fi_getinfo fails at rdma_create_id."""
    p = _fab([ROCE], ("no_rdma_cm",), addresses=ADDRS)
    assert p.outcome == "MSG domains for mlx5_0; dgram for mlx5_0"
    assert p.reason == "no_rdma_cm: no ofi_rxm (its rdma_create_id fails)"
    assert "verbs;ofi_rxm mlx5_0 FI_EP_RDM" not in p.details


@pytest.mark.parametrize("iface,msg", [
    ("eth0", ["mlx5_0"]),              # exact: eth0 only
    ("eth", ["mlx5_0", "mlx5_1"]),     # no interface is named "eth": a prefix
    ("nosuch", []),
])
def test_fi_verbs_iface(iface: str, msg: list[str]) -> None:
    p = _fab([ROCE, ROCE1], env={"FI_VERBS_IFACE": iface}, addresses=ADDRS)
    assert [d.split()[1] for d in p.details if d.endswith("FI_EP_MSG")] == msg
    assert [d.split()[1] for d in p.details if d.endswith("FI_EP_DGRAM")] == [
        "mlx5_0-dgram", "mlx5_1-dgram"]
    if len(msg) < 2:
        first = "mlx5_1" if msg else "mlx5_0"
        assert p.reason == f"{first}: no MSG domain: FI_VERBS_IFACE={iface} leaves it no address"


def test_an_address_needs_rdma_cm_and_its_gid() -> None:
    """With FI_VERBS_IFACE the GID path is off: only an address rdma_cm binds counts,
    and on RoCE an address without a GID does not bind."""
    env = {"FI_VERBS_IFACE": "eth0"}
    assert _fab([ROCE], ("no_rdma_cm",), env, ADDRS).reason == (
        "mlx5_0: no MSG domain: no_rdma_cm (rdma_cm binds the addresses)")
    lost = (AddressGidFinding("mlx5_0", 1, ("192.168.7.1",), "m"),)
    assert _fab([ROCE], (), env, ADDRS, lost).outcome == "no MSG domain; dgram for mlx5_0"
    assert _fab([ROCE], (), env, None).reason == (
        "mlx5_0: no MSG domain: a recording, its addresses are not read")


def test_iwarp_has_msg_only_through_an_address() -> None:
    assert _fab([IWARP], addresses=ADDRS).details == (
        "verbs;ofi_rxm cxgb4_0 FI_EP_RDM", "verbs cxgb4_0 FI_EP_MSG")
    # a RoCE address finding does not concern iWARP, which binds by MAC
    pod = (AddressGidFinding(None, None, ("10.0.0.2",), "m"),)
    assert "verbs cxgb4_0 FI_EP_MSG" in _fab([IWARP], addresses=ADDRS, addr=pod).details
    none = _fab([IWARP], addresses={"eth2": ()})
    assert (none.outcome, none.reason, none.details) == (
        "no verbs domain (fi_getinfo -61)",
        "cxgb4_0: no MSG domain: no address rdma_cm binds to it, no GID", ())


def test_device_filters_and_transports() -> None:
    # FI_VERBS_DEVICE_NAME: a prefix, case ignored
    p = _fab([ROCE, ROCE1], env={"FI_VERBS_DEVICE_NAME": "MLX5_1"}, addresses={})
    assert p.outcome == "verbs;ofi_rxm domains for mlx5_1; dgram for mlx5_1"
    assert p.reason == "mlx5_0: FI_VERBS_DEVICE_NAME=mlx5_1 leaves it out"
    down = _dev("mlx5_2", _port("mlx5_2", "eth3", state="DOWN"))
    assert _fab([down], addresses={}).reason == "mlx5_2: no ACTIVE port"
    efa = _dev("rdmap0", _port("rdmap0", gids=0), node_type="unspecified", provider="efa")
    assert _fab([efa]).reason == "only EFA devices: the efa provider's"
    usnic = _dev("usnic_0", node_type="usNIC", provider="usnic")
    assert _fab([usnic, ROCE], addresses={}).reason == (
        "usnic_0: transport neither InfiniBand nor iWARP")


def test_nothing_opens() -> None:
    gone = _dev("mlx5_0", usable=False)
    assert _fab([gone], none_why="netns_exclusive") == Prediction(
        "libfabric-verbs", "no verbs domain (fi_getinfo -61)", "netns_exclusive")
    assert _fab([ROCE], ("rdma_cm_abi",)).reason == "rdma_cm_abi"


def test_every_rule_names_its_source() -> None:
    for key, _rule, old, new in RULES:
        for place in (old, new):
            assert re.fullmatch(r"[\w./]+\.c:\d+(-\d+)?(, \d+(-\d+)?)*"
                                r"(, [\w./]+\.c:\d+(-\d+)?(, \d+(-\d+)?)*)*", place), (key, place)


# ----------------------------------------------------------------- the command


@pytest.mark.parametrize("fixture,outcome,reason", [
    ("rxe", "verbs;ofi_rxm domains for rxe0, rxe1; dgram for rxe0, rxe1",
     "each device: an ACTIVE port, a GID or an address for MSG"),
    ("cxgb4", "no verbs domain (fi_getinfo -61)",
     "cxgb4_0: no MSG domain: a recording, its addresses are not read"),
    ("efa", "no verbs domain (fi_getinfo -61)", "only EFA devices: the efa provider's"),
])
def test_doctor_predict_on_recordings(fixture: str, outcome: str, reason: str) -> None:
    run = run_main(["doctor", "--predict", "--json", "--fixture", fixture], {})
    pred, _ = predicted(run.out)
    assert (pred["outcome"], pred["reason"]) == (outcome, reason)


def test_this_hosts_fi_info() -> None:
    """Debian's fi_info -p verbs on this machine beside doctor --predict: the same
    domains (here usually none: fi_getinfo -61, and libfabric logs
    ``vrb_init_info():1346 ... no RDMA devices found``, the line fabric_rules names)."""
    require(None if shutil.which("fi_info") else "fi_info is not installed "
            "(apt-get install libfabric-bin)", "libfabric's fi_info")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FI_", "NCCL_"))}
    real = subprocess.run(["fi_info", "-p", "verbs"], capture_output=True, text=True,
                          env={**env, "FI_LOG_LEVEL": "info", "FI_LOG_PROV": "verbs"},
                          timeout=120)
    pred, entries = predicted(run_main(["doctor", "--predict", "--json"], env).out)
    assert fi_info_entries(real.stdout) == entries, (real.stdout, pred)
    assert (real.returncode == 61) == (pred["outcome"] == "no verbs domain (fi_getinfo -61)")
    if real.returncode == 61 and "vrb_init_info():1346" in real.stderr:
        assert "1344-1348" in dict((k, o) for k, _, o, _ in RULES)["have_device"]

"""``no_rdma_gid_for_address`` made for real in the kernel lab and confirmed by rdma_cm's
real client (issue 44): the roce scenario's ``cm:*`` steps (tests/kernel/scenario_roce.py),
rdma_ucm loaded, rxec on vc and rxed on vd in the initial namespace.

In each situation, beside ``sysverbs doctor --json`` in the same namespace: the
addresses (``ip -br addr``), the GIDs the kernel holds (sysfs), and Debian's ``rping``
(rdmacm-utils), whose ``rdma_resolve_addr``/``rdma_bind_addr`` look up the GID of the
local address (the kernel's ``cma_acquire_dev_by_src_ip``):

* ``healthy``: rping connects to rxed's IPv4 address; no finding;
* ``pod``: a network namespace with a veth and 10.244.3.17/24: rping's address
  resolution ends in ``RDMA_CM_EVENT_ADDR_ERROR`` with -ENODEV and binding to the pod's
  address fails with ENODEV; sysverbs finds ``no_rdma_gid_for_address`` for the
  namespace, with exactly the pod's global address;
* ``noipv4``: vd's IPv4 address removed: the kernel removes its GID with it, so no
  address lacks a GID and sysverbs finds nothing; rping fails on the removed address
  for another reason (binding: EADDRNOTAVAIL, no netdev has it; resolving: no neighbour
  answers, ETIMEDOUT), and binds to vd's IPv6 address, whose GID is there;
* ``noaddr``: vd without any global address: only the link-local GID is left; nothing
  is found (no address lacks its GID).

The finding and the real tool agree: the finding is there exactly where rdma_cm fails
with ENODEV (an address it has no GID for).
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import shutil
from typing import Any

import pytest

from tests.conftest import require
from tests.kernel.lab import VM_PATH, LabResults
from tests.kernel.lab_checks import roce, trials, where

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(3600)]

POD_ADDRESS = "10.244.3.17"
#: the steps of rping (``===TRIAL`` names) of each situation
RPINGS = {"healthy": ("healthy",), "pod": ("pod-client", "pod-bind"),
          "noipv4": ("noipv4-bind", "noipv4-client", "noipv4-bind6"), "noaddr": ()}
#: what rdma_cm says when the local address has no GID (the kernel's -ENODEV)
NO_GID = (f"error -{errno.ENODEV}", os.strerror(errno.ENODEV))


def _situation(lab: LabResults, name: str) -> dict[str, Any]:
    """The situation's addresses (``{netdev: [address/len]}``), GIDs (``{device:
    {index: (gid, netdev)}}``), rping trials and doctor document."""
    require(None if shutil.which("rping", path=VM_PATH) else "rping is not installed "
            "(apt-get install rdmacm-utils)", "rdma_cm's rping (rdmacm-utils)")
    runs = roce(lab)
    text = runs[f"cm:{name}"]["stdout"]
    assert "===ADDR\n" in text and "===GIDS\n" in text, (runs[f"cm:{name}"], where(lab))
    addr_part, _, rest = text.split("===ADDR\n", 1)[1].partition("===GIDS\n")
    addresses = {line.split()[0].split("@")[0]: line.split()[2:]
                 for line in addr_part.splitlines() if line.strip()}
    gids: dict[str, dict[int, tuple[ipaddress.IPv6Address, str]]] = {}
    for line in rest.split("===TRIAL", 1)[0].splitlines():
        dev, index, gid, netdev = line.split()
        gids.setdefault(dev, {})[int(index)] = (ipaddress.IPv6Address(gid), netdev)
    doctor = runs[f"cm:{name}:doctor"]
    assert doctor["rc"] in (0, 1), (doctor, where(lab))
    tried = trials(text)
    assert set(tried) == set(RPINGS[name]), (tried, where(lab))
    return {"addresses": addresses, "gids": gids, "trials": tried,
            "doctor": json.loads(doctor["stdout"])}


def _findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The doctor's ``no_rdma_gid_for_address`` findings (``address_gids``), which its
    ``host`` list says too, with the same messages and ports."""
    found: list[dict[str, Any]] = doc["address_gids"]
    host = [(h["message"], h["port"]) for h in doc["host"]
            if h["code"] == "no_rdma_gid_for_address"]
    assert host == [(f["message"], f["port"]) for f in found], (host, found)
    return found


def _mapped(address: str) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address("::ffff:" + address)


def test_healthy_rping_connects_and_nothing_is_found(lab: LabResults) -> None:
    s = _situation(lab, "healthy")
    t = s["trials"]["healthy"]
    assert (t["client_rc"], t["server_rc"]) == ("0", "0"), t
    assert "ping data: rdma-ping-0: " in t["client"] and "server ping data: " in t["server"]
    assert "192.168.61.2/24" in s["addresses"]["vd"]
    assert s["gids"]["rxed"][2] == (_mapped("192.168.61.2"), "vd"), s["gids"]
    assert _findings(s["doctor"]) == []


def test_pod_without_a_roce_gid_is_found_and_rdma_cm_fails(lab: LabResults) -> None:
    s = _situation(lab, "pod")
    # the pod's global addresses, as ip prints them (loopback and link-local do not count)
    pod = [a.split("/")[0] for n, addrs in s["addresses"].items() for a in addrs
           if n != "lo" and not ipaddress.ip_interface(a).is_link_local]
    assert pod == [POD_ADDRESS] and "eth0" in s["addresses"], s["addresses"]
    every = {g for table in s["gids"].values() for g, _ in table.values()}
    assert _mapped(POD_ADDRESS) not in every and set(s["gids"]) == {"rxec", "rxed"}
    found = _findings(s["doctor"])
    assert [(f["device"], f["port"], f["addresses"]) for f in found] == [(None, None, pod)]
    assert "no GID of rxec:1, rxed:1 carries its addresses (10.244.3.17)" in found[0]["message"]
    # the real client: resolving a peer through eth0, then binding to the pod's address
    client, bind = s["trials"]["pod-client"], s["trials"]["pod-bind"]
    assert client["client_rc"] != "0" and bind["client_rc"] != "0", (client, bind)
    assert f"cma event RDMA_CM_EVENT_ADDR_ERROR, error -{errno.ENODEV}" in client["client"]
    assert f"rdma_bind_addr: {os.strerror(errno.ENODEV)}" in bind["client"]


def test_address_removed_takes_its_gid_and_nothing_is_found(lab: LabResults) -> None:
    s = _situation(lab, "noipv4")
    assert [a for a in s["addresses"]["vd"] if not a.startswith("fe80:")] == ["fd61::2/64"]
    rxed = {g for g, _ in s["gids"]["rxed"].values()}
    assert _mapped("192.168.61.2") not in rxed and ipaddress.IPv6Address("fd61::2") in rxed
    assert _findings(s["doctor"]) == []
    # the removed address is on no netdev at all: not a GID's absence
    bind = s["trials"]["noipv4-bind"]
    assert f"rdma_bind_addr: {os.strerror(errno.EADDRNOTAVAIL)}" in bind["client"], bind
    client = s["trials"]["noipv4-client"]
    assert client["client_rc"] != "0", client
    assert f"RDMA_CM_EVENT_ADDR_ERROR, error -{errno.ETIMEDOUT}" in client["client"], client
    # the port is still reached by address: rdma_cm finds the GID of its IPv6 one, binds
    # and listens (until timeout stops it: 124)
    bind6 = s["trials"]["noipv4-bind6"]
    assert bind6["client_rc"] == "124", bind6
    assert "rdma_bind_addr successful\nrdma_listen\n" in bind6["client"], bind6


def test_netdev_without_address_has_only_its_link_local_gid(lab: LabResults) -> None:
    s = _situation(lab, "noaddr")
    assert all(a.startswith("fe80:") for a in s["addresses"]["vd"]), s["addresses"]
    assert [(g.is_link_local, n) for g, n in s["gids"]["rxed"].values()] == [(True, "vd")]
    assert _findings(s["doctor"]) == []


@pytest.mark.parametrize("name", list(RPINGS))
def test_the_finding_is_where_rdma_cm_has_no_gid(lab: LabResults, name: str) -> None:
    """In every situation: ``no_rdma_gid_for_address`` exactly where rping failed with
    ENODEV (rdma_cm found no GID for the local address)."""
    s = _situation(lab, name)
    no_gid = [n for n, t in s["trials"].items()
              if t["client_rc"] != "0" and any(e in t["client"] for e in NO_GID)]
    assert bool(_findings(s["doctor"])) == bool(no_gid), (name, no_gid, s["doctor"]["host"])

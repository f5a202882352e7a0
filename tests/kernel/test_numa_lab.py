"""sysverbs on a machine with two NUMA nodes and PCIe switches (``numa_vm.py``).

One boot of the q35 machine runs every scenario of ``numa_scenarios.py``; these tests
check its raw outputs against the kernel and the real tools:

* the machine is what ``numa_vm.LAYOUT`` built (the kernel's ``numa_node``,
  ``local_cpulist`` and device paths), so that the checks below are about something;
* ``topology``: hwloc's ``lstopo`` and ``sysverbs topo --json`` agree on every PCI
  function's NUMA node, CPUs, bridges and host bridge, and on which NIC and NVMe
  drive sits where;
* ``run_modes``: each ``sysverbs run --dry-run --json`` plan is what the kernel's
  topology gives, and the command run under it (``cat /proc/self/status``,
  ``numactl --show``) has exactly that affinity and memory policy;
* ``cgroup``: inside cpuset cgroups the plan shrinks to what is allowed, fails with
  exit status 1 and the cause when nothing is left, runs unbound with ``--fallback``;
* ``mpirun``: Open MPI's two ranks each get their own node's CPUs, memory policy and
  NIC variables.

``SV_NUMA_REUSE=<directory>`` re-checks the results kept there without booting.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.kernel import numa_vm
from tests.kernel.numa_scenarios import CPU_MODES
from tests.kernel.numa_vm import LAYOUT, NumaResults

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(3600)]


def where(numa: NumaResults) -> str:
    return f"\n(NUMA lab logs and results: {numa.workdir})"


# -- parsing -------------------------------------------------------------------------


def cpus(text: Optional[str]) -> frozenset[int]:
    """A kernel list (``0-1,3``) or numactl's (``0 1 3``)."""
    out: set[int] = set()
    for part in re.split(r"[,\s]+", (text or "").strip()):
        if part:
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def status_of(text: str) -> dict[str, str]:
    """``/proc/self/status`` lines: field -> value."""
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())
            if k and v}


def numactl_of(text: str) -> dict[str, str]:
    """``numactl --show``: field -> value (``policy``, ``preferred node``, ``membind``...)."""
    return {k.strip(): v.strip() for k, _, v in
            (line.partition(":") for line in text.splitlines()) if v}


def both_of(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The output of ``numa_scenarios.BOTH``: the status and numactl's, split at ``----``."""
    status, sep, show = text.partition("----\n")
    assert sep, f"no ---- line in {text!r}"
    return status_of(status), numactl_of(show)


def numactl_blocks(text: str) -> list[dict[str, str]]:
    """Several ``numactl --show`` outputs one after the other (one per rank)."""
    return [numactl_of("policy:" + b) for b in text.split("policy:")[1:]]


def tagged(text: str) -> dict[int, str]:
    """``mpirun --tag-output``'s stdout: rank -> its lines."""
    ranks: dict[int, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"\[\d+,(\d+)\]<stdout>:(.*)", line)
        assert m, f"untagged line {line!r}"
        ranks.setdefault(int(m.group(1)), []).append(m.group(2))
    return {r: "\n".join(lines) + "\n" for r, lines in ranks.items()}


def _hwloc_set(text: Optional[str]) -> frozenset[int]:
    """hwloc's bitmap (``0x00000003``, words separated by commas, highest first)."""
    if not text:
        return frozenset()
    value = int("".join(w[2:] if w.startswith("0x") else w for w in text.split(",")), 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def lstopo_pci(xml: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """hwloc's view of every PCI function: busid -> its locality (``node``: the NUMA
    node when the normal object above it has one, ``cpus``), its PCI bridges (nearest
    first) and its host bridge (``pci0000:BB`` from the host bridge's bus range); and
    every OS device (``eth0``, ``nvme0n1``) -> the busid it is below."""
    pci: dict[str, dict[str, Any]] = {}
    osdevs: dict[str, str] = {}

    def walk(el: ET.Element, normal: ET.Element, chain: list[ET.Element]) -> None:
        for child in el.findall("object"):
            kind = child.get("type")
            if kind == "OSDev":
                busids = [c.get("pci_busid") for c in chain if c.get("pci_busid")]
                if busids:
                    osdevs[str(child.get("name"))] = str(busids[-1])
            if kind in ("Bridge", "PCIDev"):
                busid = child.get("pci_busid")
                if busid:
                    nodes = _hwloc_set(normal.get("nodeset"))
                    host = next(c for c in chain if c.get("bridge_type", "").startswith("0-"))
                    m = re.fullmatch(r"([0-9a-f]{4}):\[([0-9a-f]{2})-[0-9a-f]{2}\]",
                                     str(host.get("bridge_pci")))
                    assert m, host.attrib
                    pci[busid] = {
                        "node": next(iter(nodes)) if len(nodes) == 1 else None,
                        "cpus": _hwloc_set(normal.get("cpuset")),
                        "bridges": [c.get("pci_busid") for c in reversed(chain)
                                    if c.get("type") == "Bridge" and c.get("pci_busid")],
                        "host_bridge": f"pci{m.group(1)}:{m.group(2)}",
                    }
                walk(child, normal, [*chain, child])
            elif kind == "OSDev" or kind == "Misc":
                walk(child, normal, [*chain, child])
            else:
                walk(child, child if child.get("cpuset") else normal, chain)

    root = ET.fromstring(xml)
    top = root.find("object")
    assert top is not None
    walk(top, top, [])
    return pci, osdevs


def plan_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["rc"] == 0, f"{result['args']}: exit {result['rc']}: {result['stderr']}"
    plan: dict[str, Any] = json.loads(result["stdout"])
    return plan


def carried_out(plan: dict[str, Any], status: dict[str, str],
                show: dict[str, str]) -> list[str]:
    """How the process run under ``plan`` differs from it (nothing: it is bound so)."""
    problems = []
    want = cpus(plan["cpus"])
    if cpus(status.get("Cpus_allowed_list")) != want:
        problems.append(f"Cpus_allowed_list {status.get('Cpus_allowed_list')!r}, plan "
                        f"{plan['cpus']!r}")
    if cpus(show.get("physcpubind")) != want:
        problems.append(f"physcpubind {show.get('physcpubind')!r}, plan {plan['cpus']!r}")
    # set_mempolicy leaves the cpuset's memory nodes as they are
    if cpus(status.get("Mems_allowed_list")) != cpus(plan["allowed_mems"]):
        problems.append(f"Mems_allowed_list {status.get('Mems_allowed_list')!r}, allowed "
                        f"{plan['allowed_mems']!r}")
    mode, mems = plan["mem_mode"], cpus(plan["mems"])
    if mode == "preferred" and len(mems) > 1:  # socket mode on a package of several nodes
        if show.get("policy") != "preferred-many" or cpus(show.get("preferred")) != mems:
            problems.append(f"policy {show.get('policy')!r} preferred "
                            f"{show.get('preferred')!r}, plan MPOL_PREFERRED_MANY on "
                            f"{plan['mems']!r}")
    elif mode == "preferred":
        if show.get("policy") != "preferred" or cpus(show.get("preferred node")) != mems:
            problems.append(f"policy {show.get('policy')!r} node {show.get('preferred node')!r}"
                            f", plan MPOL_PREFERRED on {plan['mems']!r}")
    elif mode == "bind":
        if show.get("policy") != "bind" or cpus(show.get("membind")) != mems:
            problems.append(f"policy {show.get('policy')!r} membind {show.get('membind')!r}, "
                            f"plan MPOL_BIND on {plan['mems']!r}")
    elif show.get("policy") != "default":
        problems.append(f"policy {show.get('policy')!r}, plan no memory policy")
    return problems


# -- what the kernel says ---------------------------------------------------------------


def sysfs(numa: NumaResults) -> dict[str, Any]:
    facts: dict[str, Any] = numa.data["sysfs"]
    return facts


def node_cpus(numa: NumaResults, node: int) -> frozenset[int]:
    return cpus(sysfs(numa)["nodes"][str(node)]["cpulist"])


def node_of_class(numa: NumaResults, cls: str, name: str) -> int:
    """The NUMA node of the PCI function a class device (``block/nvme0n1``) is below."""
    path = sysfs(numa)["class"][cls][name]
    for dev in sysfs(numa)["pci"].values():
        if path.startswith(dev["path"] + "/"):
            return int(dev["numa_node"])
    raise AssertionError(f"{cls}/{name} ({path}) is below no PCI function")


def rdma_on(numa: NumaResults, node: int) -> list[str]:
    """The RDMA devices whose netdev is on ``node``."""
    return sorted(d for d, v in sysfs(numa)["rdma"].items()
                  if node_of_class(numa, "net", v["parent"]) == node)


# -- the machine ----------------------------------------------------------------------


def test_setup(numa: NumaResults) -> None:
    setup = numa.data["setup"]
    assert "crash" not in setup, setup["crash"] + where(numa)
    failed = {k: v for k, v in setup.items() if isinstance(v, dict) and v["rc"] != 0}
    assert not failed, f"{failed}{where(numa)}"
    assert numa.data["warm"]["rc"] == 0, numa.data["warm"]["stderr"] + where(numa)


def test_machine_is_the_layout(numa: NumaResults) -> None:
    """Two nodes of one CPU each; every device of the layout where it was put, on its
    node (the expander's), the rest (bus 00) on none."""
    facts = sysfs(numa)
    assert {n: v["cpulist"] for n, v in facts["nodes"].items()} == {"0": "0", "1": "1"}
    assert [facts["nodes"][n]["distance"] for n in ("0", "1")] == ["10 20", "20 10"]
    pci = facts["pci"]
    for ep in LAYOUT:
        dev = pci[ep.address]
        assert (dev["numa_node"], dev["local_cpulist"]) == (str(ep.node), str(ep.node)), ep
        chain = dev["path"].split("/sys/devices/", 1)[1].split("/")
        assert chain == [ep.host_bridge, *reversed(ep.bridges), ep.address], (ep, chain)
        if ep.kind == "nic":
            assert ep.netdev and ep.rdma
            assert facts["class"]["net"][ep.netdev].startswith(dev["path"] + "/net/"), ep
            assert facts["rdma"][ep.rdma]["parent"] == ep.netdev
            assert facts["rdma"][ep.rdma]["state"] == "4: ACTIVE"
            assert dev["driver"] == "e1000e"
        else:
            assert ep.block
            assert f"{dev['path']}/nvme/" in facts["class"]["block"][ep.block], ep
            assert dev["driver"] == "nvme"
    for addr, node in numa_vm.BRIDGES.items():
        assert pci[addr]["numa_node"] == str(node), addr
    bus0 = {a: d["numa_node"] for a, d in pci.items() if a.startswith("0000:00:")}
    assert bus0 and set(bus0.values()) == {"-1"}, bus0
    assert set(pci) == set(bus0) | {ep.address for ep in LAYOUT} | set(numa_vm.BRIDGES)
    assert {c: v["package"] for c, v in facts["cpus"].items()} == {"cpu0": "0-1", "cpu1": "0-1"}


# -- a. topology ----------------------------------------------------------------------


def test_lstopo_and_topo_agree(numa: NumaResults) -> None:
    """Every PCI function: the same NUMA node, CPUs, bridges and host bridge in
    ``lstopo --whole-io`` and ``sysverbs topo --json``; and both as the layout has it."""
    topo = numa.scenario("topology")
    assert topo["lstopo_xml"]["rc"] == 0, topo["lstopo_xml"]["stderr"]
    hw, osdevs = lstopo_pci(topo["lstopo_xml"]["stdout"])
    ours = plan_of({**topo["topo_json"], "args": ["topo", "--json"]})
    assert set(hw) == {p["address"] for p in ours["pci"]} == set(sysfs(numa)["pci"])
    problems = []
    for p in ours["pci"]:
        h = hw[p["address"]]
        mine = {"node": p["numa_node"], "bridges": p["bridges"], "host_bridge": p["host_bridge"]}
        theirs = {k: h[k] for k in mine}
        if mine != theirs:
            problems.append(f"{p['address']}: sysverbs {mine}, lstopo {theirs}")
        if p["numa_node"] is not None and cpus(ours["numa_nodes"][str(p["numa_node"])]) != h[
                "cpus"]:
            problems.append(f"{p['address']}: node {p['numa_node']}'s CPUs "
                            f"{ours['numa_nodes'][str(p['numa_node'])]}, lstopo {h['cpus']}")
    assert not problems, "\n".join(problems) + where(numa)
    for ep in LAYOUT:  # and what was built
        assert hw[ep.address] == {"node": ep.node, "cpus": frozenset({ep.node}),
                                  "bridges": list(ep.bridges), "host_bridge": ep.host_bridge}
        assert osdevs[ep.netdev or str(ep.block)] == ep.address, (ep, osdevs)
    assert ours["host_bridges"] == ["pci0000:00", "pci0000:10", "pci0000:40"]
    assert ours["numa_nodes"] == {"0": "0", "1": "1"}


def test_topo_nics_where_lstopo_has_their_netdevs(numa: NumaResults) -> None:
    """Each rxe NIC at the PCI function below which lstopo shows its netdev, with
    that function's node and bridges."""
    topo = numa.scenario("topology")
    hw, osdevs = lstopo_pci(topo["lstopo_xml"]["stdout"])
    nics = {n["device"]: n for n in json.loads(topo["topo_json"]["stdout"])["nics"]}
    assert sorted(nics) == ["rxe0", "rxe1"]
    for name, n in nics.items():
        (netdev,) = n["ports"][0]["netdevs"]
        assert netdev == sysfs(numa)["rdma"][name]["parent"]
        address = osdevs[netdev]
        assert (n["kind"], n["address"], n["numa_node"], n["numa_affinity"]) == (
            "soft", address, hw[address]["node"], hw[address]["node"]), n
        assert n["bridges"] == hw[address]["bridges"], n
        assert n["ports"][0]["state"] == "ACTIVE"


def smi_class(hw: dict[str, dict[str, Any]], a: str, b: str) -> str:
    """nvidia-smi's class of the path between two PCI functions, from lstopo's tree:
    X the same function, PIX below one switch (or bridge), PXB below several, PHB
    through their host bridge, NODE between host bridges of a node, SYS across nodes."""
    if a == b:
        return "X"
    ha, hb = hw[a], hw[b]
    if ha["node"] != hb["node"]:
        return "SYS"
    if ha["host_bridge"] != hb["host_bridge"]:
        return "NODE"
    if not set(ha["bridges"]) & set(hb["bridges"]):
        return "PHB"
    return "PIX" if ha["bridges"][1:] == hb["bridges"][1:] else "PXB"


def test_topo_near(numa: NumaResults) -> None:
    """``topo --assign --near DEV``: DEV found at the PCI function lstopo shows it
    below (or is), on that function's node, and given the rxe device of its node, at
    the class lstopo's tree gives the path between them."""
    topo = numa.scenario("topology")
    hw, osdevs = lstopo_pci(topo["lstopo_xml"]["stdout"])
    nics = {n["device"]: n["address"] for n in json.loads(topo["topo_json"]["stdout"])["nics"]}
    problems = []
    for dev, result in topo["near"].items():
        doc = plan_of(result)
        (one,) = doc["assignments"]
        address = dev if dev.startswith("0000:") else nics.get(dev) or osdevs[dev]
        node = hw[address]["node"]
        got = [(one["anchor"]["address"], one["anchor"]["numa_node"])] + [
            (n["device"], n["smi"]) for n in one["nics"]]
        want = [(address, node)] + [(rxe, smi_class(hw, address, nics[rxe]))
                                    for rxe in rdma_on(numa, node)]
        if got != want:
            problems.append(f"--near {dev}: {got}, lstopo gives {want}")
    assert not problems, "\n".join(problems) + where(numa)
    classes = {d: json.loads(r["stdout"])["assignments"][0]["nics"][0]["smi"]
               for d, r in topo["near"].items()}
    # the layout's point: node 0's drive shares the NIC's switch, node 1's does not
    assert classes == {"nvme0n1": "PIX", "nvme1n1": "PHB", "0000:42:00.0": "PHB",
                       "eth0": "X", "rxe1": "X"}, classes
    text = topo["near_text"]
    assert text["rc"] == 0, text["stderr"]
    assert "nvme0n1" in text["stdout"] and "rxe1:1" in text["stdout"], text["stdout"]


# -- b. sysverbs run, every mode -----------------------------------------------------------


def expected_cpus(numa: NumaResults, mode: str, node: int,
                  allowed: frozenset[int]) -> frozenset[int]:
    """The CPUs each ``--cpu`` mode gives one rank on ``node`` of this machine, from
    the kernel's topology (one core per node, one package, an L3 per node)."""
    own = node_cpus(numa, node) & allowed
    facts = sysfs(numa)["cpus"]
    if mode == "none":
        return allowed
    if mode == "socket":
        return frozenset().union(*(cpus(facts[f"cpu{c}"]["package"]) for c in own)) & allowed
    if mode == "core-complex":
        return cpus(facts[f"cpu{min(own)}"]["l3"]) & allowed
    return own  # node; exclusive, exclusive-nosmt: the node's one core, for the one rank


def test_run_modes_plans(numa: NumaResults) -> None:
    """Each ``--dry-run --json`` plan: the anchor's node, and the CPUs and memory
    nodes its modes give on this machine."""
    cases = numa.scenario("run_modes")["cases"]
    problems = []
    for name, case in cases.items():
        plan = plan_of(case["plan"])
        dev = plan["anchor"]["name"]
        cls = "infiniband" if dev.startswith("rxe") else "net" if dev.startswith("eth") else (
            "block")
        if dev.startswith("0000:"):
            node = int(sysfs(numa)["pci"][dev]["numa_node"])
        elif cls == "infiniband":
            node = node_of_class(numa, "net", sysfs(numa)["rdma"][dev]["parent"])
        else:
            node = node_of_class(numa, cls, dev)
        want = expected_cpus(numa, plan["cpu_mode"], node, frozenset({0, 1}))
        mems = frozenset() if plan["mem_mode"] == "none" else frozenset({node})
        if plan["cpu_mode"] == "socket" and plan["mem_mode"] != "none":
            # the package's nodes, whose CPUs the socket spans (one package: both)
            mems = frozenset(int(n) for n in sysfs(numa)["nodes"]
                             if node_cpus(numa, int(n)) & want)
        got = (plan["anchor"]["numa_node"], plan["node"], cpus(plan["cpus"]),
               cpus(plan["mems"]), plan["allowed_cpus"], plan["allowed_mems"])
        if got != (node, node, want, mems, "0-1", "0-1"):
            problems.append(f"{name}: {got}, the kernel's topology gives "
                            f"{(node, node, want, mems, '0-1', '0-1')}")
    assert not problems, "\n".join(problems) + where(numa)
    modes = {json.loads(c["plan"]["stdout"])["cpu_mode"] for c in cases.values()}
    assert modes == set(CPU_MODES)


def test_run_modes_carried_out(numa: NumaResults) -> None:
    """The command run under each plan is bound exactly so: ``Cpus_allowed_list``,
    ``Mems_allowed_list`` (the cpuset's: a memory policy does not change it), and
    numactl's policy, preferred node, membind and physcpubind."""
    scen = numa.scenario("run_modes")
    problems = []
    for name, case in scen["cases"].items():
        if "both" not in case:
            continue
        plan = plan_of(case["plan"])
        assert case["both"]["rc"] == 0, f"{name}: {case['both']['stderr']}"
        problems += [f"{name}: {p}" for p in carried_out(plan, *both_of(case["both"]["stdout"]))]
        if "status" in case:  # the two commands on their own
            assert case["status"]["rc"] == case["show"]["rc"] == 0, name
            problems += [f"{name} (alone): {p}" for p in carried_out(
                plan, status_of(case["status"]["stdout"]), numactl_of(case["show"]["stdout"]))]
    assert not problems, "\n".join(problems) + where(numa)
    # unbound, the same commands show the whole machine and no policy
    status, show = both_of(scen["baseline"]["stdout"])
    assert (status["Cpus_allowed_list"], status["Mems_allowed_list"], show["policy"]) == (
        "0-1", "0-1", "default")


def test_run_nic_variables(numa: NumaResults) -> None:
    """The rank's entry of ``--near A,B`` (the rank from Open MPI's variable) and the
    NIC variables of the rxe device on that drive's node."""
    plan = plan_of(numa.scenario("run_modes")["cases"]["near=list rank=1"]["plan"])
    (rxe,) = rdma_on(numa, 1)
    assert (plan["rank"], plan["anchor"]["name"], plan["nics"]) == (1, "nvme1n1", [f"{rxe}:1"])
    assert plan["env"]["NCCL_IB_HCA"] == f"={rxe}:1"
    assert plan["env"]["UCX_NET_DEVICES"] == f"{rxe}:1"


# -- c. cgroups -----------------------------------------------------------------------


def test_cgroup_mechanics(numa: NumaResults) -> None:
    """A shell moved into the cpuset cgroup that excludes node 1 has node 0 only."""
    facts = sysfs(numa)["cgroups"]
    assert facts["sv_node0"] == {"cpus": "0", "mems": "0", "cpus.effective": "0",
                                 "mems.effective": "0"}
    assert facts["sv_mem0"]["cpus.effective"] == "0-1"
    assert facts["sv_mem0"]["mems.effective"] == "0"
    shell = numa.scenario("cgroup")["shell"]
    assert shell["rc"] == 0, shell["stderr"]
    status = status_of(shell["stdout"])
    show = numactl_of(shell["stdout"].split("Mems_allowed_list", 1)[1])
    assert (status["Cpus_allowed_list"], status["Mems_allowed_list"]) == ("0", "0")
    assert (show["physcpubind"], show["membind"]) == ("0", "0")
    assert shell["stdout"].rstrip().endswith("0::/sv_node0")


def test_cgroup_plan_shrinks(numa: NumaResults) -> None:
    """Inside the cgroups the plan keeps to what is allowed, and is carried out."""
    cases = numa.scenario("cgroup")["cases"]
    want = {  # case: cpus, mems, allowed cpus, allowed mems
        "node0 near=nvme0n1 bind": ("0", "0", "0", "0"),
        "node0 near=nvme0n1 cpu=socket": ("0", "0", "0", "0"),  # the package is 0-1
        "mem0 near=nvme1n1 bind": ("1", "0", "0-1", "0"),  # node 1's memory: the nearest
        "mem0 near=nvme1n1 preferred": ("1", "0", "0-1", "0"),
    }
    problems = []
    for name, expected in want.items():
        plan = plan_of(cases[name]["plan"])
        got = (plan["cpus"], plan["mems"], plan["allowed_cpus"], plan["allowed_mems"])
        if got != expected:
            problems.append(f"{name}: plan {got}, want {expected}")
        assert cases[name]["both"]["rc"] == 0, f"{name}: {cases[name]['both']['stderr']}"
        problems += [f"{name}: {p}" for p in carried_out(plan, *both_of(
            cases[name]["both"]["stdout"]))]
    assert not problems, "\n".join(problems) + where(numa)


NOTHING_LEFT = ("node0 near=nvme1n1", "allowed=0 near=nvme1n1")


def test_cgroup_nothing_left_fails(numa: NumaResults) -> None:
    """Node 1's drive where node 1's CPUs are not allowed: exit status 1, the cause
    on stderr (and in the JSON plan), the command not run."""
    scen = numa.scenario("cgroup")
    for name in NOTHING_LEFT:
        case = scen["cases"][name]
        assert case["plan"]["rc"] == 1, name
        error = json.loads(case["plan"]["stdout"])["error"]
        assert error["kind"] == "binding", error
        assert "node 1" in error["message"] and "allowed CPUs 0" in error["message"], error
        run = case["both"]
        assert (run["rc"], run["stdout"]) == (1, ""), (name, run)
        assert run["stderr"] == f"sysverbs run: error: {error['message']}\n", run["stderr"]


def test_cgroup_fallback_runs_unbound(numa: NumaResults) -> None:
    """``--fallback``: a warning naming the cause, and the command runs with the
    affinity and memory it had (the cgroup's), no policy."""
    scen = numa.scenario("cgroup")
    for name, allowed in ((f"{NOTHING_LEFT[0]} fallback", "0"),
                          (f"{NOTHING_LEFT[1]} fallback", "0-1")):
        run = scen["cases"][name]["both"]
        assert run["rc"] == 0, (name, run["stderr"])
        assert run["stderr"].startswith("sysverbs run: warning: nvme1n1 is on node 1"), run
        assert "--fallback: running 'sh' unbound" in run["stderr"], run["stderr"]
        status, show = both_of(run["stdout"])
        assert (status["Cpus_allowed_list"], show["policy"]) == (allowed, "default"), name
    real = scen["real_fallback"]  # a shell moved into the cgroup, exec'ing the command
    assert real["rc"] == 0, real["stderr"]
    assert real["stderr"].startswith("sysverbs run: warning: nvme1n1 is on node 1"), real
    assert "--fallback: running 'numactl' unbound" in real["stderr"]
    show = numactl_of(real["stdout"])
    assert (show["policy"], show["physcpubind"], show["membind"]) == ("default", "0", "0")


# -- d. Open MPI -------------------------------------------------------------------------


def test_mpirun_ranks_on_their_nodes(numa: NumaResults) -> None:
    """``mpirun -np 2 ... sysverbs run --near nvme0n1,nvme1n1``: rank R runs on the
    node of nvmeRn1, with MPOL_PREFERRED there and that node's rxe device in
    NCCL_IB_HCA and UCX_NET_DEVICES."""
    scen = numa.scenario("mpirun")
    for key in ("show", "tagged"):
        assert scen[key]["rc"] == 0, f"{key}: {scen[key]['stderr']}"
    nodes = {r: node_of_class(numa, "block", f"nvme{r}n1") for r in (0, 1)}
    assert sorted(nodes.values()) == [0, 1]
    show = numactl_blocks(scen["show"]["stdout"])
    assert sorted((b["preferred node"], cpus(b["physcpubind"])) for b in show) == [
        (str(n), node_cpus(numa, n)) for n in (0, 1)]
    ranks = tagged(scen["tagged"]["stdout"])
    assert sorted(ranks) == [0, 1]
    for r, text in ranks.items():
        show_r, status_r = numactl_of(text), status_of(text)
        (rxe,) = rdma_on(numa, nodes[r])
        want = {"OMPI_COMM_WORLD_LOCAL_RANK": str(r), "policy": "preferred",
                "preferred node": str(nodes[r]), "physcpubind": node_cpus(numa, nodes[r]),
                "Cpus_allowed_list": node_cpus(numa, nodes[r]), "Mems_allowed_list": "0-1",
                "NCCL_IB_HCA": f"={rxe}:1", "UCX_NET_DEVICES": f"{rxe}:1"}
        env = dict(line.split("=", 1) for line in text.splitlines() if re.match(r"[A-Z_]+=", line))
        got = {**{k: env.get(k) for k in ("OMPI_COMM_WORLD_LOCAL_RANK", "NCCL_IB_HCA",
                                          "UCX_NET_DEVICES")},
               "policy": show_r.get("policy"), "preferred node": show_r.get("preferred node"),
               "physcpubind": cpus(show_r.get("physcpubind")),
               "Cpus_allowed_list": cpus(status_r.get("Cpus_allowed_list")),
               "Mems_allowed_list": status_r.get("Mems_allowed_list")}
        assert got == want, f"rank {r}:\n{text}{where(numa)}"


def test_docs_show_the_real_mpirun_output(numa: NumaResults) -> None:
    """docs/run.md's ``mpirun ... -- numactl --show`` is this VM's: the same command
    line and the same two ranks' blocks (their order varies from run to run)."""
    from tests.kernel.numa_scenarios import MPIRUN, NEAR, SHOW

    doc = (Path(__file__).resolve().parents[2] / "docs" / "run.md").read_text()
    command = " ".join([*MPIRUN, *NEAR, "--", *SHOW])
    m = re.search(r"```\n\$ (mpirun --allow-run-as-root[^\n]*)\n(.*?)```", doc, re.S)
    assert m is not None and m.group(1) == command, m and m.group(1)

    def blocks(text: str) -> list[str]:
        return sorted("policy:" + b for b in text.split("policy:")[1:])

    real = numa.scenario("mpirun")["show"]["stdout"]
    assert blocks(m.group(2)) == blocks(real), real

"""Runs inside the NUMA machine (``numa_vm.py``): its set-up, then every scenario.

    python -S -m tests.kernel.numa_scenarios LAYOUT.json OUTDIR

Set-up: PCI probing in the layout's order (so that ``eth0``, ``rxe0`` and ``nvme0n1``
are node 0's), the NICs up, an rxe device on each, a cgroup2 hierarchy with the
cpuset controller.  Then the scenarios, whose raw outputs go into
``OUTDIR/results.json`` (after each scenario); ``test_numa_lab.py`` asserts on them:

* ``topology``: hwloc's ``lstopo`` (XML of the live sysfs, every I/O object) and
  ``sysverbs topo --json`` / ``topo --assign --near DEV``;
* ``run_modes``: ``sysverbs run --dry-run --json`` for each ``--cpu``/``--mem`` mode and
  anchor, and the same plan carried out: ``cat /proc/self/status``, ``numactl --show``;
* ``cgroup``: the same inside cpuset cgroups that exclude node 1 (or only its memory),
  and ``--allowed-cpus``;
* ``mpirun``: Open MPI starting two ranks of ``sysverbs run --near nvme0n1,nvme1n1``;
* ``acs``: ACS bits, IOMMU groups and links against ``lspci``/``setpci``
  (``acs_scenarios.py``).

Starting Python costs seconds under emulation: this process imports the command line
once and *forks* for each ``sysverbs`` command (``cli.main`` in the child, which
``sysverbs run`` replaces with the command: the same path as ``python -m sysverbs``).
A shell moved into a cgroup and ``mpirun``'s ranks run ``python -m sysverbs run`` as
processes of their own (``python`` is ``/run/bin/python``: this interpreter with
``-S``).  Each fork's ``run`` reads the host anew: the runner itself never calls
sysverbs.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Callable, Optional

import sysverbs.cli
import sysverbs.cli.topo  # noqa: F401  (imported before the forks)

Result = dict[str, Any]
CGROUP = "/sys/fs/cgroup"
#: cgroups the set-up makes: name -> (cpuset.cpus, cpuset.mems)
CGROUPS = {"sv_node0": ("0", "0"), "sv_mem0": ("0-1", "0")}
BIN = "/run/bin"
OUT = ""
_seq = [0]


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def cmd(argv: list[str], *, env: Optional[dict[str, str]] = None, stdin: str = "",
        timeout: float = 120.0) -> Result:
    """A program, its exit status and outputs."""
    t = time.monotonic()
    try:
        p = subprocess.run(argv, input=stdin.encode(), capture_output=True, timeout=timeout,
                           env={**os.environ, **(env or {})})
        r: Result = {"rc": p.returncode, "stdout": p.stdout.decode("latin-1"),
                     "stderr": p.stderr.decode("latin-1")}
    except (OSError, subprocess.TimeoutExpired) as e:
        r = {"rc": -1, "stdout": "", "stderr": f"{type(e).__name__}: {e}"}
    return {"argv": argv, **r, "t": round(time.monotonic() - t, 2)}


def warm(args: list[str]) -> Result:
    """``sysverbs ARGS`` once in a fork, then import here what it imported, so that the
    forks after it do not import it again (each import costs 9p round trips under
    emulation; importing reads no option and no environment)."""
    path = os.path.join(OUT, "modules.json")
    r = sv(args, modules=path)
    t = time.monotonic()
    if not os.path.exists(path):  # it crashed: test_setup says so
        return {**r, "imported": 0, "import_failed": [], "import_t": 0.0}
    with open(path) as f:
        names = json.load(f)
    os.unlink(path)
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - only a cost
            failed.append(name)
    return {**r, "imported": len(names), "import_failed": failed,
            "import_t": round(time.monotonic() - t, 2)}


def sv(args: list[str], *, env: Optional[dict[str, str]] = None,
       cgroup: Optional[str] = None, timeout: float = 120.0,
       modules: Optional[str] = None) -> Result:
    """``sysverbs ARGS`` in a fork of this process (optionally moved into ``cgroup``
    first), with ``env`` added to the environment; ``modules``: a file for the names
    of the modules loaded once ``ARGS`` returned."""
    _seq[0] += 1
    out, err = (os.path.join(OUT, f"sv{_seq[0]}.{s}") for s in ("stdout", "stderr"))
    t = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 70
        try:
            for fd, path in ((1, out), (2, err)):
                f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(f, fd)
                os.close(f)
            if cgroup:
                _write(f"{CGROUP}/{cgroup}/cgroup.procs", str(os.getpid()))
            os.environ.update(env or {})
            try:
                code = int(sysverbs.cli.main(list(args)) or 0)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if modules:
                _write(modules, json.dumps(sorted(sys.modules)))
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    killer = threading.Timer(timeout, os.kill, (pid, signal.SIGKILL))
    killer.start()
    rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    killer.cancel()
    r: Result = {"args": args, "env": env or {}, "cgroup": cgroup, "rc": rc}
    for key, path in (("stdout", out), ("stderr", err)):
        with open(path, "rb") as f:
            r[key] = f.read().decode("latin-1")
        os.unlink(path)
    r["t"] = round(time.monotonic() - t, 2)
    return r


def wait_for(what: str, ok: Callable[[], bool], limit: float = 60.0) -> float:
    """Seconds until ``ok()``; raises after ``limit``."""
    t = time.monotonic()
    while not ok():
        if time.monotonic() - t > limit:
            raise TimeoutError(f"{what} not there after {limit:.0f} s")
        time.sleep(0.05)
    return round(time.monotonic() - t, 2)


def setup(layout: list[dict[str, Any]]) -> Result:
    log: Result = {}
    pci = "/sys/bus/pci"
    _write(f"{pci}/drivers_autoprobe", "0")
    log["modprobe"] = cmd(["modprobe", "-a", "e1000e", "nvme"])
    t = time.monotonic()
    for ep in layout:  # the layout's order: eth0/nvme0 on node 0
        if ep["kind"] == "nic":
            _write(f"{pci}/drivers_probe", ep["address"])
    log["probe nics"] = round(time.monotonic() - t, 2)
    nics = [ep for ep in layout if ep["kind"] == "nic"]
    _write("/proc/sys/kernel/hostname", "numa-lab")  # (mpirun refuses "(none)")
    log["ip"] = cmd(["ip", "-batch", "-"],
                    stdin="link set lo up\n"  # (mpirun needs an interface)
                    + "".join(f"link set {ep['netdev']} up\n"
                              # an IPv4 address: a RoCE v2 GID NCCL can use
                              f"addr add 10.10.{i}.1/24 dev {ep['netdev']}\n"
                              for i, ep in enumerate(nics)))
    log["rdma"] = cmd(["rdma", "-b", "-"], stdin="".join(
        f"link add {ep['rdma']} type rxe netdev {ep['netdev']}\n" for ep in nics))
    for ep in layout:  # (while the links come up)
        if ep["kind"] == "nvme":
            _write(f"{pci}/drivers_probe", ep["address"])
            log[f"wait {ep['block']}"] = wait_for(
                ep["block"], lambda b=ep["block"]: os.path.exists(f"/sys/class/block/{b}"))
    _write(f"{pci}/drivers_autoprobe", "1")
    for ep in nics:
        port = f"/sys/class/infiniband/{ep['rdma']}/ports/1"
        log[f"carrier {ep['netdev']}"] = wait_for(
            ep["netdev"] + " carrier",
            lambda n=ep["netdev"]: _read(f"/sys/class/net/{n}/carrier") == "1")
        log[f"active {ep['rdma']}"] = wait_for(
            ep["rdma"] + " ACTIVE", lambda p=port: "ACTIVE" in (_read(f"{p}/state") or ""))
        # rxe's GIDs are RoCE v2: 0 the link-local address, then the IPv4 one
        log[f"ipv4 gid {ep['rdma']}"] = wait_for(
            ep["rdma"] + " IPv4 GID", lambda p=port: any(
                (_read(f"{p}/gids/{i}") or "").startswith("0000:0000:0000:0000:0000:ffff:")
                for i in range(4)))
    # cgroup2 with the cpuset controller
    if not any(line.split()[1:3] == [CGROUP, "cgroup2"] for line in open("/proc/mounts")):
        log["mount cgroup2"] = cmd(["mount", "-t", "cgroup2", "none", CGROUP])
    _write(f"{CGROUP}/cgroup.subtree_control", "+cpuset")
    for name, (cpus, mems) in CGROUPS.items():
        os.makedirs(f"{CGROUP}/{name}", exist_ok=True)
        _write(f"{CGROUP}/{name}/cpuset.cpus", cpus)
        _write(f"{CGROUP}/{name}/cpuset.mems", mems)
    # `python` for the commands that run as real processes (mpirun's ranks)
    os.makedirs(BIN, exist_ok=True)
    _write(f"{BIN}/python", f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    os.chmod(f"{BIN}/python", 0o755)
    os.environ["PATH"] = f"{BIN}:{os.environ['PATH']}"
    return log


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def sysfs_facts() -> Result:
    """What the kernel says: every PCI function, block, net, nvme and RDMA device's
    place, the nodes, the cgroups."""
    pci = {}
    for a in _listdir("/sys/bus/pci/devices"):
        d = f"/sys/bus/pci/devices/{a}"
        driver = os.path.realpath(f"{d}/driver") if os.path.exists(f"{d}/driver") else None
        pci[a] = {"path": os.path.realpath(d), "class": _read(f"{d}/class"),
                  "vendor": _read(f"{d}/vendor"), "device": _read(f"{d}/device"),
                  "numa_node": _read(f"{d}/numa_node"),
                  "local_cpulist": _read(f"{d}/local_cpulist"),
                  "driver": os.path.basename(driver) if driver else None}
    classes = {c: {n: os.path.realpath(f"/sys/class/{c}/{n}")
                   for n in _listdir(f"/sys/class/{c}")}
               for c in ("block", "net", "nvme", "infiniband")}
    rdma = {n: {"parent": _read(f"/sys/class/infiniband/{n}/parent"),
                "state": _read(f"/sys/class/infiniband/{n}/ports/1/state"),
                "gids": [_read(f"/sys/class/infiniband/{n}/ports/1/gids/{i}") for i in range(6)],
                "types": [_read(f"/sys/class/infiniband/{n}/ports/1/gid_attrs/types/{i}")
                          for i in range(6)]}
            for n in classes["infiniband"]}
    nodes = {n[4:]: {"cpulist": _read(f"/sys/devices/system/node/{n}/cpulist"),
                     "distance": _read(f"/sys/devices/system/node/{n}/distance")}
             for n in _listdir("/sys/devices/system/node") if n.startswith("node")}
    cpus = {c: {"package": _read(f"/sys/devices/system/cpu/{c}/topology/package_cpus_list"),
                "core": _read(f"/sys/devices/system/cpu/{c}/topology/core_cpus_list"),
                "l3": _read(f"/sys/devices/system/cpu/{c}/cache/index3/shared_cpu_list")}
            for c in _listdir("/sys/devices/system/cpu") if c[3:].isdigit()}
    cgroups = {n: {k: _read(f"{CGROUP}/{n}/cpuset.{k}")
                   for k in ("cpus", "mems", "cpus.effective", "mems.effective")}
               for n in CGROUPS}
    return {"pci": pci, "class": classes, "rdma": rdma, "nodes": nodes, "cpus": cpus,
            "cgroups": cgroups}


LSTOPO = ["lstopo-no-graphics", "--whole-io"]


def topology() -> Result:
    r: Result = {
        "lstopo_xml": cmd([*LSTOPO, "--of", "xml", "-"]),
        "lstopo": cmd([*LSTOPO, "-v", "--of", "console"]),
        "topo_json": sv(["topo", "--json"]),
        "near": {d: sv(["topo", "--assign", "--near", d, "--json"])
                 for d in ("nvme0n1", "nvme1n1", "0000:42:00.0", "eth0", "rxe1")},
        "near_text": sv(["topo", "--assign", "--near", "nvme0n1,nvme1n1"]),
    }
    return r


STATUS = ["cat", "/proc/self/status"]
SHOW = ["numactl", "--show"]


#: The plan carried out, both views in one command (children of ``sh`` inherit the
#: affinity and the memory policy): the status lines, a line ``----``, numactl's.
BOTH = ["sh", "-c", "cat /proc/self/status; echo ----; numactl --show"]


def run_case(opts: list[str], *, env: Optional[dict[str, str]] = None,
             cgroup: Optional[str] = None, direct: bool = False, nics: bool = False,
             plan: bool = True) -> Result:
    """One set of ``sysverbs run`` options: its plan, and it carried out (``direct``:
    also ``cat /proc/self/status`` and ``numactl --show`` each as the command).
    Without ``nics``, ``--no-nics``: the NIC variables cost a read of every GID of
    both rxe devices (2,000 sysfs files, two seconds under emulation), and the cases
    that are about them say ``nics``."""
    if not nics:
        opts = [*opts, "--no-nics"]
    r: Result = {"opts": opts}
    if plan:
        r["plan"] = sv(["run", *opts, "--dry-run", "--json", "--", *STATUS], env=env,
                       cgroup=cgroup)
    r["both"] = sv(["run", *opts, "--", *BOTH], env=env, cgroup=cgroup)
    if direct:
        r["status"] = sv(["run", *opts, "--", *STATUS], env=env, cgroup=cgroup)
        r["show"] = sv(["run", *opts, "--", *SHOW], env=env, cgroup=cgroup)
    return r


CPU_MODES = ("node", "socket", "exclusive", "exclusive-nosmt", "core-complex", "none")


def run_modes() -> Result:
    cases: Result = {}
    for cpu in CPU_MODES:  # every --cpu mode by node 1's NVMe drive
        cases[f"cpu={cpu}"] = run_case(["--local-rank", "0", "--near", "nvme1n1",
                                        "--cpu", cpu, "--mem", "preferred"],
                                       direct=cpu == "node")
    for mem in ("bind", "none"):  # the other --mem modes, by node 0's drive
        cases[f"mem={mem} near=nvme0n1"] = run_case(
            ["--near", "nvme0n1", "--mem", mem], env={"LOCAL_RANK": "0"})
    # the other kinds of anchor (the plan only): a PCI address, an RDMA device, a
    # netdev; then the rank's entry of a list, the rank from Open MPI's variable
    for dev in ("0000:42:00.0", "rxe1", "eth0"):
        opts = ["--local-rank", "0", "--near", dev, "--no-nics"]
        cases[f"near={dev}"] = {"opts": opts, "plan": sv(
            ["run", *opts, "--dry-run", "--json", "--", "true"])}
    cases["near=list rank=1"] = run_case(["--near", "nvme0n1,nvme1n1"],
                                         env={"OMPI_COMM_WORLD_LOCAL_RANK": "1"}, nics=True)
    return {"cases": cases, "baseline": cmd(BOTH)}


def cgroup() -> Result:
    procs = f"{CGROUP}/sv_node0/cgroup.procs"
    shell = f"echo $$ > {procs} && cat /proc/self/status && numactl --show && cat /proc/self/cgroup"
    cases: Result = {
        # fits: node 0's drive, node 0 allowed
        "node0 near=nvme0n1 bind": run_case(["--local-rank", "0", "--near", "nvme0n1",
                                              "--mem", "bind"], cgroup="sv_node0",
                                             direct=True),
        # the package is both nodes: shrunk to node 0's CPU
        "node0 near=nvme0n1 cpu=socket": run_case(["--local-rank", "0", "--near", "nvme0n1",
                                                   "--cpu", "socket"], cgroup="sv_node0"),
        # node 1's drive, node 1 excluded: nothing of its node is left
        "node0 near=nvme1n1": run_case(["--local-rank", "0", "--near", "nvme1n1"],
                                       cgroup="sv_node0"),
        "node0 near=nvme1n1 fallback": run_case(["--local-rank", "0", "--near", "nvme1n1",
                                                 "--fallback"], cgroup="sv_node0", plan=False),
        # only node 1's memory excluded
        "mem0 near=nvme1n1 bind": run_case(["--local-rank", "0", "--near", "nvme1n1",
                                            "--mem", "bind"], cgroup="sv_mem0"),
        "mem0 near=nvme1n1 preferred": run_case(["--local-rank", "0", "--near", "nvme1n1",
                                                 "--mem", "preferred"], cgroup="sv_mem0"),
        # --allowed-cpus instead of a cgroup
        "allowed=0 near=nvme1n1": run_case(["--local-rank", "0", "--near", "nvme1n1",
                                            "--allowed-cpus", "0"]),
        "allowed=0 near=nvme1n1 fallback": run_case(
            ["--local-rank", "0", "--near", "nvme1n1", "--allowed-cpus", "0", "--fallback"],
            plan=False),
    }
    # a shell moved into the cgroup exec'ing the real command (a process of its own)
    real = ("exec python -m sysverbs run --local-rank 0 --near nvme1n1 --no-nics --fallback "
            "-- numactl --show")
    return {"shell": cmd(["sh", "-c", shell]), "cases": cases,
            "real_fallback": cmd(["sh", "-c", f"echo $$ > {procs} && {real}"])}


MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--bind-to", "none"]
NEAR = ["python", "-m", "sysverbs", "run", "--near", "nvme0n1,nvme1n1"]
#: What each rank prints in the tagged run: its policy, its status lines, its NIC
#: variables.
RANK_REPORT = ("numactl --show; grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status; "
               "env | grep -E '^(NCCL_IB_HCA|UCX_NET_DEVICES|OMPI_COMM_WORLD_LOCAL_RANK)=' | sort")


def mpirun() -> Result:
    """The command of the docs (``-- numactl --show``), and with ``--tag-output`` each
    rank's report (its policy, its status lines, its variables)."""
    return {
        "show": cmd([*MPIRUN, *NEAR, "--", *SHOW]),
        "tagged": cmd([*MPIRUN, "--tag-output", *NEAR, "--", "sh", "-c", RANK_REPORT]),
    }


def acs() -> Result:
    from tests.kernel.acs_scenarios import acs as scenario

    return scenario(cmd, sv, warm)


SCENARIOS: tuple[tuple[str, Callable[[], Result]], ...] = (
    ("topology", topology), ("run_modes", run_modes), ("cgroup", cgroup), ("mpirun", mpirun),
    ("acs", acs))


def main() -> None:
    global OUT
    layout_path, OUT = sys.argv[1], sys.argv[2]
    with open(layout_path) as f:
        layout = json.load(f)
    results: Result = {"uptime": _read("/proc/uptime"), "scenarios": {}, "timings": {}}
    out = os.path.join(OUT, "results.json")

    def save() -> None:
        with open(out + ".tmp", "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
        os.replace(out + ".tmp", out)

    t = time.monotonic()
    try:
        results["setup"] = setup(layout)
    except Exception:
        results["setup"] = {"crash": traceback.format_exc()}
    results["timings"]["setup"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    results["sysfs"] = sysfs_facts()
    results["timings"]["sysfs"] = round(time.monotonic() - t, 2)
    results["warm"] = warm(["run", "--near", "nvme0n1", "--dry-run", "--json", "--", "true"])
    save()
    only = os.environ.get("SV_NUMA_ONLY", "")
    for name, scenario in SCENARIOS:
        if only and name not in only.split(","):
            continue
        t = time.monotonic()
        try:
            results["scenarios"][name] = scenario()
        except Exception:
            results["scenarios"][name] = {"crash": traceback.format_exc()}
        results["timings"][name] = round(time.monotonic() - t, 2)
        print(f"NUMA scenario {name}: {results['timings'][name]} s", flush=True)
        save()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark sysverbs.placement (issue 16): model + assignment, VF scaling, ``sysverbs topo``.

    .venv/bin/python benchmarks/bench_placement.py [--samples 21] [--json PATH]

Measured, on trees written like the kernel's sysfs (``tests/pcitree.py``):

(a) ``read_host()`` + ``assign()`` in-process, after import, on an 8-GPU, 18-NIC host of
    about 200 PCI functions (``tests.pcitree.oci_a100``: a two-level PCIe switch per GPU
    pair, NVSwitches, NVMe, host-bridge functions) — target <= 5 ms (median); beside
    it, for scale, its floor: the file-system calls one run makes (recorded, then
    replayed alone: each open with its one read and close), the cost of its reads alone;
(b) the same on one host with 256 and with 1024 SR-IOV VFs (each an RDMA device,
    assigned with ``include_vfs=True``) — target t(1024)/t(256) <= 4.5;
(c) wall time of ``sysverbs topo --sysfs-path TREE`` — target <= 60 ms — (the console
    script, as pip and uv write it for ``[project.scripts]``; ``python -m sysverbs
    topo``, which adds ``runpy``, beside it) and of ``lstopo-no-graphics --whole-io``
    with ``HWLOC_FSROOT`` on the same tree
    (when hwloc is installed; hwloc needs more of the tree than placement does, so its
    figure is for scale only).  ``python`` there is an interpreter that sees the
    package as a regular install does: a throwaway ``venv --without-pip`` of the same
    base interpreter whose site-packages holds a plain ``.pth`` line with the
    repository's path.  (The development venv's editable install adds a finder that
    imports ``pathlib``, ``re`` and ``importlib.util`` at every start, about 20 ms that
    a user's install has not.)  ``python -c pass`` of that same interpreter is reported
    beside it; the commands of (c) run round by round, side by side.

Prints a table and the targets (``met`` / ``NOT MET``); writes every sample to
``benchmarks/placement-results.json`` (``--json``).  Not a timed test: nothing asserts
wall-clock time.  Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.pcitree import PciTree, oci_a100  # noqa: E402


def big_host(root: Path, vfs: int = 0) -> tuple[PciTree, int]:
    """The OCI A100 host of the placement tests (8 GPUs, 18 NIC ports) with what such
    a host has beside (NVSwitches, NVMe, host-bridge functions): about 200 PCI
    functions.  ``vfs``: that many SR-IOV VFs (each an RDMA device) on the storage card."""
    t = oci_a100(PciTree(root), filler=True, vfs=vfs)
    n_pci = len(list((t.sys / "bus/pci/devices").iterdir()))
    return t, n_pci


def timed(fn: object, samples: int) -> list[float]:
    out = []
    for _ in range(3):
        fn()  # type: ignore[operator]
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t0) * 1000)
    return out


def recorded_reads(fn: object) -> list[tuple[str, object, Optional[str]]]:
    """The file-system calls one run of ``fn`` makes (open, readlink, listdir, stat,
    lstat), in order, with their paths and, for a name looked up from an open
    directory (``dir_fd``), that directory: what the model must read, whatever it does
    with it."""
    calls: list[tuple[str, object, Optional[str]]] = []
    saved = {name: getattr(os, name) for name in ("open", "readlink", "listdir", "stat",
                                                   "lstat")}

    def wrap(name: str) -> object:
        real = saved[name]

        def call(path: object, *args: object, **kwargs: object) -> object:
            fd = kwargs.get("dir_fd")
            where = saved["readlink"](f"/proc/self/fd/{fd}") if isinstance(fd, int) else None
            calls.append((name, path, where))
            return real(path, *args, **kwargs)
        return call

    for name in saved:
        setattr(os, name, wrap(name))
    try:
        fn()  # type: ignore[operator]
    finally:
        for name, real in saved.items():
            setattr(os, name, real)
    return calls


def replay(calls: list[tuple[str, object, Optional[str]]]) -> None:
    """The same calls without the model: each open with its one read and its close,
    as the sysfs reader does them; a name looked up from an open directory is looked
    up so again (each such directory opened once, as the model does)."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
    dirs: dict[str, int] = {}
    try:
        for name, path, where in calls:
            at = {}
            if where is not None:
                if where not in dirs:
                    dirs[where] = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                at = {"dir_fd": dirs[where]}
            try:
                if name == "open":
                    fd = os.open(path, flags, **at)  # type: ignore[arg-type]
                    try:
                        os.read(fd, 4096)
                    finally:
                        os.close(fd)
                else:
                    getattr(os, name)(path, **at)
            except OSError:
                pass
    finally:
        for fd in dirs.values():
            os.close(fd)


def walls(commands: dict[str, tuple[list[str], dict[str, str]]], samples: int
          ) -> dict[str, list[float]]:
    """Wall time of each command (argv, env), run round by round, side by side, so that
    a burst of load on the shared machine falls on all of them."""
    out: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(samples + 1):
        for name, (argv, env) in commands.items():
            t0 = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
            if i:  # the first run warms the page cache
                out[name].append((time.perf_counter() - t0) * 1000)
    return out


def plain_python(where: Path) -> str:
    """An interpreter that imports the repository's ``sysverbs`` as a regular install
    would: a venv of this one's base interpreter, without pip, whose site-packages has
    a ``.pth`` file naming the repository (no editable-install finder)."""
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(where)
    python = str(where / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True,
                             check=True).stdout.strip()
    (Path(purelib) / "sysverbs-bench.pth").write_text(str(REPO) + "\n")
    # The console script of ``[project.scripts]``, as pip and uv write it.
    script = Path(python).parent / "sysverbs"
    script.write_text(f"#!{python}\nimport sys\nfrom sysverbs.cli import main\n"
                      "if __name__ == '__main__':\n"
                      "    sys.argv[0] = sys.argv[0].removesuffix('.exe')\n"
                      "    sys.exit(main())\n")
    script.chmod(0o755)
    return python


def in_process(python: str, argv: list[str], env: dict[str, str], samples: int
               ) -> list[float]:
    """The part of ``python -m sysverbs ARGV`` after the interpreter's start: from
    before ``import sysverbs`` to the command's return, timed inside the child."""
    code = ("import os, sys, time\n"
            "t0 = time.perf_counter()\n"
            "from sysverbs.cli import main\n"
            "sys.stdout = open(os.devnull, 'w')\n"
            f"main({argv!r})\n"
            "sys.stderr.write(repr((time.perf_counter() - t0) * 1000))\n")
    out = []
    for i in range(samples + 1):
        r = subprocess.run([python, "-c", code], env=env, capture_output=True,
                           text=True, check=True)
        if i:
            out.append(float(r.stderr.strip().splitlines()[-1]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=21)
    ap.add_argument("--json", default=str(REPO / "benchmarks/placement-results.json"))
    args = ap.parse_args()
    from sysverbs.placement import assign, read_host

    results: dict[str, object] = {"machine": f"{platform.python_implementation()} "
                                  f"{platform.python_version()}, {os.cpu_count()} CPUs"}
    with tempfile.TemporaryDirectory(prefix="bench-placement-") as tmp:
        base = Path(tmp)
        t, n_pci = big_host(base / "host")
        host = read_host(t.sys, t.proc)
        assert len(host.gpus) == 8 and len(host.nics) == 18, (len(host.gpus), len(host.nics))

        def model_assign(sys_path: Path = t.sys, vfs: bool = False) -> None:
            assign(read_host(sys_path), include_vfs=vfs)

        a = timed(model_assign, args.samples)
        results["model_assign_ms"] = a
        # The floor under (a): the same file-system calls, replayed alone.
        calls = recorded_reads(model_assign)
        results["reads_alone_ms"] = reads = timed(lambda: replay(calls), args.samples)
        results["reads"] = {name: sum(1 for c in calls if c[0] == name)
                            for name in sorted({c[0] for c in calls})}
        results["pci_functions"] = n_pci
        print(f"progress: (a) done, {n_pci} PCI functions", file=sys.stderr)
        # 256 and 1024 VFs measured round by round, side by side, so that the machine's
        # drift does not fall on one size; the ratio is the median of per-round ratios.
        trees = {n: big_host(base / f"vf{n}", vfs=n)[0].sys for n in (256, 1024)}
        scale: dict[int, list[float]] = {256: [], 1024: []}
        for p in trees.values():
            model_assign(p, True)  # warm-up
        for _ in range(max(5, args.samples // 2)):
            for n, p in trees.items():
                t0 = time.perf_counter()
                model_assign(p, True)
                scale[n].append((time.perf_counter() - t0) * 1000)
        print("progress: (b) done", file=sys.stderr)
        results["vf_ms"] = {str(k): v for k, v in scale.items()}
        # Bytecode cached, as an installed package has it (PYTHONDONTWRITEBYTECODE would
        # compile every module on every run): in a temporary prefix, not the repository.
        env = dict(os.environ, PYTHONPYCACHEPREFIX=str(base / "pyc"))
        for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONHOME"):
            env.pop(name, None)
        python = plain_python(base / "venv")
        results["python"] = python
        topo_args = ["topo", "--sysfs-path", str(t.sys), "--proc-path", str(t.proc)]
        commands = {
            "topo_wall_ms": ([str(Path(python).parent / "sysverbs"), *topo_args], env),
            "topo_m_wall_ms": ([python, "-m", "sysverbs", *topo_args], env),
            "python_start_wall_ms": ([python, "-c", "pass"], env),
            "python_bare_start_wall_ms": ([python, "-I", "-S", "-c", "pass"], env),
            "devices_wall_ms": ([python, "-m", "sysverbs", "devices", "--sysfs-path",
                                 str(t.sys)], env),
        }
        lstopo = shutil.which("lstopo-no-graphics")
        if lstopo:
            commands["lstopo_wall_ms"] = ([lstopo, "--whole-io", "--of", "xml"],
                                          dict(env, HWLOC_FSROOT=str(base / "host")))
        results.update(walls(commands, args.samples))
        results.setdefault("lstopo_wall_ms", [])
        topo: list[float] = results["topo_wall_ms"]  # type: ignore[assignment]
        hw: list[float] = results["lstopo_wall_ms"]  # type: ignore[assignment]
        results["topo_in_process_ms"] = in_process(python, topo_args, env, args.samples)
    med = statistics.median
    ratio = med([b / a for a, b in zip(scale[256], scale[1024])])
    rows = [
        ("(a) read_host + assign, 8 GPU / 18 NIC", med(a), "<= 5 ms", med(a) <= 5),
        ("(a) for scale: its " + str(len(calls)) + " file-system calls replayed alone",
         med(reads), "", None),
        ("(b) 256 VFs", med(scale[256]), "", None),
        ("(b) 1024 VFs", med(scale[1024]), f"ratio {ratio:.2f} <= 4.5", ratio <= 4.5),
        ("(c) sysverbs topo (wall)", med(topo), "<= 60 ms", med(topo) <= 60),
    ]
    rows.append(("(c) python -m sysverbs topo (wall)",
                 med(results["topo_m_wall_ms"]), "", None))  # type: ignore[arg-type]
    rows.append(("(c) sysverbs topo, in-process part (import + run)",
                 med(results["topo_in_process_ms"]), "", None))  # type: ignore[arg-type]
    rows.append(("(c) for scale: that python -c pass (wall)",
                 med(results["python_start_wall_ms"]), "", None))  # type: ignore[arg-type]
    rows.append(("(c) for scale: that python -I -S -c pass (wall)",
                 med(results["python_bare_start_wall_ms"]), "", None))  # type: ignore[arg-type]
    rows.append(("(c) for scale: sysverbs devices (wall)",
                 med(results["devices_wall_ms"]), "", None))  # type: ignore[arg-type]
    if hw:
        rows.append(("(c) lstopo-no-graphics --whole-io (wall)", med(hw), "for scale", None))
    print("| measurement | median ms | target | |\n|---|---:|---|---|")
    for name, value, target, ok in rows:
        verdict = "" if ok is None else "met" if ok else "NOT MET"
        print(f"| {name} | {value:.2f} | {target} | {verdict} |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results["load_average"] = load
    print(f"\n{results['machine']}; load average {load:.1f}; {n_pci} PCI functions in (a)")
    results["targets"] = {r[0]: {"median_ms": r[1], "target": r[2], "met": r[3]} for r in rows}
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

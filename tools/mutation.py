"""``make mutation``: cosmic-ray's mutants of the modules that give verdicts, each run
against the test files that should catch it (tools/mutation_targets.json).

Run by the Python of the mutation virtualenv (cosmic-ray), not the project's:

    build/mutation/venv/bin/python tools/mutation.py --python .venv/bin/python [-j 2]
        [--module sysverbs/fleet/facts.py ...] [--report]

How a mutant is tried: cosmic-ray's ``mutate_and_test`` writes the mutated module into a
*copy* of the checkout (``build/mutation/run<PID>/copy<N>``, one per worker, made from
the checkout at each start, removed at the end), runs the test command there (``env -C
COPY PYTHONPATH=COPY python -m pytest -x ...``) and writes the original back.  The mutant
is a file on disk, so every process the tests start (``python -m sysverbs ...``) imports
it too.  No bytecode is written during a run (cosmic-ray sets PYTHONDONTWRITEBYTECODE);
the copies' sources are dated 2001 and compiled once, so a rewritten module (dated now)
is never read from a stale cache.

Resumable: each module's session is cosmic-ray's SQLite file
``build/mutation/<module>.sqlite``, kept while the module and its test files are
unchanged (their digest beside it); a run does only the mutants without a result.
Parallel: ``-j N`` workers (copies) take mutants from every module asked for.

The score of a module: killed / (mutants - equivalent), where the equivalent mutants are
the survivors listed in tools/mutation_equivalent.txt (one line each:
``path | operator | function | original line -> mutated line | why``; ``*`` for the
operator and the mutated line: every mutant of that line).  Survivors not listed are
printed with their diff; ``build/mutation/scores.json`` has the numbers.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / "build" / "mutation"
TARGETS = ROOT / "tools" / "mutation_targets.json"
EQUIVALENT = ROOT / "tools" / "mutation_equivalent.txt"
OLD = 978307200  # 2001-01-01: the copies' sources are older than any mutant written


def slug(module: str) -> str:
    return module.replace("/", "_").removesuffix(".py")


def digest(names: list[str]) -> str:
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode() + b"\0" + (ROOT / name).read_bytes() + b"\0")
    return h.hexdigest()


def make_copy(dest: Path) -> None:
    """A copy of the checkout's tracked and untracked (not ignored) files."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    shutil.rmtree(dest, ignore_errors=True)
    for name in filter(None, files):
        src = ROOT / name
        if not src.is_file() or name.startswith("build/"):
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / name)
        if name.endswith(".py"):
            os.utime(dest / name, (OLD, OLD))
    subprocess.run([sys.executable, "-m", "compileall", "-q", "sysverbs"], cwd=dest,
                   check=False, capture_output=True)


def temp_dir(copy: Path) -> Path:
    """The pytest temporary directory of ``copy``'s test runs (on /dev/shm when it is
    there: pytest empties it at each start, and nobody else's runs wait for that)."""
    shm = Path("/dev/shm")
    name = "sysverbs-mutation-" + hashlib.sha256(bytes(copy)).hexdigest()[:12]
    return (shm if shm.is_dir() and os.access(shm, os.W_OK) else copy) / name


def test_command(python: str, copy: Path, tests: list[str]) -> str:
    """pytest on ``tests`` in ``copy``, stopping at the first failure, with a fixed
    property-test seed and a temporary directory of the copy's own (:func:`temp_dir`)."""
    return (f"env -C {copy} PYTHONPATH={copy} SYSVERBS_FUZZ_SEED=1 {python} -m pytest -x -q "
            f"-p no:cacheprovider --basetemp {temp_dir(copy)} " + " ".join(tests))


def config_text(module: str, timeout: float) -> str:
    return (f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = {timeout}\n'
            f'excluded-modules = []\ntest-command = "true"\n\n'
            f'[cosmic-ray.distributor]\nname = "local"\n')


def init_session(module: str, tests: list[str]) -> Path:
    """The module's session, made anew when the module changed; when only its tests
    changed, its survivors are tried again (a mutant killed stays killed, and one listed
    as equivalent stays so)."""
    import sqlite3

    session = STATE / f"{slug(module)}.sqlite"
    stamp = STATE / f"{slug(module)}.digest"
    want = f"{digest([module])} {digest(tests)}"
    have = stamp.read_text().split() if session.exists() and stamp.exists() else []
    if have and have[0] == want.split()[0]:
        if have[1] != want.split()[1]:
            known = equivalents()
            with sqlite3.connect(session) as db:
                rows = db.execute(
                    "SELECT r.job_id, s.operator_name, s.definition_name, r.diff "
                    "FROM work_results r JOIN mutation_specs s USING (job_id) "
                    "WHERE r.test_outcome IN ('SURVIVED', 'survived')").fetchall()
                db.executemany("DELETE FROM work_results WHERE job_id = ?",
                               [(job,) for job, op, function, diff in rows
                                if not listed(known, module, op, function or "", diff)])
            stamp.write_text(want)
        return session
    session.unlink(missing_ok=True)
    config = STATE / f"{slug(module)}.toml"
    config.write_text(config_text(module, 600))
    subprocess.run([str(Path(sys.executable).parent / "cosmic-ray"), "init", str(config),
                    str(session)], cwd=ROOT, check=True)
    stamp.write_text(want)
    return session


def leave_out(session: Path, exclude: list[str]) -> None:
    """Mark the pending mutants of the operators left out (the table's list) as skipped."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    skip = re.compile("|".join(exclude))
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            if any(skip.match(m.operator_name) for m in item.mutations):
                db.set_result(item.job_id, WorkResult(output="operator left out",
                                                      worker_outcome=WorkerOutcome.SKIPPED))


def baseline(python: str, copy: Path, tests: list[str]) -> float:
    start = time.monotonic()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run(test_command(python, copy, tests).split(), env=env, capture_output=True)
    if p.returncode != 0:
        sys.exit(f"the tests fail on the unmutated code: {' '.join(tests)}\n"
                 f"{p.stdout.decode()[-3000:]}")
    return time.monotonic() - start


def run(modules: dict[str, list[str]], python: str, jobs: int, exclude: list[str]) -> None:
    from cosmic_ray.work_db import WorkDB, use_db

    sessions = {m: init_session(m, t) for m, t in modules.items()}
    for session in sessions.values():
        leave_out(session, exclude)
    pending = []
    for m, session in sessions.items():
        with use_db(str(session), WorkDB.Mode.open) as db:
            pending += [(m, item) for item in db.pending_work_items]
    print(f"mutation: {len(pending)} mutants to try in {len(modules)} module(s), "
          f"{jobs} worker(s)", flush=True)
    if not pending:
        return
    # The copies of this run (another run, on other modules, has its own).
    work = STATE / f"run{os.getpid()}"
    copies: queue.Queue[Path] = queue.Queue()
    for n in range(jobs):
        make_copy(work / f"copy{n}")
        copies.put(work / f"copy{n}")
    try:
        tried = _try_all(modules, python, pending, sessions, copies, work)
    finally:
        for n in range(jobs):
            shutil.rmtree(temp_dir(work / f"copy{n}"), ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"mutation: {tried} mutants tried", flush=True)


def _try_all(modules: dict[str, list[str]], python: str, pending: list[tuple[str, Any]],
             sessions: dict[str, Path], copies: queue.Queue[Path], work: Path) -> int:
    import attr
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db

    limits = {}
    for m in dict.fromkeys(m for m, _ in pending):
        took = baseline(python, work / "copy0", modules[m])
        limits[m] = max(60.0, 3 * took)
        print(f"mutation: {m}: the unmutated tests pass in {took:.0f} s "
              f"(a mutant gets {limits[m]:.0f} s)", flush=True)
    lock = threading.Lock()
    done = 0

    def one(module: str, item: object) -> None:
        nonlocal done
        copy = copies.get()
        try:
            specs = [attr.evolve(s, module_path=copy / s.module_path)
                     for s in item.mutations]  # type: ignore[attr-defined]
            result = mutate_and_test(specs, test_command(python, copy, modules[module]),
                                     limits[module])
            result = attr.evolve(result, diff=result.diff.replace(str(copy) + "/", ""))
        finally:
            copies.put(copy)
        with lock, use_db(str(sessions[module]), WorkDB.Mode.open) as db:
            db.set_result(item.job_id, result)  # type: ignore[attr-defined]
            done += 1
            print(f"mutation: [{done}/{len(pending)}] {module} "
                  f"{item.mutations[0].operator_name} "  # type: ignore[attr-defined]
                  f"line {item.mutations[0].start_pos[0]}: "  # type: ignore[attr-defined]
                  f"{result.test_outcome or result.worker_outcome}", flush=True)

    with concurrent.futures.ThreadPoolExecutor(copies.qsize()) as pool:
        for f in [pool.submit(one, m, item) for m, item in pending]:
            f.result()
    return done


def changed_lines(diff: str) -> tuple[str, str]:
    """The first removed and added line of a mutant's diff, stripped."""
    old = [x[1:].strip() for x in diff.splitlines() if x.startswith("-")
           and not x.startswith("---")]
    new = [x[1:].strip() for x in diff.splitlines() if x.startswith("+")
           and not x.startswith("+++")]
    return (old[0] if old else ""), (new[0] if new else "")


def equivalents() -> set[tuple[str, str, str, str, str]]:
    out = set()
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split(" | ")  # the code may hold " | ", the reason may not
            path, op, function = (x.strip() for x in parts[:3])
            before, after = " | ".join(parts[3:-1]).split(" -> ", 1)
            out.add((path, op, function, before.strip(), after.strip()))
    return out


def listed(known: set[tuple[str, str, str, str, str]], module: str, operator: str,
           function: str, diff: str) -> bool:
    """Whether tools/mutation_equivalent.txt lists the surviving mutant of this diff."""
    key = (module, operator, function, *changed_lines(diff))
    return key in known or (module, "*", function, key[3], "*") in known


def report(modules: dict[str, list[str]], markdown: bool = False) -> int:
    """Print each module's score and its unlisted survivors; 1 if any survivor is unlisted
    or a module is below 90%."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    known = equivalents()
    scores = {}
    status = 0
    for module in modules:
        session = STATE / f"{slug(module)}.sqlite"
        if not session.exists():
            print(f"{module}: not run")
            continue
        killed = survived = equivalent = pending = skipped = 0
        unlisted = []
        with use_db(str(session), WorkDB.Mode.open) as db:
            results = dict(db.results)
            items = list(db.work_items)
        for item in items:
            r = results.get(item.job_id)
            if r is None:
                pending += 1
            elif r.worker_outcome in (WorkerOutcome.SKIPPED, WorkerOutcome.NO_TEST):
                skipped += 1
            elif r.test_outcome == TestOutcome.SURVIVED:
                spec = item.mutations[0]
                if listed(known, module, spec.operator_name, spec.definition_name or "",
                          r.diff):
                    equivalent += 1
                else:
                    survived += 1
                    unlisted.append((spec, r.diff))
            else:  # killed, or incompetent (the mutant does not even import)
                killed += 1
        tried = killed + survived
        score = killed / tried if tried else 1.0
        scores[module] = {"killed": killed, "survived": survived, "equivalent": equivalent,
                          "pending": pending, "left_out": skipped, "score": round(score, 4)}
        print(f"{module}: {killed}/{tried} non-equivalent mutants killed ({score:.1%}); "
              f"{equivalent} equivalent, {pending} not tried yet, {skipped} left out")
        for spec, diff in unlisted:
            old, new = changed_lines(diff)
            print(f"  survived: {module} | {spec.operator_name} | "
                  f"{spec.definition_name or ''} | {old} -> {new}")
        if unlisted or score < 0.9 or pending:
            status = 1
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "scores.json").write_text(json.dumps(scores, indent=1) + "\n")
    if markdown:  # the table of docs/reliability.md
        print("\n| module | killed / tried | score | equivalent | left out | not tried |")
        print("|---|---|---|---|---|---|")
        for module in modules:
            x = scores.get(module)
            if x is None:
                print(f"| `{module}` | not run | | | | |")
                continue
            tried = x["killed"] + x["survived"]
            print(f"| `{module}` | {x['killed']} / {tried} | {x['score']:.0%} | "
                  f"{x['equivalent']} | {x['left_out']} | {x['pending']} |")
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"),
                   help="the interpreter that runs the tests (the project's virtualenv)")
    p.add_argument("--module", action="append", default=[],
                   help="only this module (repeatable; default: every module of the table)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="workers (copies of the tree)")
    p.add_argument("--report", action="store_true", help="only print the scores")
    p.add_argument("--markdown", action="store_true", help="and a table of them")
    args = p.parse_args(argv)
    table = json.loads(TARGETS.read_text())
    modules = table["modules"]
    chosen = {m: modules[m] for m in (args.module or modules)
              if m in modules or sys.exit(f"{m}: not in {TARGETS.name}")}
    for m, tests in chosen.items():
        for name in [m, *tests]:
            if not (ROOT / name).is_file():
                sys.exit(f"{TARGETS.name}: {name} does not exist")
    STATE.mkdir(parents=True, exist_ok=True)
    if not args.report:  # the tests run in the copies: an absolute path (not resolved)
        run(chosen, os.path.abspath(args.python), max(1, args.jobs),
            table.get("exclude_operators", []))
    return report(chosen, args.markdown)


if __name__ == "__main__":
    sys.exit(main())

"""Run many generated examples and collect EVERY difference (the test stops at the first).

    python -m tests.fuzz.campaign [--examples N] [--seed S] [--unprivileged] [--static]
                                  [--out DIR]

Each differing example is written to ``DIR/diff-<n>.py`` as a :class:`Case` (ready
for tests/fuzz/regressions.py) with both outputs; the summary (examples, seconds,
examples/s, differences) is printed at the end.  ``--static``: one example in four
runs the static libibverbs (strategies.STATIC_VARIANTS), as test_differential does.
Needs root, like the oracle tests.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.fuzz.model import Case
from tests.fuzz.runner import Runner
from tests.fuzz.strategies import STATIC_VARIANTS, cases, unprivileged_cases


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--unprivileged", action="store_true")
    ap.add_argument("--static", action="store_true", help="draw static cases too")
    ap.add_argument("--out", type=Path, default=None, help="default: a new temporary dir")
    ap.add_argument("--mode", choices=["fork", "exec"], default=None)
    args = ap.parse_args()
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="sysverbs-fuzz-"))
    args.out.mkdir(parents=True, exist_ok=True)
    found: list[Case] = []
    runner = Runner(args.mode)
    t0 = time.monotonic()
    count = [0, 0]
    variants = STATIC_VARIANTS if args.static else ()

    @seed(args.seed)
    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate,),
    )
    @given(unprivileged_cases(variants) if args.unprivileged else cases(static=variants))
    def one(case: Case) -> None:
        count[0] += 1
        count[1] += case.static is not None
        outcome = runner.run(case)
        diffs = outcome.differences()
        if diffs:
            found.append(case)
            path = args.out / f"diff-{len(found)}.py"
            text = "\n\n".join(diffs)
            path.write_text(
                case.source(f"diff_{len(found)}")
                + "\n\n"
                + '"""\n'
                + text.replace('"""', "'''")
                + '\n"""\n',
                encoding="utf-8",
            )
            print(f"DIFFERENCE {len(found)} -> {path}: {diffs[0][:300]}", file=sys.stderr)
        if count[0] % 100 == 0:
            dt = time.monotonic() - t0
            print(
                f"{count[0]} examples, {dt:.0f} s, {count[0] / dt:.1f}/s, {len(found)} differences",
                file=sys.stderr,
            )

    try:
        one()
    finally:
        runner.close()
    dt = time.monotonic() - t0
    print(
        f"examples={count[0]} static={count[1]} seconds={dt:.1f} rate={count[0] / dt:.1f}/s "
        f"differences={len(found)} seed={args.seed} out={args.out}"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

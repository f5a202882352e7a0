#!/usr/bin/env python3
"""Benchmark the environment prediction (issue 17): a 16-NIC RoCE host whose ports each
have a 256-entry GID table, as mlx5 exposes it (4 valid entries: link-local and IPv4,
RoCE v1 and v2; the other 252 zero).

    .venv/bin/python benchmarks/bench_env.py [--nics 16] [--gids 256] [--rounds 200]

Measured, in this process, median and 95th percentile of ``--rounds`` calls:

(a) ``sysverbs.rank.environment.predict``: NCCL's GID scan on every port
    (``ncclIbGetGidIndex`` over 255 candidates each) and the variables with their
    reasons, from NICs already read (the target: <= 5 ms);
(b) ``predict`` plus ``render`` of all three formats;
(c) ``rank_environment`` end to end on the tree written to a temporary directory:
    reading the ports, GID tables (one read per entry, as ``ibv_query_gid``) and
    topology from sysfs, then (a).  That part is bound by sysfs reads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sysverbs.rank import environment  # noqa: E402
from sysverbs.rank.gid import GidEntry, GidTable  # noqa: E402
from sysverbs.testing import HostBuilder  # noqa: E402

TARGET_MS = 5.0


def tables(nics: int, gids: int) -> list[environment.Nic]:
    out = []
    for i in range(nics):
        ll = f"fe80::202:c9ff:fe00:{i:x}"
        v4 = f"::ffff:10.0.{i}.1"
        entries = (GidEntry(0, ll, "IB/RoCE v1"), GidEntry(1, ll, "RoCE v2"),
                   GidEntry(2, v4, "IB/RoCE v1"), GidEntry(3, v4, "RoCE v2"))
        out.append(environment.Nic(f"mlx5_{i}", 1, "Ethernet", "ACTIVE",
                                   (environment.Netdev(f"eth{i}", True, (f"10.0.{i}.1",)),),
                                   GidTable(f"mlx5_{i}", 1, "Ethernet", gids, entries)))
    return out


def tree(root: Path, nics: int, gids: int) -> tuple[str, str]:
    b = HostBuilder()
    for i in range(nics):
        attrs: dict[str, object] = {}
        for n in range(gids):
            attrs[f"ports/1/gids/{n}"] = "0000:0000:0000:0000:0000:0000:0000:0000"
        for n, (g, t) in enumerate([(f"fe80:0000:0000:0000:0202:c9ff:fe00:{i:04x}", "IB/RoCE v1"),
                                    (f"fe80:0000:0000:0000:0202:c9ff:fe00:{i:04x}", "RoCE v2"),
                                    (f"0000:0000:0000:0000:0000:ffff:0a00:{i:02x}01", "IB/RoCE v1"),
                                    (f"0000:0000:0000:0000:0000:ffff:0a00:{i:02x}01", "RoCE v2")]):
            attrs[f"ports/1/gids/{n}"] = g
            attrs[f"ports/1/gid_attrs/types/{n}"] = t
            attrs[f"ports/1/gid_attrs/ndevs/{n}"] = f"eth{i}"
        b.mlx5(model="cx7", link_layer="Ethernet", netdev=f"eth{i}", ib_attrs=attrs)  # type: ignore[arg-type]
    host = b.materialize(root)
    return str(host.sysfs), str(host.dev)


def measure(fn: object, rounds: int) -> tuple[float, float]:
    samples = []
    call = fn  # type: ignore[assignment]
    for _ in range(3):
        call()  # type: ignore[operator]
    for _ in range(rounds):
        t0 = time.perf_counter()
        call()  # type: ignore[operator]
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nics", type=int, default=16)
    ap.add_argument("--gids", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    nics = tables(args.nics, args.gids)
    env = environment.predict(nics, {})
    assert env.exports()["NCCL_IB_GID_INDEX"] == "3", env.render()
    a = measure(lambda: environment.predict(nics, {}), args.rounds)
    b = measure(lambda: [environment.predict(nics, {}).render(f) for f in environment.FORMATS],
                args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        sysfs, dev = tree(Path(tmp), args.nics, args.gids)
        names = [f"mlx5_{i}:1" for i in range(args.nics)]
        full = environment.rank_environment(names, environ={}, sysfs_path=sysfs, dev_dir=dev)
        assert full.exports()["NCCL_IB_GID_INDEX"] == "3", full.render()
        c = measure(lambda: environment.rank_environment(names, environ={}, sysfs_path=sysfs,
                                                         dev_dir=dev), max(5, args.rounds // 20))
    print(f"{args.nics} NICs x {args.gids} GID entries, Python {sys.version.split()[0]}")
    print("| measurement | median ms | p95 ms |")
    print("|---|---|---|")
    print(f"| (a) predict | {a[0]:.2f} | {a[1]:.2f} |")
    print(f"| (b) predict + render x3 | {b[0]:.2f} | {b[1]:.2f} |")
    print(f"| (c) rank_environment from sysfs | {c[0]:.1f} | {c[1]:.1f} |")
    verdict = "met" if a[0] <= TARGET_MS else "NOT MET"
    print(f"target: predict <= {TARGET_MS} ms: {verdict} ({a[0]:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

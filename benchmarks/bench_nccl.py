"""Predicting NCCL's IB device table and linting NCCL_IB_HCA on a 16-NIC host whose ports
have 256-entry GID tables (issue 17's target: at most 5 ms in-process).

    .venv/bin/python benchmarks/bench_nccl.py [--rounds N]

Times are the median and the minimum over N rounds of repeated calls (after one first
call) of ``nccl.host_ports`` (the device list and the sysfs reads) plus
``nccl.lint_hca`` (which runs ``select_ib``), on a host built with
``sysverbs.testing.HostBuilder``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from sysverbs.rank import nccl
from sysverbs.testing import HostBuilder

TARGET_MS = 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args()
    b = HostBuilder()
    gids = {f"ports/1/gids/{g}": f"fe80:0000:0000:0000:0000:0000:0000:{g:04x}\n"
            for g in range(256)}
    types = {f"ports/1/gid_attrs/types/{g}": "RoCE v2\n" for g in range(256)}
    for i in range(16):
        b.mlx5(name=f"mlx5_{i}", link_layer="Ethernet", ib_attrs={**gids, **types})
    with tempfile.TemporaryDirectory() as tmp:
        opts = b.materialize(tmp).options()
        ports = nccl.host_ports(**opts)
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            ports = nccl.host_ports(**opts)
            result = nccl.lint_hca("mlx5_1,mlx5_3:1,=mlx5_4", ports, {})
            times.append((time.perf_counter() - t0) * 1000)
    assert [d.device for d in result.selection.devices][:2] == ["mlx5_1", "mlx5_3"]
    med, low = statistics.median(times), min(times)
    print(f"16 NICs, 256 GIDs a port: host_ports + lint_hca median {med:.2f} ms, "
          f"min {low:.2f} ms (target <= {TARGET_MS} ms): "
          f"{'met' if med <= TARGET_MS else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

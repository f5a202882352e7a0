"""bench_list.py's numbers: a measurement's summary and ratio, its tables and the
issue-8 targets it is held to (imported by bench_list.py from its own folder)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Optional


def ms(values_ns: Sequence[int]) -> list[float]:
    return [v / 1e6 for v in values_ns]


def summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "median_ms": statistics.median(values),
        "min_ms": min(values),
        "max_ms": max(values),
        "samples_ms": [round(v, 4) for v in values],
    }


def row(
    measurement: str,
    n: Optional[int],
    lib: Optional[Sequence[float]],
    ours: Optional[Sequence[float]],
    note: str = "",
    rounds: Optional[tuple[Sequence[float], Sequence[float]]] = None,
) -> dict[str, Any]:
    """One measurement.  With ``rounds`` (one value per round for libibverbs and for
    sysverbs, taken side by side) the ratio is the median of the per-round ratios, which
    the machine's drift between rounds does not move; otherwise the ratio of medians."""
    r: dict[str, Any] = {"measurement": measurement, "n": n, "note": note}
    r["libibverbs"] = summary(lib) if lib else None
    r["sysverbs"] = summary(ours) if ours else None
    if rounds is not None:
        r["rounds"] = {"libibverbs": list(rounds[0]), "sysverbs": list(rounds[1])}
        r["ratio"] = paired_ratio(rounds[1], rounds[0])
    elif lib and ours:
        r["ratio"] = statistics.median(ours) / statistics.median(lib)
    else:
        r["ratio"] = None
    return r


def paired_ratio(top: Sequence[float], bottom: Sequence[float]) -> Optional[float]:
    """The median of ``top[i] / bottom[i]`` (values of the same round)."""
    pairs = [t / b for t, b in zip(top, bottom) if b > 0]
    return statistics.median(pairs) if pairs else None


# -- output ----------------------------------------------------------------------------


def fmt(x: Optional[float], digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def table(rows: Sequence[dict[str, Any]]) -> str:
    out = [
        "| measurement | N | libibverbs ms | sysverbs ms | sysverbs/libibverbs | note |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lib = r["libibverbs"]["median_ms"] if r["libibverbs"] else None
        ours = r["sysverbs"]["median_ms"] if r["sysverbs"] else None
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "—"
        n = "—" if r["n"] is None else str(r["n"])
        out.append(f"| {r['measurement']} | {n} | {fmt(lib, 3)} | {fmt(ours, 3)} | {ratio} "
                   f"| {r['note']} |")
    return "\n".join(out)


def syscall_table(rows: Sequence[dict[str, Any]]) -> str:
    out = ["| syscalls per device (strace -c) | libibverbs | sysverbs | sysverbs/libibverbs "
           "| sysverbs, by syscall |", "|---|---:|---:|---:|---|"]
    for r in rows:
        ours = ", ".join(f"{k} {v:g}" for k, v in r["per_syscall"]["sysverbs"].items())
        out.append(f"| {r['measurement'][len('(e) syscalls per device, '):]} "
                   f"| {r['libibverbs']:.2f} | {r['sysverbs']:.2f} | {r['ratio']:.2f}x | {ours} |")
    return "\n".join(out)


def _scaling(rows: Sequence[dict[str, Any]], kind: str, impl: str) -> Optional[float]:
    """t(4096)/t(1024): the median of the per-round ratios (both sizes run in every
    round), else the ratio of the medians."""
    def find(n: int) -> Optional[dict[str, Any]]:
        return next((r for r in rows if r["measurement"].startswith(kind) and r["n"] == n
                     and r[impl]), None)

    big, base = find(4096), find(1024)
    if big is None or base is None:
        return None
    if "rounds" in big and "rounds" in base:
        return paired_ratio(big["rounds"][impl], base["rounds"][impl])
    value: float = big[impl]["median_ms"] / base[impl]["median_ms"]
    return value


def targets(rows: Sequence[dict[str, Any]], sys_rows: Sequence[dict[str, Any]]) -> str:
    """Issue 8's targets, each with the measured value and met / NOT MET."""
    lines = ["Targets (issue 8):"]

    def check(text: str, value: Optional[float], limit: float, unit: str = "x") -> None:
        if value is None:
            lines.append(f"- {text}: not measured")
        else:
            verdict = "met" if value <= limit else "NOT MET"
            lines.append(f"- {text}: {value:.2f}{unit} (limit {limit:g}{unit}) {verdict}")

    for r in rows:
        if r["measurement"].startswith("(a) first") and r["n"] >= 64:
            check(f"first call <= 0.5x libibverbs at N={r['n']}", r["ratio"], 0.5)
    for r in rows:
        if r["measurement"].startswith("(b)") and r["n"] == 1024:
            check("repeated call <= 1.0x libibverbs at N=1024", r["ratio"], 1.0)
    for kind, label in (("(a) first", "first call"), ("(b)", "repeated call")):
        for impl in ("sysverbs", "libibverbs"):
            ratio = _scaling(rows, kind, impl)
            if impl == "sysverbs":
                check(f"{label} t(4096)/t(1024), sysverbs", ratio, 4.5, "")
            elif ratio is not None:
                lines.append(f"  ({label} t(4096)/t(1024), libibverbs: {ratio:.2f})")
    wall = next((r for r in rows if r["measurement"].startswith("(c) python -c")), None)
    if wall and wall["sysverbs"]:
        base = float(wall["note"].split(": ")[1].split(" ms")[0])
        check("import sysverbs adds <= 15 ms to interpreter start",
              wall["sysverbs"]["median_ms"] - base, 15.0, " ms")
    for r in sys_rows:
        what = r["measurement"].split(", ", 1)[1]
        check(f"syscalls per device <= 1.3x libibverbs ({what})", r["ratio"], 1.3)
    return "\n".join(lines)

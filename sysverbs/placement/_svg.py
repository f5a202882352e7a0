"""``sysverbs topo --svg``: the host drawn as lstopo draws it, boxes within boxes —
the machine, its NUMA nodes, their host bridges, the PCI bridges and switches on the
way, and the GPUs, RDMA devices and Data Direct DMA functions — with each GPU's
assigned NICs joined to it by a line (the first one solid, the others dashed).

:func:`layout` is a pure function of a :class:`Tree` (built from a host by
:func:`host_tree`) and returns positioned :class:`Box` records; :func:`render` writes
them as SVG with no dependency.  Every box is a ``<g class="box KIND">`` holding its
``<rect>``, its ``<text>`` lines and its children, with an ``id`` and
``data-address``/``data-name``; every assignment is a ``<path class="assign">`` with
``data-gpu`` and ``data-nic`` naming the two boxes' ids.

>>> t = Tree("machine", "machine", ("Machine",), (Tree("gpu", "gpu-0", ("GPU0",)),))
>>> [(b.kind, b.x, b.y, b.w, b.h) for b in walk(layout(t))]
[('machine', 0.0, 0.0, 67.2, 57.0), ('gpu', 8.0, 23.0, 44.4, 26.0)]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Optional
from xml.sax.saxutils import escape, quoteattr

from ..ground.text import cpulist_text
from ._topology import Topology

__all__ = ["Tree", "Box", "host_tree", "layout", "walk", "render", "host_svg",
           "CHAR_W", "LINE_H", "PAD", "GAP"]

#: Monospace advance per character at FONT_SIZE (DejaVu Sans Mono: 0.602 em; a little
#: more, so that any monospace font fits), line height, padding, gap between siblings.
FONT_SIZE = 12
CHAR_W = 7.6
LINE_H = 16.0
PAD = 7.0
GAP = 8.0
#: ConnectX-8 Data Direct DMA function (docs/placement.md, "Grace and Data Direct").
DMA_ID = (0x15B3, 0x2100)
#: Boxes laid out top to bottom (their children one under the other); others left to right.
VERTICAL = frozenset({"machine"})


class Tree(NamedTuple):
    """What to draw: ``kind`` (machine, numa, hostbridge, bridge, switch, gpu, nic, dma,
    other), an ``id``, its text ``lines`` and its ``children``."""

    kind: str
    id: str
    lines: tuple[str, ...]
    children: tuple[Tree, ...] = ()
    address: str = ""


class Box(NamedTuple):
    kind: str
    id: str
    lines: tuple[str, ...]
    x: float
    y: float
    w: float
    h: float
    children: tuple[Box, ...]
    address: str


def _text_w(lines: Sequence[str]) -> float:
    return round(max((len(s) for s in lines), default=0) * CHAR_W + 2 * PAD, 1)


def _size(t: Tree) -> tuple[float, float]:
    if not t.children:
        return _text_w(t.lines), len(t.lines) * LINE_H + 2 * PAD - 4
    sizes = [_size(c) for c in t.children]
    head = len(t.lines) * LINE_H + PAD
    if t.kind in VERTICAL:
        inner_w = max(w for w, _ in sizes)
        inner_h = sum(h for _, h in sizes) + GAP * (len(sizes) - 1)
    else:
        inner_w = sum(w for w, _ in sizes) + GAP * (len(sizes) - 1)
        inner_h = max(h for _, h in sizes)
    return round(max(_text_w(t.lines), inner_w + 2 * PAD), 1), round(head + inner_h + PAD + 1, 1)


def layout(t: Tree, x: float = 0.0, y: float = 0.0) -> Box:
    """Each box placed: children inside their parent under its text, side by side (one
    under the other in the machine), never overlapping."""
    w, h = _size(t)
    children: list[Box] = []
    cx, cy = x + PAD + 1, y + len(t.lines) * LINE_H + PAD
    for c in t.children:
        box = layout(c, cx, cy)
        children.append(box)
        if t.kind in VERTICAL:
            cy += box.h + GAP
        else:
            cx += box.w + GAP
    return Box(t.kind, t.id, t.lines, round(x, 1), round(y, 1), w, round(h, 1),
               tuple(children), t.address)


def walk(box: Box) -> Iterator[Box]:
    """The box and every box within it, parents first."""
    yield box
    for c in box.children:
        yield from walk(c)


def _slug(kind: str, text: str) -> str:
    return kind + "-" + "".join(c if c.isalnum() or c in "_-" else "-" for c in text)


def _node(kind: str, key: str, lines: tuple[str, ...], children: dict[str, Any],
          address: str = "") -> dict[str, Any]:
    return {"kind": kind, "id": _slug(kind, key), "lines": lines, "children": children,
            "address": address}


def host_tree(host: Topology, where: str = "") -> Tree:
    """The boxes of ``host``: NUMA node > host bridge > bridges > GPUs, NICs and DMA
    functions; a device whose place is unknown sits in the machine."""
    items: list[tuple[str, str, tuple[str, ...], str]] = []  # kind, key, lines, address
    for g in host.gpus:
        items.append(("gpu", g.address, (f"GPU{g.index} {g.address}",
                                         f"{g.vendor} {g.model or ''}".rstrip()), g.address))
    for n in host.nics:
        ports = ", ".join(f"{p.port}:{'IB' if p.link_layer == 'InfiniBand' else 'Eth'}"
                          f"{'' if p.state == 'ACTIVE' else ' ' + (p.state or '?')}"
                          for p in n.ports) or "no port"
        items.append(("nic", n.name, (f"{n.name} {n.address or ''}".rstrip(),
                                      f"{n.kind} port {ports}"), n.address or ""))
    for addr, dev in sorted(host.pci.items()):
        if (dev.vendor, dev.device) == DMA_ID:
            items.append(("dma", addr, (f"DMA {addr}", "Data Direct"), addr))
    root: dict[str, Any] = {}
    for kind, key, lines, address in items:
        pci = host.pci.get(address) if address else None
        leaf = _node(kind, key, lines, {}, address)
        if pci is None or pci.host_bridge is None:
            root.setdefault(leaf["id"], leaf)
            continue
        node, _ = host.numa_affinity(address)
        cpus = host.numa_nodes.get(node, frozenset()) if node is not None else frozenset()
        level = root.setdefault(f"numa-{node}", _node(
            "numa", str(node), (f"NUMA node {node if node is not None else '?'}"
                                + (f" (CPUs {cpulist_text(cpus)})" if cpus else ""),), {}))
        hb = pci.host_bridge
        level = level["children"].setdefault(hb, _node("hostbridge", hb,
                                                       (f"host bridge {hb}",), {}))
        for b in reversed(pci.bridges):
            level = level["children"].setdefault(b, _node("bridge", b, (f"bridge {b}",),
                                                          {}, b))
        level["children"].setdefault(leaf["id"], leaf)
    title = f"Machine: {len(host.gpus)} GPUs, {len(host.nics)} RDMA devices"
    return _tree(_node("machine", "machine", (title + (f" ({where})" if where else ""),),
                       root))


def _tree(node: dict[str, Any]) -> Tree:
    kids = [_tree(c) for c in node["children"].values()]
    kind = node["kind"]
    if kind == "bridge" and sum(1 for c in kids if c.kind in ("bridge", "switch")) > 1:
        kind = "switch"  # a switch's upstream port: its downstream ports below it
        lines = ("switch " + node["address"],)
    else:
        lines = node["lines"]
    order = {"numa": 0, "hostbridge": 1, "switch": 2, "bridge": 2, "gpu": 3, "dma": 4,
             "nic": 5}
    kids.sort(key=lambda c: (order[c.kind], c.address, c.id))
    return Tree(kind, node["id"], lines, tuple(kids), node["address"])


def _box_svg(b: Box, out: list[str]) -> None:
    attrs = f' data-address={quoteattr(b.address)}' if b.address else ""
    out.append(f'<g class="box {b.kind}" id={quoteattr(b.id)}{attrs}>')
    out.append(f'<rect x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}" rx="3"/>')
    for i, line in enumerate(b.lines):
        out.append(f'<text x="{round(b.x + PAD, 1)}" y="{round(b.y + PAD + 11 + i * LINE_H, 1)}"'
                   f'>{escape(line)}</text>')
    for c in b.children:
        _box_svg(c, out)
    out.append("</g>")


STYLE = (
    f"text{{font-family:'DejaVu Sans Mono',monospace;font-size:{FONT_SIZE}px;fill:#111}}"
    "rect{stroke:#555;stroke-width:1}"
    ".machine>rect{fill:#fafafa}.numa>rect{fill:#e8f1e4}.hostbridge>rect{fill:#fff}"
    ".bridge>rect,.switch>rect{fill:#f3f3f3}.switch>rect{stroke-width:2}"
    ".gpu>rect{fill:#cfe8b0}.nic>rect{fill:#c9dcf5}.dma>rect{fill:#f5dfc9}"
    ".assign{fill:none;stroke:#d04a02;stroke-width:2;opacity:.8}"
    ".assign.more{stroke-dasharray:6 4}")


def render(box: Box, links: Sequence[tuple[str, str]] = (), title: str = "") -> str:
    """The SVG document: the boxes, then each (gpu id, nic id) link, the first of a
    GPU solid and the others dashed."""
    boxes = {b.id: b for b in walk(box)}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{box.w}" '
           f'height="{round(box.h + 2 * GAP, 1)}" viewBox="0 0 {box.w} '
           f'{round(box.h + 2 * GAP, 1)}" class="sysverbs-topo">',
           f"<title>{escape(title)}</title>", f"<style>{STYLE}</style>"]
    _box_svg(box, out)
    seen: set[str] = set()
    for gpu, nic in links:
        a, b = boxes.get(gpu), boxes.get(nic)
        if a is None or b is None:
            continue
        x1, y1 = round(a.x + a.w / 2, 1), round(a.y + a.h, 1)
        x2, y2 = round(b.x + b.w / 2, 1), round(b.y + b.h, 1)
        low = round(max(y1, y2) + GAP, 1)
        more = " more" if gpu in seen else ""
        seen.add(gpu)
        out.append(f'<path class="assign{more}" data-gpu={quoteattr(gpu)} '
                   f'data-nic={quoteattr(nic)} d="M{x1} {y1} C{x1} {low} {x2} {low} '
                   f'{x2} {y2}"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def host_svg(host: Topology, plan: Sequence[Any], where: str = "") -> str:
    """``sysverbs topo --svg``: ``host`` with ``plan`` (``assign(host)``) drawn in."""
    tree = host_tree(host, where)
    links: list[tuple[str, str]] = []
    for a in plan:
        gpu: Optional[Any] = a.gpu
        if gpu is None:
            continue
        for n in a.nics:
            links.append((_slug("gpu", gpu.address), _slug("nic", n.device)))
    return render(layout(tree), links, f"sysverbs topo --svg: {where}" if where else "")

"""Hostile recordings for the materializer (tests/test_hostile_recording.py): umockdev
records whose link targets, attribute names, device paths and node names try to reach
outside the root they are written below.

A recording is text (what a crafted snapshot file holds), built from a few records
under ``/devices/h...``; every link target and attribute name is drawn from pieces that
climb (``..``), name the directory ``OUTSIDE`` stands for (a sibling of the root,
holding a planted file), start at ``/``, go through links made by earlier (or later)
records, or stay put.  ``OUTSIDE`` is replaced by the test with its own directory.
"""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["OUTSIDE", "recordings", "link_targets", "names"]

#: Stands for the absolute path of the directory beside the root (the planted file's).
OUTSIDE = "@OUTSIDE@"

_STEP = st.sampled_from(["..", "..", "..", ".", "", "a", "b", "hop", "later", "secret",
                         "outside", "sys", "devices", "class", OUTSIDE.lstrip("/")])


def _join(parts: list[str], absolute: bool) -> str:
    text = "/".join(parts)
    return "/" + text if absolute else text


#: A link target: steps, sometimes absolute, sometimes the planted file itself.
link_targets = st.one_of(
    st.builds(_join, st.lists(_STEP, min_size=1, max_size=12), st.booleans()),
    st.builds(lambda n: "../" * n + "outside/secret", st.integers(0, 12)),
    st.builds(lambda n: "../" * n + "hop/../outside/secret", st.integers(0, 8)),
    st.just(OUTSIDE + "/secret"),
    st.just("/etc/hostname"),
)

#: An attribute or link name: a file of the device, or a path climbing out of it.
names = st.one_of(
    st.sampled_from(["fw_ver", "node_desc", "hop", "later", "a/b", "ports/1/x"]),
    st.builds(lambda n, leaf: "../" * n + leaf, st.integers(1, 10),
              st.sampled_from(["hop", "later", "x", "outside/secret", "class/x/y"])),
    st.builds(lambda leaf: OUTSIDE + "/" + leaf, st.sampled_from(["x", "secret"])),
)


@st.composite
def _record(draw: st.DrawFn, index: int) -> str:
    depth = draw(st.integers(0, 3))
    path = "/devices/h" + "".join(f"/d{i}" for i in range(depth)) + f"/n{index}"
    if draw(st.integers(0, 9)) == 0:  # a device path that climbs or is absolute
        path = draw(st.sampled_from(["/devices/../../x", "/devices/h/../../../x",
                                     "/devices/" + OUTSIDE]))
    lines = [f"P: {path}", f"E: SUBSYSTEM={draw(st.sampled_from(['pci', 'net', 'a']))}"]
    if draw(st.integers(0, 9)) == 0:
        lines.append(f"N: {draw(st.sampled_from(['x', '../x', '/x', 'infiniband/../../x']))}")
    for _ in range(draw(st.integers(0, 3))):
        lines.append(f"A: {draw(names)}=SAFE\\n")
    for _ in range(draw(st.integers(1, 4))):
        lines.append(f"L: {draw(names)}={draw(link_targets)}")
    return "\n".join(lines) + "\n"


@st.composite
def recordings(draw: st.DrawFn) -> str:
    """A recording of one to four hostile records (umockdev text)."""
    count = draw(st.integers(1, 4))
    return "\n".join(draw(_record(i)) for i in range(count))

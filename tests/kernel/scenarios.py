"""The kernel-lab scenarios: one plan, run in ONE VM boot, in this order.

Each scenario starts *groups* of workers (see ``vm_runner``): every worker of a
group is one emulated process, and every member of a group must give identical
results (each step, device identity across calls, stderr bytes):

* ``netlink`` group: the real libibverbs (it uses RDMA netlink in the VM),
  sysverbs ``source="netlink"`` and sysverbs ``source="auto"``;
* ``fallback`` group: libibverbs with the RDMA netlink socket blocked (it falls
  back to sysfs), sysverbs ``source="auto"`` blocked the same way, and sysverbs
  ``source="sysfs"`` unblocked;
* scenario-specific groups (GET_CHARDEV blocked, dump blocked, long SYSFS_PATH).

Kernel state accumulates: indices only grow, uverbs numbers are reused, so the
orders differ.  Plain data only: the VM side needs nothing from here.

The boot starts with three scenarios that compare sysverbs with the real tools
rather than with libibverbs in lockstep (``hotplug``: kernel uevents and polling;
``attributes``: ``rdma link``, ``ibv_devinfo -v``, sysfs text, librdmacm;
``cli_tools``: ``ibv_devices``/``ibv_devinfo``/``rdma link`` against the ``sysverbs``
command; ``roce``: RoCE connections with the GID index ``sysverbs env`` picks, and
UCX, see ``scenario_roce``; ``metrics``: ``sysverbs metrics`` while rxe devices are
removed, see ``scenario_metrics``).  Each sets up its own devices and removes them (and
what it loaded), so the lockstep scenarios after them start from a kernel with no RDMA
device.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any, Optional

from tests.kernel.fallback_tree import fallback_tree

Step = dict[str, Any]

SHOW = {"IBV_SHOW_WARNINGS": "1"}
NOBODY = 65534
#: A SYSFS_PATH of this length leaves room for ibdev names of up to 4 bytes
#: (``<S>/class/infiniband/<name>`` must stay under 256 bytes): the dump is cut at
#: the third device (rxe_b), and no dev_path fits either ...
LONG_ROOT_A = "/run/" + "L" * (233 - 5)
#: ... and of up to 13 bytes, with room for dev_path (``<S>/class/infiniband_verbs/
#: uverbsN``): cut at the seventh (rxe_k_long_name7); the devices before it get the
#: replies meant for others.
LONG_ROOT_B = "/run/" + "M" * (224 - 5)


def group(
    kind: str,
    prefix: str,
    *,
    env: Optional[dict[str, Optional[str]]] = None,
    user: Optional[int] = None,
    memlock: Optional[int] = None,
    netns: Optional[str] = None,
    block: Optional[str] = None,
) -> tuple[list[Step], list[str]]:
    """Start steps for a group of workers and their names."""
    common: dict[str, Any] = {"env": {**SHOW, **(env or {})}}
    if user is not None:
        common["user"] = user
    if memlock is not None:
        common["memlock"] = memlock
    if netns is not None:
        common["netns"] = netns
    members: list[tuple[str, dict[str, Any]]]
    if kind == "netlink":
        members = [
            ("lib", {"impl": "libibverbs"}),
            ("nl", {"impl": "sysverbs", "options": {"source": "netlink"}}),
            ("auto", {"impl": "sysverbs", "options": {"source": "auto"}}),
        ]
    elif kind == "fallback":
        members = [
            ("lib", {"impl": "libibverbs", "block": "socket"}),
            ("auto", {"impl": "sysverbs", "options": {"source": "auto"}, "block": "socket"}),
            ("sysfs", {"impl": "sysverbs", "options": {"source": "sysfs"}}),
        ]
    elif kind == "blocked":  # one netlink operation blocked (block=chardev/dump)
        members = [
            ("lib", {"impl": "libibverbs", "block": block}),
            ("auto", {"impl": "sysverbs", "options": {"source": "auto"}, "block": block}),
        ]
    else:
        raise ValueError(kind)
    steps = []
    names = []
    for suffix, spec in members:
        name = f"{prefix}_{suffix}"
        steps.append({"op": "start", "worker": name, **common, **spec})
        names.append(name)
    return steps, names


def both(
    prefix: str = "", fallback: bool = True, **kw: Any
) -> tuple[list[Step], dict[str, list[str]]]:
    """The netlink group (and the fallback group) under the same conditions."""
    steps, nl = group("netlink", f"{prefix}nl", **kw)
    groups = {"netlink": nl}
    if fallback:
        more, fb = group("fallback", f"{prefix}fb", **kw)
        steps += more
        groups["fallback"] = fb
    return steps, groups


def tools(tag: str, devinfo: bool = False, rdma: bool = True, **kw: Any) -> list[Step]:
    """``rdma -j dev``; ``ibv_devices`` and ``sysverbs devices``; with ``devinfo``,
    ``ibv_devinfo -l`` and ``sysverbs devinfo -l``."""
    env = {**SHOW, **kw.pop("env", {})}
    spec = {"env": env, **kw}
    steps: list[Step] = []
    if rdma:
        steps.append({"op": "cmd", "name": f"{tag}:rdma", "argv": ["rdma", "-j", "dev"], **spec})
    steps += [
        {"op": "cmd", "name": f"{tag}:ibv_devices", "argv": ["ibv_devices"], **spec},
        {"op": "cli", "name": f"{tag}:sv_devices", "args": ["devices"], **spec},
    ]
    if devinfo:
        steps += [
            {"op": "cmd", "name": f"{tag}:ibv_devinfo", "argv": ["ibv_devinfo", "-l"], **spec},
            {"op": "cli", "name": f"{tag}:sv_devinfo", "args": ["devinfo", "-l"], **spec},
        ]
    return steps


def members(groups: dict[str, list[str]]) -> list[str]:
    return [w for names in groups.values() for w in names]


#: A ``py`` snippet: put the nodes of yy and a0 back as they were.
RESTORE_NODES = """
import stat
for n in ('yy', 'a0'):
    u = node_of(n)
    path = '/dev/infiniband/' + u
    if not os.path.exists(path):
        with open(f'/sys/class/infiniband_verbs/{u}/dev') as f:
            major, minor = f.read().split(':')
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(int(major), int(minor)))
    os.chmod(path, 0o666)
"""


def sh(cmd: str) -> Step:
    return {"op": "sh", "cmd": cmd}


def py(code: str) -> Step:
    return {"op": "py", "code": code}


#: A helper for ``py`` steps: the uverbs name of an IB device.
NODE_OF = """import os
def node_of(ibdev):
    for u in os.listdir('/sys/class/infiniband_verbs'):
        if u.startswith('uverbs'):
            with open(f'/sys/class/infiniband_verbs/{u}/ibdev') as f:
                if f.read().strip() == ibdev:
                    return u
    raise LookupError(ibdev)
"""


LIST: Step = {"op": "list"}


def scenario(name: str, steps: list[Step], groups: dict[str, list[str]]) -> dict[str, Any]:
    return {"name": name, "steps": steps, "groups": groups}


def build(preload: bool) -> list[dict[str, Any]]:
    """Every scenario, in boot order.  ``preload``: the nlblock interposer is there."""
    fb = preload
    out: list[dict[str, Any]] = real_tools_scenarios()

    # 1. No RDMA device at all (ib_core, ib_uverbs, rdma_rxe loaded).
    s, g = both(fallback=fb)
    fbtools = tools("fb", devinfo=True, rdma=False, block="socket") if fb else []
    out.append(scenario("zero_devices", [*s, LIST, LIST, *tools("t", devinfo=True), *fbtools], g))

    # 2. One device on a dummy netdev.
    s, g = both(fallback=fb)
    out.append(
        scenario(
            "one_device",
            [
                sh("ip link add d0 type dummy && ip link set d0 up"),
                sh("rdma link add solo type rxe netdev d0"),
                *s,
                LIST,
                *tools("t"),
                {"op": "stop"},
                sh("rdma link del solo"),
            ],
            g,
        )
    )

    # 3. Eight devices: creation order, deletions and uverbs-number reuse make the
    #    kernel index order, the name order and the readdir order all differ.
    s, g = both(fallback=fb)
    setup = [
        sh(
            "ip -batch - <<'EOF'\n"
            + "".join(f"link add d{i} type dummy\nlink set d{i} up\n" for i in range(1, 6))
            + "".join(
                f"link add v{v} type veth peer name v{v + 1}\n"
                f"link set v{v} up\nlink set v{v + 1} up\n"
                for v in (0, 2, 4)
            )
            + "EOF"
        ),
        sh(
            # (rdma -b resolves device names once, at start: deletions need a new process)
            "rdma -b - <<'EOF'\n"
            "link add zeta type rxe netdev d1\n"
            "link add alpha type rxe netdev d2\n"
            "link add mm type rxe netdev v0\n"
            "link add yy type rxe netdev v2\n"
            "EOF\n"
            "rdma link del alpha && rdma link add rxe_b type rxe netdev d3 && "
            "rdma link del zeta && rdma -b - <<'EOF'\n"
            "link add omega type rxe netdev d1\n"
            "link add rxe4 type rxe netdev d2\n"
            "link add a0 type rxe netdev v4\n"
            "link add q type rxe netdev d4\n"
            "link add rxe_k_long_name7 type rxe netdev d5\n"
            "EOF\n"
            "ls -f /sys/class/infiniband_verbs; ls -f /sys/class/infiniband"
        ),
    ]
    # ibv_is_fork_initialized asks RDMA netlink for copy-on-fork (blocked: it cannot)
    fork = {"op": "fork", "workers": [*g["netlink"], *g.get("fallback", [])[:2]]}
    out.append(
        scenario(
            "order8", [*setup, *s, LIST, fork, LIST, *tools("t", devinfo=True), *fbtools], g
        )
    )

    # 4. Delete and re-add between calls in one process (identity and order), then
    #    a new device, then free the lists.
    s, g = both(fallback=fb)
    out.append(
        scenario(
            "lifetime",
            [
                *s,
                LIST,
                sh("rdma link del rxe4"),
                LIST,
                sh("rdma link add rxe4 type rxe netdev d2"),
                LIST,
                sh("ip link add d6 type dummy && ip link set d6 up"),
                sh("rdma link add new_1 type rxe netdev d6"),
                LIST,
                {"op": "free", "list": 0},
                {"op": "free", "list": 1},
                sh("rdma link del new_1"),
                LIST,
                *tools("t"),
            ],
            g,
        )
    )

    # 5. Rename (rdma dev set X name Y) between calls, and back.
    s, g = both(fallback=fb)
    out.append(
        scenario(
            "rename",
            [
                *s,
                LIST,
                sh("rdma dev set omega name renamed_omega"),
                LIST,
                *tools("t1"),
                sh("rdma dev set renamed_omega name omega"),
                LIST,
                sh("rdma dev set q name qq"),
                LIST,
                *tools("t2", rdma=False),
                {"op": "stop"},
                sh("rdma dev set qq name q"),
            ],
            g,
        )
    )

    # 6. /dev/infiniband nodes: one removed, one made unreadable (root and nobody).
    s, g = both(fallback=fb)
    s2, g2 = both("u_", fallback=fb, user=NOBODY)
    out.append(
        scenario(
            "dev_nodes",
            [
                *s,
                LIST,
                py(NODE_OF + "os.unlink('/dev/infiniband/' + node_of('yy'))"),
                LIST,
                py(NODE_OF + "os.chmod('/dev/infiniband/' + node_of('a0'), 0)"),
                *s2,
                LIST,
                *[{"op": "open", "list": 2, "device": i, "workers": members(g)} for i in range(7)],
                *[{"op": "open", "list": 0, "device": i, "workers": members(g2)} for i in range(7)],
                *tools("t"),
                *tools("u", devinfo=True, user=NOBODY),
                {"op": "stop"},
                py(NODE_OF + RESTORE_NODES),
            ],
            {**g, **{f"u_{k}": v for k, v in g2.items()}},
        )
    )

    # 7. An unprivileged user with a small memlock limit (the memlock warning).
    s, g = both(fallback=fb, user=NOBODY, memlock=32768)
    out.append(
        scenario(
            "unprivileged",
            [*s, LIST, *[{"op": "open", "list": 0, "device": i} for i in range(8)], LIST],
            g,
        )
    )

    if preload:
        out += _blocked_scenarios()

    # Long SYSFS_PATH: the dump callback rejects a too-long ibdev_path, libnl stops
    # reading there and reports success, and the rest of the dump is read by the
    # GET_CHARDEV requests that follow.
    for label, root in (("long_root_a", LONG_ROOT_A), ("long_root_b", LONG_ROOT_B)):
        s, g = both(f"{label}_", fallback=False, env={"SYSFS_PATH": root})
        out.append(
            scenario(label, [*s, LIST, LIST, *tools("t", rdma=False, env={"SYSFS_PATH": root})], g)
        )

    # Network namespaces: shared mode (every device visible), then exclusive mode
    # (rxe devices stay in init_net: none visible from another netns).
    s, g = both("ns1_", fallback=fb, netns="ns1")
    s2, g2 = both("ex_", fallback=fb, netns="ns2")
    s3, g3 = both("init_", fallback=False)
    out.append(
        scenario(
            "netns",
            [
                sh("ip netns add ns1"),
                *s,
                LIST,
                *tools("shared", netns="ns1"),
                {"op": "stop"},
                sh("ip netns del ns1"),
                sh(
                    "i=0; until rdma system set netns exclusive 2>/dev/null; do "
                    "i=$((i+1)); [ $i -gt 100 ] && exit 1; sleep 0.2; done; rdma system show"
                ),
                sh("ip netns add ns2"),
                sh("ip netns exec ns2 rdma dev; ip netns exec ns2 ls /sys/class/infiniband"),
                *s2,
                *s3,
                LIST,
                *tools("exclusive", netns="ns2"),
                *tools("exclusive_init"),
            ],
            {**g, **g2, **g3},
        )
    )

    from tests.kernel.scenario_access import access_scenario  # (imports this module)

    out.append(access_scenario())  # exclusive mode and ns2: netns's state

    # Last: no ib_core at all, so RDMA netlink itself is unavailable.
    s, g = both(fallback=False)
    g = {
        "netlink": [n for n in g["netlink"] if not n.endswith("_nl")],
        "netlink_unavailable": [n for n in g["netlink"] if n.endswith("_nl")],
    }
    out.append(
        scenario(
            "no_ib_core",
            [
                sh(
                    "ip netns del ns2; ls /sys/class/infiniband | sed 's/^/link del /' | "
                    "rdma -b - && rmmod rdma_rxe ib_uverbs ib_core"
                ),
                *s,
                LIST,
                *tools("t", devinfo=True),
            ],
            g,
        )
    )
    return out


def _sysverbs_worker(name: str, source: str, block: Optional[str], env: dict[str, str]) -> Step:
    step: Step = {
        "op": "start",
        "worker": name,
        "impl": "sysverbs",
        "options": {"source": source},
        "env": {**SHOW, **env},
    }
    if block:
        step["block"] = block
    return step


def _devices(tag: str, block: str, env: dict[str, str]) -> list[Step]:
    spec = {"env": {**SHOW, **env}, "block": block}
    return [
        {"op": "cmd", "name": f"{tag}:ibv_devices", "argv": ["ibv_devices"], **spec},
        {"op": "cli", "name": f"{tag}:sv_devices", "args": ["devices"], **spec},
    ]


def _blocked_scenarios() -> list[dict[str, Any]]:
    out = []
    # GET_CHARDEV fails: each device falls back to <ibdev_path>/device/infiniband_verbs.
    # On the real /sys, rxe devices have no "device" link, so every one is dropped.
    s, g = group("blocked", "cd_sys", block="chardev")
    out.append(
        scenario(
            "chardev_blocked_sysfs",
            [
                *s,
                _sysverbs_worker("cd_sys_nl", "netlink", "chardev", {}),
                LIST,
                LIST,
                *_devices("t", "chardev", {}),
            ],
            {"chardev": [*g, "cd_sys_nl"]},
        )
    )
    # ... and on a SYSFS_PATH tree that has those directories (class ABI 6, then 7:
    # the global ABI is not forced to 6 when no GET_CHARDEV reply was accepted).
    for label, root, abi in (
        ("chardev_fallback", "/run/fake6", "6\n"),
        ("chardev_fallback_abi7", "/run/fake7", "7\n"),
    ):
        env = {"SYSFS_PATH": root}
        s, g = group("blocked", label, block="chardev", env=env)
        out.append(
            scenario(
                label,
                [
                    py(fallback_tree(root, abi)),
                    *s,
                    _sysverbs_worker(f"{label}_nl", "netlink", "chardev", env),
                    LIST,
                    LIST,
                    {"op": "open", "list": 1, "device": 0},
                    *_devices("t", "chardev", env),
                ],
                {"chardev": [*g, f"{label}_nl"]},
            )
        )
    # The dump itself fails: libibverbs falls back to sysfs.
    s, g = group("blocked", "dump", block="dump")
    out.append(
        scenario(
            "dump_blocked",
            [
                *s,
                _sysverbs_worker("dump_sysfs", "sysfs", None, {}),
                _sysverbs_worker("dump_nl", "netlink", "dump", {}),
                LIST,
                LIST,
                *_devices("t", "dump", {}),
                *_devices("fb", "socket", {}),
            ],
            {"dump": [*g, "dump_sysfs"], "netlink_unavailable": ["dump_nl"]},
        )
    )
    return out


# -- sysverbs against the real tools (not in lockstep) ---------------------------------------

#: This machine's Python (the VM runs on this machine's disk).  The probes that need
#: only the standard library run with ``-S`` (the site machinery costs 9p round trips).
PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]

#: Remove every RDMA device, failing if one cannot be removed.
NO_DEVICES = "for d in $(ls /sys/class/infiniband); do rdma link del $d || exit 1; done"

#: Two monitors (the kernel's own uevents: there is no udevd in the VM; and polling)
#: listen while rxe0 is added, renamed to rxefoo and removed; the udev and sysfs
#: sources list the devices in between.
HOTPLUG = """
PY=@PY@
mkdir -p /run/sv
"$PY" -m tests.kernel.vm_probes monitor udev > /run/sv/udev.jsonl 2> /run/sv/udev.err &
U=$!
"$PY" -m tests.kernel.vm_probes monitor poll > /run/sv/poll.jsonl 2> /run/sv/poll.err &
P=$!
start=$(date +%s)
while [ ! -e /run/sv/ready-udev ] || [ ! -e /run/sv/ready-poll ]; do
  [ $(( $(date +%s) - start )) -gt 150 ] && break
  { kill -0 $U && kill -0 $P; } 2>/dev/null || break
  sleep 0.2
done
rdma link add rxe0 type rxe netdev dummy0
sleep 1.5
echo "===SOURCES"; "$PY" -m tests.kernel.vm_probes sources
rdma dev set rxe0 name rxefoo
sleep 1.5
rdma link del rxefoo
wait $U $P
echo "===UDEV"; cat /run/sv/udev.jsonl /run/sv/udev.err
echo "===POLL"; cat /run/sv/poll.jsonl /run/sv/poll.err
echo "===END"
""".replace("@PY@", shlex.quote(PYTHON))

#: rxe0 on dummy0 (up, IPv4 and IPv6 addresses: RoCE v2 GIDs; MAC ...:02) and rxe1 on
#: v0 (MAC ...:01), whose veth peer v1 is down (port DOWN).
DATA_DIRECT = f"""rdma link add siw0 type siw netdev v1 >/dev/null 2>&1 || true
timeout 60 {shlex.quote(PYTHON)} -S -m tests.kernel.vm_probes data_direct || echo '{{}}'
rdma link del siw0 >/dev/null 2>&1 || true
"""
ATTRIBUTES_SETUP = """set -e
modprobe rdma_ucm >/dev/null 2>&1 || true
ip link set dummy0 up
ip link set dummy0 address 02:00:00:00:00:02
ip link add v0 type veth peer name v1
ip link set v0 address 02:00:00:00:00:01
ip link set v0 up
rdma link add rxe0 type rxe netdev dummy0
rdma link add rxe1 type rxe netdev v0
ip addr add 192.168.7.1/24 dev dummy0
ip -6 addr add fd00::1/64 dev dummy0 nodad
sleep 1
"""

#: ``cat`` of sysfs files: one ``<device>\\t<file>\\t<text, newlines as |>`` line each.
CAT_SYSFS = r"""
for d in /sys/class/infiniband/*; do
  for f in node_guid sys_image_guid node_type node_desc fw_ver parent \
           ports/1/state ports/1/phys_state ports/1/rate ports/1/lid ports/1/sm_lid \
           ports/1/lid_mask_count ports/1/cap_mask ports/1/link_layer ports/1/gids/0 \
           ports/1/gid_attrs/types/0 ports/1/gid_attrs/ndevs/0 ports/1/pkeys/0; do
    [ -e "$d/$f" ] || continue
    printf '%s\t%s\t' "$(basename $d)" "$f"; cat "$d/$f" | tr '\n' '|'; echo
  done
done
"""

#: rxe0 on dummy0 and rxe1 on v0 (with an IPv4 address: an IPv4-mapped RoCE v2 GID),
#: both ports up.
CLI_SETUP = """set -e
ip link set dummy0 up
ip link add v0 type veth peer name v1
ip addr add 192.168.77.1/24 dev v0
ip link set v0 up; ip link set v1 up
rdma link add rxe0 type rxe netdev dummy0
rdma link add rxe1 type rxe netdev v0
sleep 2
"""

#: (key, the real tool, the sysverbs command's arguments): compared in ``cli_tools``.
CLI_PAIRS: list[tuple[str, list[str], list[str]]] = [
    ("devices", ["ibv_devices"], ["devices"]),
    ("devices-sysfs", ["ibv_devices"], ["devices", "--source", "sysfs"]),
    ("devinfo-l", ["ibv_devinfo", "-l"], ["devinfo", "-l"]),
    ("devinfo-l-sysfs", ["ibv_devinfo", "-l"], ["devinfo", "-l", "--source", "sysfs"]),
    ("devinfo", ["ibv_devinfo"], ["devinfo"]),
    ("devinfo-v", ["ibv_devinfo", "-v"], ["devinfo", "-v"]),
    ("devinfo-v-sysfs", ["ibv_devinfo", "-v"], ["devinfo", "-v", "--source", "sysfs"]),
    (
        "devinfo-d-i",
        ["ibv_devinfo", "-d", "rxe1", "-i", "1", "-v"],
        ["devinfo", "-d", "rxe1", "-i", "1", "-v"],
    ),
    ("devinfo-i2", ["ibv_devinfo", "-i", "2"], ["devinfo", "-i", "2"]),
    ("devinfo-nope", ["ibv_devinfo", "-d", "nope"], ["devinfo", "-d", "nope"]),
    ("devinfo-i0", ["ibv_devinfo", "-i", "0"], ["devinfo", "-i", "0"]),
    ("devinfo-l-i0", ["ibv_devinfo", "-l", "-i", "0"], ["devinfo", "-l", "-i", "0"]),
]


def cmd(name: str, argv: list[str], **kw: Any) -> Step:
    """Run a program as root, environment as the runner's (no IBV_SHOW_WARNINGS)."""
    return {"op": "cmd", "name": name, "argv": argv, "env": {}, **kw}


def cli(name: str, args: list[str]) -> Step:
    """``sysverbs ARGS`` (``sysverbs.cli.main`` in a fresh fork), same environment."""
    return {"op": "cli", "name": name, "args": args, "env": {}}


def _rdmacm_probe(name: str, impl: str, plan: dict[str, Any]) -> Step:
    script = "tests/oracle/rdmacm_probe.py"  # the VM runs in the staged code (lab.stage_code)
    return cmd(name, [PYTHON, "-S", script, impl, json.dumps(plan)])


def real_tools_scenarios() -> list[dict[str, Any]]:
    """``hotplug``, ``attributes`` and ``cli_tools``: each leaves no device behind."""
    hotplug = scenario(
        "hotplug",
        [
            sh("ip link set dummy0 up"),
            # the monitors may wait 150 s to start and listen 120 s: more than a step's default
            cmd("hotplug", ["sh", "-c", HOTPLUG], timeout=600),
            sh(NO_DEVICES),
        ],
        {},
    )
    probe_steps = [{"op": "rdma_get"}, {"op": "ibv_list"}]
    attributes = scenario(
        "attributes",
        [
            sh(ATTRIBUTES_SETUP),
            cmd("rdma_link", ["rdma", "-j", "link", "show"]),
            cmd("devinfo", ["ibv_devinfo", "-v"]),
            cmd("cat", ["sh", "-c", CAT_SYSFS]),
            _rdmacm_probe("librdmacm", "librdmacm", {"steps": probe_steps}),
            _rdmacm_probe("sysverbs_rdmacm", "sysverbs", {"steps": probe_steps}),
            _rdmacm_probe(
                "sysverbs_rdmacm_sysfs",
                "sysverbs",
                {"steps": [{"op": "rdma_get"}], "options": {"source": "sysfs"}},
            ),
            cmd("pickle", [PYTHON, "-S", "-m", "tests.kernel.vm_probes", "attributes"]),
            # the Data Direct ioctl on rxe and, where the kernel has it, siw (never fails)
            cmd("data_direct", ["sh", "-c", DATA_DIRECT], timeout=120),
            sh(NO_DEVICES),
            # rdma_ucm's modules hold ib_core (the last scenario unloads it)
            sh(
                "ip link del v0 && ip addr flush dev dummy0 && "
                "if [ -d /sys/module/rdma_ucm ]; then rmmod rdma_ucm rdma_cm iw_cm ib_cm; fi"
            ),
        ],
        {},
    )
    steps: list[Step] = [sh(CLI_SETUP)]
    for key, real, ours in CLI_PAIRS:
        steps += [cmd(f"{key}:real", real), cli(f"{key}:ours", ours)]
    steps += [
        cmd("rdma-link", ["rdma", "link"]),
        cli("netdev", ["netdev"]),
        cli("netdev-json", ["netdev", "--json"]),
        cmd("operstate", ["cat", "/sys/class/net/dummy0/operstate", "/sys/class/net/v0/operstate"]),
        cli("doctor", ["doctor"]),
        cli("devinfo-json", ["devinfo", "--json"]),
        cli("snapshot", ["snapshot"]),
        sh(NO_DEVICES),
        sh("ip link del v0"),
    ]
    from tests.kernel.scenario_metrics import metrics_scenario  # (imports this module)
    from tests.kernel.scenario_roce import roce_scenario

    return [hotplug, attributes, scenario("cli_tools", steps, {}), roce_scenario(),
            metrics_scenario()]

"""The ``access`` scenario: what keeps a process from a device, made for real, with the
real tools beside ``sysverbs doctor --json`` under the same conditions.

It runs after ``netns`` (the RDMA subsystem is then in exclusive netns mode, and the
network namespace ``ns2`` exists) and before ``no_ib_core``.  One rxe device, ``rxea``
on the dummy netdev ``sva0``, in init_net:

* ``netns_exclusive``: ``nsenter --net`` into ns2 *keeping* this /sys (as a container
  that bind-mounts the host's /sys): ``ls /sys/class/infiniband`` still shows rxea,
  ``ibv_devices`` (libibverbs over RDMA netlink, which answers for ns2) lists nothing,
  ``ucx_info -d`` has no ``rxea:1`` either, and ``sysverbs doctor`` says
  ``netns_exclusive``; in init_net, all three list rxea;
* ``no_ipc_lock``: root without CAP_IPC_LOCK (``setpriv --bounding-set=-ipc_lock``) and
  a 64 KiB RLIMIT_MEMLOCK (``prlimit``): ``ibv_rc_pingpong -s 1048576`` fails to
  register its buffer; with the capability it registers and only fails to connect (no
  server); ``sysverbs doctor`` says ``no_ipc_lock`` in the first case only;
* ``device_cgroup_denied``: a cgroup v1 ``devices`` hierarchy (the VM kernel has the
  controller; cgroup v2's device filter is a BPF program that needs a loader), a
  child cgroup with ``c 231:* rwm`` denied: ``ibv_devinfo -d rxea`` cannot open the
  device and ``sysverbs doctor`` says ``device_cgroup_denied``;
* a provider config removed (an empty /etc/libibverbs.d in a mount namespace):
  ``ibv_devices`` lists nothing, ``sysverbs doctor`` says ``no_providers_installed``;
* in each of these, and with FI_VERBS_DEVICE_NAME, then with rdma_cm and sva0 without
  any address under FI_VERBS_IFACE=sva0: libfabric's ``fi_info -p verbs`` beside the
  ``doctor`` step's ``--predict``.

Each ``cmd`` step is its own process (``python -S -m sysverbs``: the staged code).
"""

from __future__ import annotations

from typing import Any

from tests.kernel.scenarios import PYTHON, Step, cmd, scenario, sh

DEVICE = "rxea"
NETDEV = "sva0"
NS = "ns2"
MEMLOCK = 65536
#: ibv_rc_pingpong's buffer: past MEMLOCK
SIZE = 1 << 20
CGROOT = "/run/svcg"
CGROUP = f"{CGROOT}/deny"

SETUP = f"""set -e
ip link add {NETDEV} type dummy
ip link set {NETDEV} up
rdma link add {DEVICE} type rxe netdev {NETDEV}
rdma system show
[ -e /run/netns/{NS} ] || ip netns add {NS}
mkdir -p {CGROOT}
mount -t cgroup -o devices none {CGROOT}
mkdir -p {CGROUP}
echo 'c 231:* rwm' > {CGROUP}/devices.deny
cat {CGROUP}/devices.list
"""
TEARDOWN = (f"echo $$ > {CGROOT}/cgroup.procs; rmdir {CGROUP}; umount {CGROOT}; "
            f"rdma link del {DEVICE}; ip link del {NETDEV}")

SV = [PYTHON, "-S", "-m", "sysverbs"]
DOCTOR = [*SV, "doctor", "--json", "--predict"]
IN_NS = ["nsenter", f"--net=/run/netns/{NS}"]
NO_IPC_LOCK = ["setpriv", "--bounding-set=-ipc_lock"]
LIMIT = ["prlimit", f"--memlock={MEMLOCK}:{MEMLOCK}"]
PINGPONG = ["ibv_rc_pingpong", "-d", DEVICE, "-s", str(SIZE), "127.0.0.1"]
CAPS = ["grep", "-E", "^Cap(Eff|Bnd)", "/proc/self/status"]


def in_cgroup(argv: list[str]) -> list[str]:
    """``argv`` run from a shell moved into the denying cgroup first."""
    return ["sh", "-c", f'echo $$ > {CGROUP}/cgroup.procs && exec "$@"', "sh", *argv]


def without_config(argv: list[str]) -> list[str]:
    """``argv`` in a mount namespace where an empty tmpfs hides /etc/libibverbs.d (the
    providers' config files: as if ibverbs-providers were removed)."""
    return ["unshare", "-m", "sh", "-c",
            'mount -t tmpfs none /etc/libibverbs.d && exec "$@"', "sh", *argv]


#: libfabric's verbs provider (Debian's fi_info) in each situation, beside the
#: prediction of its ``doctor`` step (``--predict``; tests/kernel/test_access_lab.py,
#: rules: sysverbs/rank/fabric_rules.py); FI_LOG_LEVEL=info: the provider's log says
#: why it skips a device.  The VM has no rdma_cm until ``cm:load`` loads rdma_ucm.
FI_INFO = ["env", "FI_LOG_LEVEL=info", "FI_LOG_PROV=verbs", "fi_info", "-p", "verbs"]
#: (situation, the wrapper of its doctor step above)
FABRIC: tuple[tuple[str, list[str]], ...] = (
    ("ns", IN_NS), ("init", []), ("nocap", [*NO_IPC_LOCK, *LIMIT]), ("cg", in_cgroup([])),
    ("noconf", without_config([])))


def fabric_env(name: str, env: dict[str, str]) -> list[Step]:
    """fi_info and ``doctor --predict`` (a fork of the warm runner) with ``env``."""
    return [cmd(f"{name}:fi_info", ["env", *(f"{k}={v}" for k, v in env.items()), *FI_INFO]),
            {"op": "cli", "name": f"{name}:doctor", "args": ["doctor", "--json", "--predict"],
             "env": env}]


def fabric_steps() -> list[Step]:
    """FI_VERBS_DEVICE_NAME; then, with rdma_cm, sva0 without any address (its IPv6
    link-local one gone) under FI_VERBS_IFACE=sva0; rdma_ucm unloaded again (it holds
    ib_core, which no_ib_core unloads)."""
    return [
        *(cmd(f"{name}:fi_info", [*wrap, *FI_INFO]) for name, wrap in FABRIC),
        *fabric_env("devname", {"FI_VERBS_DEVICE_NAME": DEVICE.upper()}),
        cmd("cm:load", ["sh", "-c", "modprobe rdma_ucm && ls /dev/infiniband"]),
        cmd("cm:noaddr", ["sh", "-c", f"echo 1 > /proc/sys/net/ipv6/conf/{NETDEV}/"
                          f"disable_ipv6 && ip -o addr show dev {NETDEV}"]),
        *fabric_env("cm-noaddr", {"FI_VERBS_IFACE": NETDEV}),
        cmd("cm:unload", ["rmmod", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm"]),
    ]


#: (step name, argv): compared in tests/kernel/test_access_lab.py
STEPS: tuple[tuple[str, list[str]], ...] = (
    ("ns:ls", [*IN_NS, "ls", "/sys/class/infiniband"]),
    ("ns:ibv_devices", [*IN_NS, "ibv_devices"]),
    ("ns:doctor", [*IN_NS, *DOCTOR]),
    ("init:ibv_devices", ["ibv_devices"]),
    ("init:doctor", DOCTOR),
    ("ns:ucx_info", [*IN_NS, "ucx_info", "-d"]),
    ("init:ucx_info", ["ucx_info", "-d"]),
    ("nocap:caps", [*NO_IPC_LOCK, *LIMIT, *CAPS]),
    ("nocap:pingpong", [*NO_IPC_LOCK, *LIMIT, *PINGPONG]),
    ("nocap:doctor", [*NO_IPC_LOCK, *LIMIT, *DOCTOR]),
    ("cap:pingpong", [*LIMIT, *PINGPONG]),
    ("cap:doctor", [*LIMIT, *DOCTOR]),
    ("cg:devinfo", in_cgroup(["ibv_devinfo", "-d", DEVICE])),
    ("cg:doctor", in_cgroup(DOCTOR)),
    ("noconf:ibv_devices", without_config(["ibv_devices"])),
    ("noconf:doctor", without_config(DOCTOR)),
)


def access_scenario() -> dict[str, Any]:
    steps: list[Step] = [sh(SETUP)]
    steps += [cmd(name, argv, timeout=180) for name, argv in STEPS]
    steps += fabric_steps()
    steps.append(sh(TEARDOWN))
    return scenario("access", steps, {})

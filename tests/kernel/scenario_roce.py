"""The ``roce`` scenario: a real RoCE v2 connection between two rxe devices, with the
GID index ``sysverbs env`` picks, and UCX's view of the devices (issue 17).

Two set-ups, both a veth pair with an rxe device on each end and IPv4 and IPv6
addresses on each end:

* ``ns``: the ends in two network namespaces (``nsa``/``nsb``), addresses added
  before the rxe devices (their IPv4 GID lands at index 1).  Recorded as it
  behaves: the VM's kernel (Debian 12, 6.1) creates rxe's UDP socket and looks
  up its routes in the initial namespace only (network-namespace support for
  rxe is a later kernel patch series), so RoCE between two namespaces is
  expected to fail there.
* ``wire``: both ends in the initial namespace, rxe devices added before the
  addresses (IPv6 first, so the IPv4 GID lands at index 2).  Two addresses of
  one host would talk over ``lo``, where rxe drops what it receives; policy
  routing (``ip rule ... iif lo ... lookup 100/101``, the local table moved behind
  them, ``accept_local``; the same for IPv6) sends the traffic between them over
  the veth wire.

Trials (``ibv_rc_pingpong -e``, server and client, one TCP port each) print
``===TRIAL <name> index=<i>/<j> client_rc=.. server_rc=..`` blocks.  UCX:
``ucx_info -d``; ``ucx_info -p -u t`` with the UCX_NET_DEVICES ``sysverbs env``
writes, and, as controls, with a bare device name and with NCCL's ``=`` syntax.

rdma_cm beside ``no_rdma_gid_for_address`` (issue 44; rdma_ucm loaded, after libfabric's
steps): the real ``rping`` (rdmacm-utils) and ``sysverbs doctor --json`` in each situation,
with ``ip -br addr`` and the GIDs sysfs lists (``===ADDR``/``===GIDS``): ``healthy`` (the
wire as set up: rping connects to rxed's IPv4 address), ``pod`` (a network namespace with
a veth and ``10.244.3.17/24``, a default route through the host end: rping resolves and
binds there), ``noipv4`` (vd's IPv4 address removed: rping binds to it and resolves it,
and binds to vd's IPv6 address) and ``noaddr`` (vd left without any global address).
"""

from __future__ import annotations

from typing import Any

from tests.kernel.scenario_access import fabric_env
from tests.kernel.scenarios import Step, cmd, scenario, sh

NS_SETUP = """set -e
ip netns add nsa; ip netns add nsb
ip link add va type veth peer name vb
ip link set va netns nsa; ip link set vb netns nsb
ip -n nsa link set lo up; ip -n nsb link set lo up
ip -n nsa link set va address 02:00:00:00:0a:01; ip -n nsb link set vb address 02:00:00:00:0a:02
ip -n nsa addr add 192.168.60.1/24 dev va; ip -n nsb addr add 192.168.60.2/24 dev vb
ip -n nsa -6 addr add fd60::1/64 dev va nodad; ip -n nsb -6 addr add fd60::2/64 dev vb nodad
ip -n nsa link set va up; ip -n nsb link set vb up
ip netns exec nsa rdma link add rxea type rxe netdev va
ip netns exec nsb rdma link add rxeb type rxe netdev vb
sleep 2
"""

WIRE_SETUP = """set -e
ip link add vc type veth peer name vd
ip link set vc address 02:00:00:00:0c:01; ip link set vd address 02:00:00:00:0c:02
for c in all default vc vd; do
  echo 0 > /proc/sys/net/ipv4/conf/$c/rp_filter; echo 1 > /proc/sys/net/ipv4/conf/$c/accept_local
done
ip link set vc up; ip link set vd up
rdma link add rxec type rxe netdev vc
rdma link add rxed type rxe netdev vd
sleep 1
ip -6 addr add fd61::1/64 dev vc nodad; ip -6 addr add fd61::2/64 dev vd nodad
sleep 1
ip addr add 192.168.61.1/24 dev vc; ip addr add 192.168.61.2/24 dev vd
ip route add 192.168.61.2 dev vc src 192.168.61.1 table 100
ip route add 192.168.61.1 dev vd src 192.168.61.2 table 101
ip rule add pref 10 iif lo to 192.168.61.2 lookup 100
ip rule add pref 10 iif lo to 192.168.61.1 lookup 101
ip rule add pref 100 lookup local
ip rule del pref 0
ip -6 route add fd61::2 dev vc src fd61::1 table 100
ip -6 route add fd61::1 dev vd src fd61::2 table 101
ip -6 rule add pref 10 iif lo to fd61::2 lookup 100
ip -6 rule add pref 10 iif lo to fd61::1 lookup 101
ip -6 rule add pref 100 lookup local
ip -6 rule del pref 0
sleep 2
ip route get 192.168.61.2 from 192.168.61.1 oif vc
ip -6 route get fd61::2 from fd61::1 oif vc
"""

WIRE_TEARDOWN = """ip rule add pref 0 lookup local; ip rule del pref 100
ip rule del pref 10 lookup 100; ip rule del pref 10 lookup 101
ip route flush table 100; ip route flush table 101
ip -6 rule add pref 0 lookup local; ip -6 rule del pref 100
ip -6 rule del pref 10 lookup 100; ip -6 rule del pref 10 lookup 101
ip -6 route flush table 100; ip -6 route flush table 101
rdma link del rxec; rdma link del rxed; ip link del vc
for c in all default; do echo 0 > /proc/sys/net/ipv4/conf/$c/accept_local; done
"""

NS_TEARDOWN = "rdma link del rxea; rdma link del rxeb; ip netns del nsa; ip netns del nsb"

#: The shell functions the trials use.  ``envidx STEP``: NCCL_IB_GID_INDEX as the
#: ``sysverbs env --format dotenv`` of the earlier ``cli`` step STEP wrote it (the runner
#: keeps each step's output in ``$SV_STEP_DIR``; a ``cli`` step is a fork of the warm
#: runner, where a new interpreter costs seconds under emulation); ``llidx DEV``: the
#: index of the link-local GID in ``ibv_devinfo -v``;
#: ``trial NAME SDEV CDEV SIDX CIDX ADDR PORT [SNS CNS]``, which ends with ``finish``.
FUNCS = r"""
mkdir -p /run/pp
envidx() { sed -n 's/^NCCL_IB_GID_INDEX=//p' "$SV_STEP_DIR/$1.cli.stdout"; }
llidx() { ibv_devinfo -v -d $1 \
             | sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*fe80:.*/\1/p' | head -n 1; }
trial() {
  xs=${8:+ip netns exec $8}; xc=${9:+ip netns exec $9}
  $xs timeout 60 ibv_rc_pingpong -e -d $2 -g $4 -n 5 -p $7 > /run/pp/$1.srv 2>&1 &
  spid=$!
  # the client starts once the server listens (it does so when its QP exists)
  i=0; until $xs ss -Hltn "sport = :$7" | grep -q .; do
    i=$((i+1)); [ $i -gt 150 ] && break; sleep 0.1; done
  $xc timeout 45 ibv_rc_pingpong -e -d $3 -g $5 -n 5 -p $7 $6 > /run/pp/$1.clt 2>&1
  # Both sleep on completion events (-e) instead of polling the completion queue, which
  # under emulation took a whole virtual CPU while they waited.
  finish $1 $? "index=$4/$5 "
}
# finish NAME CLIENT_RC [FIELDS]: a server ($spid) whose client gave up waits for it
# forever: 5 s after the client, it is stopped; then the trial's block
finish() {
  ( sleep 5; kill $spid 2>/dev/null ) >/dev/null 2>&1 & killer=$!
  wait $spid; src=$?
  kill $killer 2>/dev/null
  echo "===TRIAL $1 $3client_rc=$2 server_rc=$src"
  echo "---client"; cat /run/pp/$1.clt; echo "---server"; cat /run/pp/$1.srv
}
"""

NS_TRIALS = FUNCS + r"""
A=$(envidx ns:idx-a); B=$(envidx ns:idx-b)
echo "===ENVIDX rxea=$A rxeb=$B"
trial ns rxeb rxea "${B:-1}" "${A:-1}" 192.168.60.2 18600 nsb nsa
echo "===END"
"""

WIRE_TRIALS = FUNCS + r"""
C=$(envidx wire:idx-c); D=$(envidx wire:idx-d); LC=$(llidx rxec); LD=$(llidx rxed)
echo "===ENVIDX rxec=$C rxed=$D"
echo "===LLIDX rxec=$LC rxed=$LD"
trial picked rxed rxec "$D" "$C" 192.168.61.2 18610
trial linklocal rxed rxec "$LD" "$LC" 192.168.61.2 18611
trial unused rxed rxec 7 7 192.168.61.2 18612
C6=$(envidx wire:idx6-c); D6=$(envidx wire:idx6-d)
echo "===ENVIDX6 rxec=$C6 rxed=$D6"
trial ipv6 rxed rxec "$D6" "$C6" 192.168.61.2 18613
echo "===END"
"""

#: UCX: the devices it reports, and the warnings for each UCX_NET_DEVICES value.
UCX = r"""
V=$(sed -n 's/^UCX_NET_DEVICES=//p' "$SV_STEP_DIR/wire:dotenv.cli.stdout")
echo "===VALUE $V"
echo "===DEVICES"; ucx_info -d 2>&1
for value in "$V" rxec "=rxec:1,rxed:1" nosuch:1; do
  echo "===CONTEXT $value"
  UCX_NET_DEVICES="$value" ucx_info -p -u t 2>&1 | grep -i "warn" || true
done
echo "===END"
"""


#: rdma_cm's real client beside ``doctor``: FUNCS, and ``state [NETNS]``, which prints
#: ``ip -br addr`` and the used GIDs of rxec and rxed (``DEVICE INDEX GID NETDEV``, one
#: ``grep`` of sysfs: rxe's table has 1024 entries); ``rping_pair NAME ADDR PORT``: an
#: rping server on ADDR (it prints ``rdma_listen`` with -d just before listening) and a
#: client to it, ended by ``finish``;
#: ``rping_one NAME NETNS SECONDS ARGS...``: one rping, stopped after SECONDS (a server
#: that bound and listens waits for a client).  Both print ``===TRIAL`` blocks
#: (lab_checks.trials); every rping is under ``timeout``.
CM_FUNCS = FUNCS + r"""
gids() {
  for d in rxec rxed; do
    cd /sys/class/infiniband/$d/ports/1
    grep -H . gid_attrs/ndevs/* 2>/dev/null | while IFS=: read -r f n; do
      i=${f##*/}; echo "$d $i $(cat gids/$i) $n"; done
  done
  cd /
}
state() { echo "===ADDR"; ${1:+ip netns exec $1} ip -br addr; echo "===GIDS"; gids; }
rping_pair() {
  stdbuf -oL timeout 20 rping -s -d -v -C 1 -a $2 -p $3 > /run/pp/$1.srv 2>&1 &
  spid=$!
  i=0; until grep -q rdma_listen /run/pp/$1.srv; do
    i=$((i+1)); [ $i -gt 150 ] && break; sleep 0.1; done
  sleep 0.3
  timeout 15 rping -c -v -C 1 -a $2 -p $3 > /run/pp/$1.clt 2>&1
  finish $1 $?
}
rping_one() {
  n=$1; x=${2:+ip netns exec $2}; t=$3; shift 3
  $x timeout $t stdbuf -oL rping "$@" > /run/pp/$n.out 2>&1
  echo "===TRIAL $n client_rc=$?"; echo "---client"; cat /run/pp/$n.out
}
"""

#: the pod: a veth whose host end (vp0, 10.244.3.1) is the default route's gateway
POD = """set -e
ip netns add pod
ip link add vp0 type veth peer name vp1
ip link set vp1 netns pod; ip -n pod link set vp1 name eth0
ip addr add 10.244.3.1/24 dev vp0; ip link set vp0 up
ip -n pod link set lo up; ip -n pod addr add 10.244.3.17/24 dev eth0; ip -n pod link set eth0 up
ip -n pod route add default via 10.244.3.1
set +e
state pod
rping_one pod-client pod 10 -c -a 192.168.61.2 -C 1 -p 18631
rping_one pod-bind pod 10 -s -a 10.244.3.17 -C 1 -p 18632
"""

#: vd's IPv4 address removed (vc's neighbour entry for it too: a resolution asks again);
#: binding to vd's IPv6 address (the GID the kernel kept) still works: rping then listens
#: until stopped.  (No connection over IPv6: on this wire, two addresses of one host and
#: policy routing, rping's client got ``RDMA_CM_EVENT_REJECTED, error 28``, the IB CM's
#: consumer-defined reject from the listening side, where ibv_rc_pingpong's IPv6 trial over
#: the same GIDs connects.)
NOIPV4 = """ip addr del 192.168.61.2/24 dev vd && ip neigh flush dev vc && sleep 1
state
rping_one noipv4-bind "" 10 -s -a 192.168.61.2 -C 1 -p 18633
rping_one noipv4-client "" 10 -c -a 192.168.61.2 -C 1 -p 18634
rping_one noipv4-bind6 "" 5 -s -d -a fd61::2 -C 1 -p 18635
"""

NOADDR = """ip -6 addr del fd61::2/64 dev vd && sleep 1
state
"""

#: (situation, its shell, the doctor's network namespace)
CM_SITUATIONS = (("healthy", "state\nrping_pair healthy 192.168.61.2 18630\n", ""),
                 ("pod", POD, "pod"), ("noipv4", NOIPV4, ""), ("noaddr", NOADDR, ""))


def cm_steps() -> list[Step]:
    """Each situation's shell (``cm:<situation>``) then ``doctor --json`` (a fork of the
    warm runner, in the situation's namespace: ``cm:<situation>:doctor``); the pod is
    removed at the end (vd's addresses go with the wire's teardown)."""
    steps: list[Step] = []
    for name, text, netns in CM_SITUATIONS:
        doctor: dict[str, Any] = {"op": "cli", "name": f"cm:{name}:doctor",
                                  "args": ["doctor", "--json"], "env": {}}
        if netns:
            doctor["netns"] = netns
        steps += [cmd(f"cm:{name}", ["sh", "-c", CM_FUNCS + text], timeout=150), doctor]
    return [*steps, sh("ip netns del pod")]


#: libfabric's verbs provider on the wire set-up (addresses on vc and vd) with rdma_cm
#: (rdma_ucm loaded, then unloaded) and FI_VERBS_IFACE=vc: only vc's addresses count for
#: MSG endpoints (tests/kernel/test_access_lab.py)
FABRIC = [cmd("wire:cm:load", ["modprobe", "rdma_ucm"]),
          *fabric_env("wire:cm-iface", {"FI_VERBS_IFACE": "vc"}),
          cmd("wire:cm:unload", ["rmmod", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm"])]


def _env_cli(name: str, args: list[str], netns: str = "", **env: str) -> Step:
    step: dict[str, Any] = {"op": "cli", "name": name, "args": ["env", *args], "env": env}
    if netns:
        step["netns"] = netns
    return step


def _index_cli(name: str, *devices: str, netns: str = "", **env: str) -> Step:
    """``sysverbs env --format dotenv`` for the devices: what the trials read."""
    args = [a for d in devices for a in ("--device", d)]
    return _env_cli(name, [*args, "--format", "dotenv"], netns, **env)


def roce_scenario() -> dict[str, Any]:
    """Leaves no device, namespace, rule or veth behind."""
    steps: list[Step] = [
        sh(NS_SETUP),
        cmd("ns:devinfo", ["ibv_devinfo", "-v"]),
        _env_cli("ns:env-a", ["--device", "rxea:1", "--format", "json"], netns="nsa"),
        _env_cli("ns:env-b", ["--device", "rxeb:1", "--format", "json"], netns="nsb"),
        _index_cli("ns:idx-a", "rxea:1", netns="nsa"),
        _index_cli("ns:idx-b", "rxeb:1", netns="nsb"),
        cmd("ns:trials", ["sh", "-c", NS_TRIALS], timeout=300),
        sh(NS_TEARDOWN),
        sh(WIRE_SETUP),
        cmd("wire:devinfo", ["ibv_devinfo", "-v"]),
        cmd("wire:ip", ["sh", "-c", "ip -o addr show dev vc; ip -o addr show dev vd; ip rule"]),
        _env_cli("wire:env", ["--device", "rxec:1", "--device", "rxed:1", "--format", "json"]),
        _env_cli("wire:env-sh", ["--device", "rxec:1", "--device", "rxed:1"]),
        _env_cli("wire:env-all", ["--format", "json"]),
        _env_cli("wire:env6", ["--device", "rxec:1", "--device", "rxed:1", "--format", "json"],
                 NCCL_IB_ADDR_FAMILY="AF_INET6"),
        _index_cli("wire:idx-c", "rxec:1"),
        _index_cli("wire:idx-d", "rxed:1"),
        _index_cli("wire:idx6-c", "rxec:1", NCCL_IB_ADDR_FAMILY="AF_INET6"),
        _index_cli("wire:idx6-d", "rxed:1", NCCL_IB_ADDR_FAMILY="AF_INET6"),
        _index_cli("wire:dotenv", "rxec:1", "rxed:1"),
        cmd("wire:trials", ["sh", "-c", WIRE_TRIALS], timeout=400),
        cmd("wire:ucx", ["sh", "-c", UCX], timeout=300),
        *FABRIC[:-1],  # rdma_ucm loaded: rping beside doctor, then unloaded
        *cm_steps(),
        FABRIC[-1],
        sh(WIRE_TEARDOWN),
    ]
    return scenario("roce", steps, {})

"""``sysverbs devinfo`` without ``-l``: what sysfs knows, in ``ibv_devinfo``'s layout.

``ibv_devinfo`` opens each device and asks the kernel (``ibv_query_device_ex``,
``ibv_query_port``, ``ibv_query_gid``).  sysverbs does not: every value printed here
comes from ``/sys/class/infiniband/<dev>``, in the format rdma-core 44's
``ibv_devinfo`` prints the same value, and every line whose value only a device query
knows keeps its label and says :data:`UNAVAILABLE` (see docs/cli.md for the list).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from ..devices.attributes import DeviceAttributes, Gid, PortAttributes
    from ..engine.device import Device

__all__ = ["UNAVAILABLE", "QUERY_ONLY_DEVICE", "QUERY_ONLY_PORT", "render", "document",
           "inet_ntop6", "parse_port", "USAGE"]

#: What a value that only a device query knows prints as.
UNAVAILABLE = "(unavailable)"

_TRANSPORT = {0: "InfiniBand", 1: "iWARP", 2: "usNIC", 3: "usNIC UDP", 4: "unspecified"}
_PORT_STATE = {1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}
_PHYS_STATE = {1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING",
               5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"}
_WIDTH = {1: "1", 2: "4", 4: "8", 8: "12", 16: "2"}
_SPEED = {1: "2.5 Gbps", 2: "5.0 Gbps", 4: "10.0 Gbps", 8: "10.0 Gbps", 16: "14.0 Gbps",
          32: "25.0 Gbps", 64: "50.0 Gbps", 128: "100.0 Gbps"}
# the kernel's link_layer text -> ibv_devinfo 44's link_layer_str() of the same value
_LINK_LAYER = {"InfiniBand": "InfiniBand", "Ethernet": "Ethernet", "Unknown": "Unspecified"}

#: ``ibv_devinfo -v`` device lines only ``ibv_query_device_ex`` knows (label, tabs).
QUERY_ONLY_DEVICE: tuple[tuple[str, str], ...] = (
    ("max_mr_size", "\t\t\t"), ("page_size_cap", "\t\t\t"), ("max_qp", "\t\t\t\t"),
    ("max_qp_wr", "\t\t\t"), ("device_cap_flags", "\t\t"), ("max_sge", "\t\t\t"),
    ("max_sge_rd", "\t\t\t"), ("max_cq", "\t\t\t\t"), ("max_cqe", "\t\t\t"),
    ("max_mr", "\t\t\t\t"), ("max_pd", "\t\t\t\t"), ("max_qp_rd_atom", "\t\t\t"),
    ("max_ee_rd_atom", "\t\t\t"), ("max_res_rd_atom", "\t\t"),
    ("max_qp_init_rd_atom", "\t\t"), ("max_ee_init_rd_atom", "\t\t"),
    ("atomic_cap", "\t\t\t"), ("max_ee", "\t\t\t\t"), ("max_rdd", "\t\t\t"),
    ("max_mw", "\t\t\t\t"), ("max_raw_ipv6_qp", "\t\t"), ("max_raw_ethy_qp", "\t\t"),
    ("max_mcast_grp", "\t\t\t"), ("max_mcast_qp_attach", "\t\t"),
    ("max_total_mcast_qp_attach", "\t"), ("max_ah", "\t\t\t\t"), ("max_fmr", "\t\t\t"),
    ("max_srq", "\t\t\t"), ("max_pkeys", "\t\t\t"), ("local_ca_ack_delay", "\t\t"),
    ("general_odp_caps", "\t\t"), ("completion_timestamp_mask", "\t"),
    ("hca_core_clock", "\t\t\t"), ("device_cap_flags_ex", "\t\t"), ("tso_caps", "\t\t\t"),
    ("rss_caps", "\t\t\t"), ("max_wq_type_rq", "\t\t\t"), ("packet_pacing_caps", "\t\t"),
    ("tag_matching_caps", "\t\t"), ("num_comp_vectors", "\t\t"),
)
#: ``ibv_devinfo -v`` port lines only ``ibv_query_port`` knows.
QUERY_ONLY_PORT = ("max_msg_sz", "port_cap_flags2", "max_vl_num", "bad_pkey_cntr",
                   "qkey_viol_cntr", "subnet_timeout", "init_type_reply")
_NUMBERED = re.compile(r"([0-9]{1,10}): ")


def inet_ntop6(addr: ipaddress.IPv6Address) -> str:
    """glibc's ``inet_ntop(AF_INET6)``: the longest run of two or more zero groups
    (the first of equal runs) becomes ``::``, and ``::a.b.c.d`` / ``::ffff:a.b.c.d``
    keep their IPv4 tail."""
    raw = addr.packed
    words = [int.from_bytes(raw[i:i + 2], "big") for i in range(0, 16, 2)]
    best_base, best_len, cur_base, cur_len = -1, 0, -1, 0
    for i, w in enumerate(words):
        if w == 0:
            if cur_base < 0:
                cur_base, cur_len = i, 1
            else:
                cur_len += 1
        elif cur_base >= 0:
            if cur_len > best_len:
                best_base, best_len = cur_base, cur_len
            cur_base = -1
    if cur_base >= 0 and cur_len > best_len:
        best_base, best_len = cur_base, cur_len
    if best_len < 2:
        best_base = -1
    out = ""
    i = 0
    while i < 8:
        if best_base >= 0 and best_base <= i < best_base + best_len:
            if i == best_base:
                out += ":"
            i += 1
            continue
        if i:
            out += ":"
        if i == 6 and best_base == 0 and (best_len == 6 or (best_len == 5 and words[5] == 0xffff)):
            out += ".".join(str(b) for b in raw[12:])
            break
        out += f"{words[i]:x}"
        i += 1
    if best_base >= 0 and best_base + best_len == 8:
        out += ":"
    return out


def _code(text: Optional[str]) -> Optional[int]:
    """The number of the kernel's ``%d: %s`` state files."""
    m = _NUMBERED.match(text) if text is not None else None
    return int(m.group(1)) if m else None


def _guid(value: Optional[int]) -> Optional[str]:
    if value is None:
        return None
    h = f"{value:016x}"
    return ":".join(h[i:i + 4] for i in range(0, 16, 4))


def _board_id(dev: Device) -> Optional[str]:
    from ..ground.sysfs_read import cstr, read_sysfs_file

    value = read_sysfs_file(os.fsencode(dev.ibdev_path) + b"/board_id", 256)
    if value is None:
        return None
    value = cstr(value)
    return os.fsdecode(value) if value else None


def _gid_text(gid: Gid, ethernet: bool) -> Optional[str]:
    """``print_formated_gid()``: RoCE v2 GIDs as inet_ntop, the others as eight groups."""
    if gid.raw_type == "RoCE v2":
        text, kind = inet_ntop6(gid.gid), "RoCE v2"
    else:
        h = f"{int(gid.gid):032x}"
        text = ":".join(h[i:i + 4] for i in range(0, 32, 4))
        kind = "RoCE v1" if gid.raw_type == "IB/RoCE v1" else UNAVAILABLE
    return f"{text}, {kind}" if ethernet else text


def _port_values(dev: Device, port: PortAttributes) -> dict[str, Any]:
    state = _code(port.raw["state"])
    phys = _code(port.raw["phys_state"])
    ll = _LINK_LAYER.get(port.raw["link_layer"] or "")
    rate = port.rate
    width = rate.width_code if rate is not None else None
    speed = rate.speed_code if rate is not None else None
    if speed is not None and speed > 255:
        speed = None  # XDR does not fit rdma-core 44's uint8_t active_speed
    ethernet = ll == "Ethernet"
    gids = [g for g in port.gids if g.interface_id != 0]  # devinfo's null_gid()
    return {
        "port": port.port,
        "state": None if state is None else _PORT_STATE.get(state, "invalid state"),
        "state_code": state,
        "sm_lid": port.sm_lid,
        "port_lid": port.lid,
        "port_lmc": port.lid_mask_count,
        "link_layer": ll,
        "port_cap_flags": port.cap_mask,
        "sm_sl": port.sm_sl,
        "pkey_tbl_len": port.pkey_tbl_len,
        "gid_tbl_len": port.gid_tbl_len,
        "active_width": None if width is None else _WIDTH.get(width, "invalid width") + "X",
        "active_width_code": width,
        "active_speed": None if speed is None else _SPEED.get(speed, "invalid speed"),
        "active_speed_code": speed,
        "phys_state": None if phys is None else _PHYS_STATE.get(phys, "invalid physical state"),
        "phys_state_code": phys,
        "rate": port.raw["rate"],
        "gids": [{"index": g.index, "gid": str(g.gid), "type": g.raw_type, "netdev": g.ndev,
                  "text": _gid_text(g, ethernet)} for g in gids],
    }


def _values(dev: Device, attrs: DeviceAttributes) -> dict[str, Any]:
    transport = int(dev.transport_type)
    return {
        "hca_id": dev.name,
        "transport": _TRANSPORT.get(transport, "invalid transport"),
        "transport_code": transport,
        "fw_ver": attrs.fw_ver,
        "node_guid": _guid(attrs.node_guid),
        "sys_image_guid": _guid(attrs.sys_image_guid),
        "board_id": _board_id(dev),
        "phys_port_cnt": len([p for p in attrs.ports if p.port >= 1]),
        "hca_type": attrs.hca_type,
        "hw_rev": attrs.raw["hw_rev"],
        "node_desc": attrs.node_desc,
        "provider": dev.provider,
        "uverbs": dev.dev_name,
        "ports": [_port_values(dev, p) for p in attrs.ports if p.port >= 1],
    }


def _v(value: object) -> str:
    return UNAVAILABLE if value is None else str(value)


def _with_code(text: Optional[str], code: Optional[int]) -> str:
    return UNAVAILABLE if text is None or code is None else f"{text} ({code})"


def _text(v: dict[str, Any], ib_port: int, verbose: bool) -> str:
    out = [f"hca_id:\t{v['hca_id']}",
           f"\ttransport:\t\t\t{v['transport']} ({v['transport_code']})",
           f"\tfw_ver:\t\t\t\t{_v(v['fw_ver'])}",
           f"\tnode_guid:\t\t\t{_v(v['node_guid'])}",
           f"\tsys_image_guid:\t\t\t{_v(v['sys_image_guid'])}",
           f"\tvendor_id:\t\t\t{UNAVAILABLE}",
           f"\tvendor_part_id:\t\t\t{UNAVAILABLE}",
           f"\thw_ver:\t\t\t\t{UNAVAILABLE}"]
    if v["board_id"] is not None:
        out.append(f"\tboard_id:\t\t\t{v['board_id']}")
    out.append(f"\tphys_port_cnt:\t\t\t{v['phys_port_cnt']}")
    if verbose:
        out.extend(f"\t{label}:{tabs}{UNAVAILABLE}" for label, tabs in QUERY_ONLY_DEVICE)
    for p in v["ports"]:
        if ib_port and p["port"] != ib_port:
            continue
        lmc = p["port_lmc"]
        out += [f"\t\tport:\t{p['port']}",
                f"\t\t\tstate:\t\t\t{_with_code(p['state'], p['state_code'])}",
                f"\t\t\tmax_mtu:\t\t{UNAVAILABLE}",
                f"\t\t\tactive_mtu:\t\t{UNAVAILABLE}",
                f"\t\t\tsm_lid:\t\t\t{_v(p['sm_lid'])}",
                f"\t\t\tport_lid:\t\t{_v(p['port_lid'])}",
                f"\t\t\tport_lmc:\t\t{UNAVAILABLE if lmc is None else f'0x{lmc:02x}'}",
                f"\t\t\tlink_layer:\t\t{_v(p['link_layer'])}"]
        if verbose:
            flags = p["port_cap_flags"]
            out += [f"\t\t\tmax_msg_sz:\t\t{UNAVAILABLE}",
                    f"\t\t\tport_cap_flags:\t\t"
                    f"{UNAVAILABLE if flags is None else f'0x{flags:08x}'}",
                    f"\t\t\tport_cap_flags2:\t{UNAVAILABLE}",
                    f"\t\t\tmax_vl_num:\t\t{UNAVAILABLE}",
                    f"\t\t\tbad_pkey_cntr:\t\t{UNAVAILABLE}",
                    f"\t\t\tqkey_viol_cntr:\t\t{UNAVAILABLE}",
                    f"\t\t\tsm_sl:\t\t\t{_v(p['sm_sl'])}",
                    f"\t\t\tpkey_tbl_len:\t\t{p['pkey_tbl_len']}",
                    f"\t\t\tgid_tbl_len:\t\t{p['gid_tbl_len']}",
                    f"\t\t\tsubnet_timeout:\t\t{UNAVAILABLE}",
                    f"\t\t\tinit_type_reply:\t{UNAVAILABLE}",
                    f"\t\t\tactive_width:\t\t"
                    f"{_with_code(p['active_width'], p['active_width_code'])}",
                    f"\t\t\tactive_speed:\t\t"
                    f"{_with_code(p['active_speed'], p['active_speed_code'])}"]
            if v["transport_code"] == 0:
                out.append(f"\t\t\tphys_state:\t\t"
                           f"{_with_code(p['phys_state'], p['phys_state_code'])}")
            out += [f"\t\t\tGID[{g['index']:3d}]:\t\t{g['text']}" for g in p["gids"]]
        out.append("")
    return "".join(line + "\n" for line in out)


def parse_port(value: str) -> int:
    """``strtol(optarg, NULL, 0)`` stored in an ``int``."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", value)
    if m is None:
        return 0
    digits = m.group(2)
    if digits[:2].lower() == "0x":
        n = int(digits[2:], 16)
    elif digits.startswith("0"):
        n = int(digits, 8) if len(digits) > 1 else 0
    else:
        n = int(digits)
    if m.group(1) == "-":
        n = -n
    n = max(min(n, 2**63 - 1), -(2**63))  # long
    n &= 0xFFFFFFFF  # int
    return n - 2**32 if n >= 2**31 else n


USAGE = """Usage: {argv0}             print the ca attributes

Options:
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default all ports)
  -l, --list             print only the IB devices names
  -v, --verbose          print all the attributes of the IB device(s)
"""


def document(devices: list[Any]) -> dict[str, Any]:
    """The ``sysverbs.devinfo/1`` JSON document."""
    return {"schema": "sysverbs.devinfo/1", "devices": devices}


def _fails(message: str, kind: str, as_json: bool) -> int:
    """ibv_devinfo's message and exit status 255; with --json, the error document."""
    sys.stderr.write(message + "\n")
    if as_json:
        sys.stderr.flush()
        sys.stdout.write(json.dumps({"schema": "sysverbs.devinfo/1", "error": {
            "kind": kind, "message": message}}, indent=2) + "\n")
        sys.stdout.flush()
    return 255


def render(devices: list[Device], ib_dev: Optional[str], ib_port: int, verbose: bool,
           as_json: bool, sysfs_path: str) -> int:
    """``print_hca_cap()`` for each chosen device; the exit status of ibv_devinfo."""
    from ..devices.attributes import device_attributes

    if ib_dev is not None:
        chosen = [d for d in devices if d.name == ib_dev][:1]
        if not chosen:
            return _fails(f"IB device '{ib_dev}' wasn't found", "not-found", as_json)
    else:
        if not devices:
            return _fails("No IB devices found", "nothing-found", as_json)
        chosen = list(devices)
    port = ib_port & 0xFF  # print_hca_cap(..., uint8_t ib_port)
    rc = 0
    docs: list[Any] = []
    out = sys.stdout
    for dev in chosen:
        v = _values(dev, device_attributes(dev, sysfs_path=sysfs_path))
        if port and port > v["phys_port_cnt"]:
            out.flush()
            sys.stderr.write("Invalid port requested for device\n")
            sys.stderr.flush()
            rc |= 4
            continue
        if as_json:
            if port:
                v["ports"] = [p for p in v["ports"] if p["port"] == port]
            docs.append(v)
        else:
            out.write(_text(v, port, verbose))
    if as_json:
        out.write(json.dumps(document(docs), indent=2) + "\n")
    out.flush()
    return rc

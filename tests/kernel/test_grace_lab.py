"""The Data Direct ioctl (sysverbs/devices/datadirect.py) under a real kernel: rxe (and
siw where the VM's kernel has it) have no such mlx5 method, and must answer it with an
errno, never hang or crash.  Sent with the device's own driver id, the context request
before it must be accepted (the kernel then read our header and attribute layout as
its own): the answer comes from the Data Direct request itself.  Sent as for mlx5 (what
sysverbs sends a ConnectX PF), the kernel refuses the driver id: EINVAL."""

from __future__ import annotations

import json

import pytest

from tests.kernel.lab import LabResults
from tests.kernel.lab_checks import attributes, where

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(3600)]
#: What a kernel answers a driver that lacks the method: the method is not in its uAPI
#: tree (EPROTONOSUPPORT), or the driver refuses (EOPNOTSUPP, ENODEV).
NO_METHOD = {"EPROTONOSUPPORT", "EOPNOTSUPP", "ENODEV"}


def test_data_direct_ioctl_answers_an_errno_on_soft_devices(lab: LabResults) -> None:
    vm, _ = attributes(lab)
    found: dict[str, dict[str, str]] = json.loads(vm["data_direct"].strip().splitlines()[-1])
    assert {"rxe0", "rxe1"} <= set(found), vm["data_direct"] + where(lab)
    for name, answers in found.items():
        own = answers["own"]
        assert own.split(":", 1)[0] in NO_METHOD, f"{name}: {answers}" + where(lab)
        assert "answering MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH" in own, answers
        assert answers["mlx5"] == ("EINVAL: Invalid argument (answering "
                                   "UVERBS_METHOD_GET_CONTEXT)"), f"{name}: {answers}"

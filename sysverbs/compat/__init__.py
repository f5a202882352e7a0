"""Other libraries' discovery APIs, answered by sysverbs.

:mod:`sysverbs.compat.pyverbs`: rdma-core's Python bindings, for their device list
(``pyverbs.device.get_device_list()``).  Nothing here is imported by ``import sysverbs``.
"""

"""pyverbs' device discovery, answered by sysverbs: ``pyverbs.device.get_device_list()``
without rdma-core's Python bindings or libibverbs.

Modules, with pyverbs' names (rdma-core 44, Debian 12's ``python3-pyverbs``):

* :mod:`~sysverbs.compat.pyverbs.device`: ``get_device_list()``, ``rdma_get_devices()``
  and ``Device`` (``name``, ``guid``, ``node_type``, ``transport_type``, ``index``
  and ``str()``, as pyverbs gives them);
* :mod:`~sysverbs.compat.pyverbs.pyverbs_error`: ``PyverbsError``,
  ``PyverbsRDMAError``, ``PyverbsUserError`` (also sysverbs exceptions:
  :mod:`sysverbs.ground.errors`);
* :mod:`~sysverbs.compat.pyverbs.enums`: the node, transport and fork types;
* :mod:`~sysverbs.compat.pyverbs.fork`: ``fork_init()``, ``is_fork_initialized()``.

Everything pyverbs does with an opened device (``Context``, ``PD``, ``QP``, ``CQ``,
``MR``, ``AH``..., modules such as ``pd``, ``qp``, ``cq``, ``mr``) is out of scope:
importing it raises :class:`~sysverbs.ground.errors.OutOfScopeError` (an ``ImportError``),
whose text says what sysverbs offers instead.

>>> from sysverbs.compat import pyverbs
>>> try:
...     from sysverbs.compat.pyverbs.pd import PD
... except ImportError as e:
...     print(type(e).__name__, str(e).split(":")[0])
OutOfScopeError sysverbs.compat.pyverbs.pd (pyverbs.pd) is out of scope
"""

from ._scope import install_finder

__all__: list[str] = []

install_finder()

"""pyverbs' exceptions, with pyverbs' names, texts and ``error_code``
(the classes are in :mod:`sysverbs.ground.errors`, where they are also sysverbs exceptions).

* ``PyverbsError(msg, error_code=-1)``: the base (a :class:`~sysverbs.ground.errors.SysverbsError`);
  ``str()`` is ``msg``, with ``. Errno: N, <strerror>`` appended when
  ``error_code`` is not -1;
* ``PyverbsRDMAError``: an rdma-core call failed; also an ``OSError`` with
  libibverbs' ``errno``;
* ``PyverbsUserError(msg)``: a caller's mistake; also a
  :class:`~sysverbs.ground.errors.UsageError`.
"""

from ...ground.errors import PyverbsError, PyverbsRDMAError, PyverbsUserError

__all__ = ["PyverbsError", "PyverbsRDMAError", "PyverbsUserError"]

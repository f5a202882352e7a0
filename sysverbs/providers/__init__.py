"""Providers: which rdma-core provider claims a device, and which ones are installed.

* :mod:`~sysverbs.providers.table`: the provider match tables of every rdma-core
  release, derived from ``providers.json``;
* :mod:`~sysverbs.providers.matching`: libibverbs' ``init.c: match_device`` over them;
* :mod:`~sysverbs.providers.drivers`: which providers libibverbs would load
  (``init.c: load_drivers`` and the config directory).
"""

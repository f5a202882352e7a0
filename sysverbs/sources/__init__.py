"""Where device records come from: sysfs, RDMA netlink and udev (each a module here).

A source turns the options of a call (a :class:`~sysverbs.sources.base.LibraryKey`)
into a :class:`~sysverbs.sources.base.Scan`: the candidate records in libibverbs'
temporary-list order (reverse readdir order for sysfs, reverse dump order for
netlink) and whether a netlink GET_CHARDEV reply was accepted (then libibverbs forces
the global ABI to 6; identity is by kernel index whenever records carry one).
Every source produces the same :class:`~sysverbs.ground.records.DeviceRecord`
objects, and every attribute value is read by
:func:`sysverbs.ground.sysfs_read.read_sysfs_file`.

Which source a call reads, and libibverbs' order of trying them, is the engine's
choice: :mod:`sysverbs.engine.devlist`.  Nothing here imports the engine.
"""

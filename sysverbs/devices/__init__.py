"""What a listed device has and whether it works, above the engine: attributes, ports
and GIDs (:mod:`~sysverbs.devices.attributes`), where it sits
(:mod:`~sysverbs.devices.location`), udev's properties
(:mod:`~sysverbs.devices.enrich`), why it is missing or unusable
(:mod:`~sysverbs.devices.diagnosis`), librdmacm's list
(:mod:`~sysverbs.devices.rdmacm`) and hotplug events
(:mod:`~sysverbs.devices.monitor`)."""

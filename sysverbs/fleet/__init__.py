"""The fleet face of sysverbs: a host's facts (:mod:`sysverbs.fleet.facts`) as Prometheus
metrics (:mod:`sysverbs.fleet.metrics`, ``sysverbs metrics``) and as node labels.

Imported only by the commands that serve a fleet; ``import sysverbs`` does not load it,
and prometheus_client (the ``metrics`` extra) is imported only when metrics are rendered
or served.
"""

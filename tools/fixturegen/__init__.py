"""What tools/make_fixtures.py builds its fixtures from: the record builder and value
helpers (:mod:`builder`), the hosts with Mellanox/NVIDIA NICs (:mod:`mellanox`), those
of the other RDMA vendors and the software devices (:mod:`vendors`), and the GPU hosts
for placement (:mod:`gpu_hosts`, with their PCI trees in :mod:`pci_trees`)."""

"""The kernel lab's SYSFS_PATH tree for libibverbs' ``device/infiniband_verbs``
fallback (the blocked-netlink scenarios of tests/kernel/scenarios.py): a ``py`` step
that builds it in the VM from the live rxe devices."""

from __future__ import annotations


def fallback_tree(root: str, class_abi: str) -> str:
    """A ``py`` snippet: a SYSFS_PATH tree whose ``device/infiniband_verbs`` dirs
    libibverbs falls back to.

    Every live device gets ``class/infiniband/<name>/device/infiniband_verbs/`` with
    a different shape (by name): the real uverbs entry, a dot entry first, an entry
    with no /dev node, a file instead of a directory, no ``abi_version``, a bad
    ``dev``, several entries; and a ``device/modalias`` that matches rxe (the
    driver id is unknown without GET_CHARDEV), mlx5, or nothing.
    """
    return f"""
import os
R = {root!r}
os.makedirs(R + '/class/infiniband_verbs')
open(R + '/class/infiniband_verbs/abi_version', 'w').write({class_abi!r})
def put(path, text):
    with open(path, 'w') as f:
        f.write(text)
for un in sorted(os.listdir('/sys/class/infiniband_verbs')):
    if not un.startswith('uverbs'):
        continue
    src = '/sys/class/infiniband_verbs/' + un
    n = open(src + '/ibdev').read().strip()
    dev = open(src + '/dev').read()
    abi = open(src + '/abi_version').read()
    D = f'{{R}}/class/infiniband/{{n}}/device'
    V = D + '/infiniband_verbs'
    os.makedirs(V)
    put(D + '/modalias', 'rdma_device:Nrxe\\n')
    entries = {{un: {{'dev': dev, 'abi_version': abi}}}}
    if n == 'mm':
        entries['.hidden'] = {{}}
    elif n == 'yy':
        entries = {{'uverbs99': {{'dev': dev, 'abi_version': abi}}}}
    elif n == 'rxe_b':
        entries[un]['abi_version'] = '7junk'
    elif n == 'omega':
        put(D + '/modalias', 'pci:v000015B3d00001017sv000015B3sd00000020bc02sc00i00\\n')
    elif n == 'rxe4':
        entries = {{}}
        put(V + '/' + un, '')
    elif n == 'a0':
        del entries[un]['abi_version']
        os.unlink(D + '/modalias')
    elif n == 'q':
        entries[un]['dev'] = 'junk\\n'
    elif n == 'rxe_k_long_name7':
        entries['uverbs0'] = dict(entries[un])
        entries['uverbs1'] = dict(entries[un])
    for e, files in entries.items():
        os.mkdir(V + '/' + e)
        for fname, text in files.items():
            put(V + '/' + e + '/' + fname, text)
    print(n, un, sorted(os.listdir(V)))
"""

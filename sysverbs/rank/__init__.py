"""The rank-facing side, above placement: what one rank tells NCCL and UCX.
``NCCL_IB_HCA`` as NCCL parses and matches it (:mod:`~sysverbs.rank.nccl`), NCCL's GID
index (:mod:`~sysverbs.rank.gid`) and the environment of a rank
(:mod:`~sysverbs.rank.environment`), imported from those modules."""

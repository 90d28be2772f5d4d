"""HCCL's collective algorithms, built from the book's send/recv and priced alike.

Huawei's collective communication library for Ascend NPUs (HCCL) documents its
algorithms with the same alpha-beta-gamma model as :mod:`aiinfra.comm.cost` (the
open-source ``hicann/hccl`` repository, ``docs/en/user_guide/coll_algo_intro``).
:mod:`aiinfra.comm.hccl.schedules` gives each step of NHR and NB as pure data (who
sends which slices to whom); :mod:`aiinfra.comm.hccl.algorithms` runs Mesh, NHR and
NB on ``torch.distributed`` with the same send/recv as the ring (HCCL's Ring, H-D_R
and Pairwise are the book's ring, Rabenseifner and pairwise all-to-all);
:mod:`aiinfra.comm.hccl.cost` prices them and :mod:`aiinfra.comm.hccl.algo_env`
reads ``HCCL_ALGO``. Nothing here runs on an NPU: the algorithms run on gloo and the
costs are a model.
"""

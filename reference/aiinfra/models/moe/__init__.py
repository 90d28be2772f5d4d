"""Mixture of experts: a router sends each token to ``K`` of ``E`` experts.

:mod:`.spec` is a layer's shape as data; :mod:`.routing` a batch's routing decision
and the capacity rule; :mod:`.layer` the layer (router, top-K, groups, shared
experts); :mod:`.balance` the balancing losses and bias, :mod:`.train` a run that
shows them at work; :mod:`.grouped` the experts as one sorted computation and
:mod:`.bench` its timing (``aiinfra bench moe``); :mod:`.figures` draws routings,
groups, capacity and balance.
"""

"""Speculative decoding: a small draft proposes, the target verifies.

:mod:`.decoding` holds the exact acceptance rule and a draft-and-verify loop;
:mod:`.cached` runs the same loop with both models' KV caches and rolls them back;
:mod:`.bench` measures acceptance and speed (``aiinfra bench speculative``).
"""

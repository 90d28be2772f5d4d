"""A block allocator for the paged KV cache: block tables, sharing, prefix caching.

PagedAttention (Kwon et al. 2023, vLLM) stores the KV cache in fixed-size blocks of
``B`` tokens drawn from one pool, like pages of virtual memory. Each sequence owns a
*block table*: its logical block ``i`` (tokens ``i*B .. i*B + B - 1``) lives in physical
block ``table[i]``. A block may be shared by several tables; its *reference count*
says how many. ``fork`` shares all of a parent's blocks (parallel sampling, beam
search); the first write to a shared, partially filled last block copies it first
(*copy-on-write*). *Prefix caching* names every full block by a hash of its parent
block's hash and its own token ids, so a new sequence whose prompt starts with cached
blocks reuses them instead of recomputing them. Freed blocks keep their hash until the
pool needs them again (evicted least recently freed first).
"""

from collections import OrderedDict
from collections.abc import Sequence

from aiinfra import checks


class OutOfBlocksError(RuntimeError):
    """Raised when the pool has too few free blocks; the engine preempts a sequence."""


def block_hash(parent_hash: int | None, token_ids: Sequence[int]) -> int:
    """Name a full block by its prefix, ``hash((parent_hash, *token_ids))`` (vLLM).

    Args:
        parent_hash: hash of the previous block of the sequence, ``None`` for the first.
        token_ids: the block's ``B`` token ids.

    Returns:
        An integer that depends on every token from the sequence's start to this block.
    """
    return hash((parent_hash, *token_ids))


class BlockAllocator:
    """A pool of ``num_blocks`` KV blocks of ``block_size`` tokens and the block tables.

    Args:
        num_blocks: physical blocks in the pool (>= 1).
        block_size: tokens per block ``B`` (>= 1).
        enable_prefix_caching: reuse cached full blocks whose hash matches.

    Raises:
        ValueError: if ``num_blocks`` or ``block_size`` is below 1.
    """

    def __init__(
        self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True
    ) -> None:
        checks.positive_ints(num_blocks=num_blocks, block_size=block_size)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.ref_counts = [0] * num_blocks
        # Free blocks in eviction order; a freed block keeps its hash until reused.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._hash_of: dict[int, int] = {}  # physical block -> hash of a full block
        self._cached: dict[int, int] = {}  # hash -> physical block
        self.block_tables: dict[int, list[int]] = {}
        self.token_ids: dict[int, list[int]] = {}
        self.num_cached_tokens: dict[int, int] = {}

    @property
    def num_free_blocks(self) -> int:
        """Blocks with reference count 0 (cached or not)."""
        return len(self._free)

    @property
    def hashed_blocks(self) -> frozenset[int]:
        """Physical blocks named by a prefix hash: full blocks, in use or cached."""
        return frozenset(self._hash_of)

    def _check_new(self, seq_id: int) -> None:
        if seq_id in self.block_tables:
            raise ValueError(f"seq_id {seq_id} already has a block table")

    def _check_known(self, seq_id: int) -> None:
        if seq_id not in self.block_tables:
            raise ValueError(f"seq_id {seq_id} has no block table")

    def _take_free(self, block: int | None = None) -> int:
        """Take ``block`` (a cached free block) or the least recently freed one."""
        if block is None:
            block, _ = self._free.popitem(last=False)
            old = self._hash_of.pop(block, None)  # evict its cached identity
            if old is not None and self._cached.get(old) == block:
                del self._cached[old]
        else:
            del self._free[block]
        self.ref_counts[block] = 1
        return block

    def _release(self, block: int) -> None:
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            self._free[block] = None

    def _seal(self, seq_id: int, logical: int) -> None:
        """Hash logical block ``logical`` of ``seq_id`` now that it is full."""
        if not self.enable_prefix_caching:
            return
        table, tokens, b = (
            self.block_tables[seq_id],
            self.token_ids[seq_id],
            self.block_size,
        )
        parent = self._hash_of.get(table[logical - 1]) if logical > 0 else None
        h = block_hash(parent, tokens[logical * b : (logical + 1) * b])
        self._hash_of[table[logical]] = h
        self._cached.setdefault(h, table[logical])

    def cached_prefix(self, token_ids: Sequence[int]) -> list[int]:
        """The cached blocks that hold the longest prefix of ``token_ids`` (no change).

        Only full blocks count, matched by the hash chain of their tokens; an empty
        list when prefix caching is off.
        """
        tokens, b = [int(t) for t in token_ids], self.block_size
        blocks: list[int] = []
        parent: int | None = None
        for i in range(len(tokens) // b if self.enable_prefix_caching else 0):
            parent = block_hash(parent, tokens[i * b : (i + 1) * b])
            if parent not in self._cached:
                break
            blocks.append(self._cached[parent])
        return blocks

    def blocks_to_take(self, blocks: Sequence[int]) -> int:
        """Free blocks that reusing cached ``blocks`` would take from the pool."""
        return sum(1 for p in blocks if self.ref_counts[p] == 0)

    def allocate(
        self,
        seq_id: int,
        token_ids: Sequence[int],
        max_cached_blocks: int | None = None,
    ) -> list[int]:
        """Give a new sequence the blocks for its prompt, reusing cached full blocks.

        Args:
            seq_id: a sequence id without a block table.
            token_ids: the prompt (at least one token id).
            max_cached_blocks: reuse at most this many cached blocks (an engine
                recomputes a prompt's last token to get its logits, so it never
                reuses the block that holds it); ``None``: no limit.

        Returns:
            The block table (physical block ids, one per ``B`` tokens, rounded up).

        Raises:
            ValueError: if ``seq_id`` is known or ``token_ids`` is empty.
            OutOfBlocksError: if the pool cannot hold the prompt (nothing changes).
        """
        self._check_new(seq_id)
        tokens = [int(t) for t in token_ids]
        if not tokens:
            raise ValueError("token_ids must hold at least one token")
        b = self.block_size
        n_blocks = -(-len(tokens) // b)
        plan: list[int | None] = list(self.cached_prefix(tokens))  # None: a new block
        if max_cached_blocks is not None:
            plan = plan[:max_cached_blocks]
        n_cached = len(plan)
        plan += [None] * (n_blocks - n_cached)
        needed = sum(1 for p in plan if p is None or self.ref_counts[p] == 0)
        if needed > self.num_free_blocks:
            raise OutOfBlocksError(
                f"seq_id {seq_id} needs {needed} free blocks, "
                f"{self.num_free_blocks} left"
            )
        table: list[int] = []
        for p in plan:
            if p is not None and self.ref_counts[p] > 0:
                self.ref_counts[p] += 1
                table.append(p)
            elif p is not None:
                table.append(self._take_free(p))
            else:
                table.append(self._take_free())
        self.block_tables[seq_id], self.token_ids[seq_id] = table, tokens
        self.num_cached_tokens[seq_id] = n_cached * b
        for i in range(n_cached, len(tokens) // b):
            self._seal(seq_id, i)
        return table

    def append(self, seq_id: int, token_id: int) -> tuple[int, int] | None:
        """Append one token, growing the table or copying a shared last block.

        Args:
            seq_id: a sequence with a block table.
            token_id: the new token's id.

        Returns:
            ``(src, dst)`` when the shared last block was copied on write (the caller
            copies the K/V of block ``src`` into ``dst``), else ``None``.

        Raises:
            ValueError: if ``seq_id`` is unknown.
            OutOfBlocksError: if a new block is needed and none is free (no change).
        """
        self._check_known(seq_id)
        table, tokens, b = (
            self.block_tables[seq_id],
            self.token_ids[seq_id],
            self.block_size,
        )
        n = len(tokens)
        copy: tuple[int, int] | None = None
        if n % b == 0:  # last block full (or none yet): start a new one
            if not self._free:
                raise OutOfBlocksError(f"seq_id {seq_id} needs a new block, none free")
            table.append(self._take_free())
        elif self.ref_counts[table[-1]] > 1:  # shared partial block: copy on write
            if not self._free:
                raise OutOfBlocksError(f"seq_id {seq_id} needs a copy block, none free")
            src = table[-1]
            self._release(src)
            table[-1] = self._take_free()
            copy = (src, table[-1])
        tokens.append(int(token_id))
        if len(tokens) % b == 0:
            self._seal(seq_id, len(table) - 1)
        return copy

    def fork(self, parent_id: int, child_id: int) -> list[int]:
        """Let ``child_id`` share every block of ``parent_id`` (reference count + 1).

        Args:
            parent_id: a sequence with a block table.
            child_id: a sequence id without one.

        Returns:
            The child's block table (equal to the parent's).

        Raises:
            ValueError: if ``parent_id`` is unknown or ``child_id`` is known.
        """
        self._check_known(parent_id)
        self._check_new(child_id)
        table = list(self.block_tables[parent_id])
        for block in table:
            self.ref_counts[block] += 1
        self.block_tables[child_id] = table
        self.token_ids[child_id] = list(self.token_ids[parent_id])
        self.num_cached_tokens[child_id] = self.num_cached_tokens[parent_id]
        return table

    def free(self, seq_id: int) -> None:
        """Drop a sequence; blocks whose count reaches 0 return to the pool.

        Args:
            seq_id: a sequence with a block table.

        Raises:
            ValueError: if ``seq_id`` is unknown.
        """
        self._check_known(seq_id)
        # Release the tail first so that a prefix's first blocks are evicted last.
        for block in reversed(self.block_tables.pop(seq_id)):
            self._release(block)
        del self.token_ids[seq_id], self.num_cached_tokens[seq_id]

"""The paged KV cache's block accounting and the prefix cache that shares full prompt blocks.

Blocks are counted, never stored: a request holds ``seq.num_blocks`` blocks, of which ``seq.held_hashes``
are shared prefix-cache blocks (reference-counted). A cached block nobody holds stays cached but evictable
(least recently released first), and counts as free, as in vLLM. A reset drops the evictable ones.
"""

from __future__ import annotations

from collections import OrderedDict

from .sequences import Seq


class KVBlocks:
    """Free blocks, prefix-cache references and the LRU of evictable cached blocks."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_blocks = num_blocks
        self.refcount: dict[int, int] = {}  # prefix-cache block hash -> requests holding it
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached blocks nobody holds, LRU first

    def available(self) -> int:
        return self.free_blocks + len(self.evictable)

    def used(self) -> int:
        # Like vLLM: cached blocks nobody holds count as free (they are evicted on demand).
        return self.num_blocks - self.free_blocks - len(self.evictable)

    def allocate(self, seq: Seq, blocks: int) -> None:
        for _ in range(blocks):
            if self.free_blocks == 0:
                victim, _ = self.evictable.popitem(last=False)
                del self.refcount[victim]
                self.free_blocks += 1
            self.free_blocks -= 1
        seq.num_blocks += blocks

    def release(self, seq: Seq) -> None:
        for h in seq.held_hashes:
            n = self.refcount[h] - 1
            self.refcount[h] = n
            if n == 0:
                self.evictable[h] = None
        self.free_blocks += seq.num_blocks - len(seq.held_hashes)
        seq.held_hashes = []
        seq.num_blocks = 0

    def lookup_prefix(self, seq: Seq) -> int:
        """Take references on the cached blocks that start ``seq``'s prompt; return how many."""
        usable = (seq.prompt_len - 1) // self.block_size  # at least one prompt token is always computed
        hits = 0
        for h in seq.block_hashes[:usable]:
            n = self.refcount.get(h)
            if n is None:
                break
            if n == 0:
                del self.evictable[h]
            self.refcount[h] = n + 1
            seq.held_hashes.append(h)
            hits += 1
        seq.num_blocks = hits
        return hits

    def register(self, seq: Seq, before: int) -> None:
        """Publish the prompt blocks ``seq`` has just filled, so later requests can share them."""
        bs = self.block_size
        first = before // bs
        last = min(seq.computed, seq.prompt_len) // bs
        for i in range(max(first, len(seq.held_hashes)), min(last, len(seq.block_hashes))):
            if i != len(seq.held_hashes):
                break  # only a contiguous prefix can be shared
            h = seq.block_hashes[i]
            if h in self.refcount:
                break  # someone else computed it too: keep ours private
            self.refcount[h] = 1
            seq.held_hashes.append(h)

    def drop_evictable(self) -> int:
        """Forget every cached block nobody holds (a prefix-cache reset); return how many.

        Blocks held by running requests stay cached: dropping them would not free them, and the requests
        holding them still read them."""
        dropped = len(self.evictable)
        for h in self.evictable:
            del self.refcount[h]
        self.evictable.clear()
        self.free_blocks += dropped
        return dropped

"""The prefix-tree model: stores, reuse reports, evictions, clears, ranks, orphans; and the recorded session."""

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_watch.kv_events import decode_frames
from enginetui.vllm_watch.prefix_tree import EVICTED_SHOWN, PrefixCaches
from enginetui.vllm_watch.server import load_decoder
from tests.fakes import vllm_recorded
from tests.fakes.vllm_wire import cleared, frames, removed, stored

A, B, C, D, E = (bytes([i]) * 32 for i in range(1, 6))


def fold(*batches) -> PrefixCaches:
    caches = PrefixCaches(decode=lambda ids: "".join(chr(96 + t) for t in ids))
    for seq, (events, rank) in enumerate(batches):
        caches.apply(decode_frames(frames(seq, float(seq), events, rank)))
    return caches


def drawn(cache) -> list[str]:
    return [
        f"{row.prefix}{row.block.text}{'' if row.block.cached else ' x'}{' ...' if row.orphan else ''}"
        for row in cache.rows()
    ]


def test_chains_grow_and_branch_where_prompts_diverge():
    caches = fold(
        ([stored([A, B], None, [1, 2, 3, 4], 2)], 0),  # "ab" "cd"
        ([stored([C], B, [5, 6], 2)], 0),  # "ef" after "cd"
        ([stored([D], A, [7, 8], 2)], 0),
    )  # "gh" after "ab": a branch
    cache = caches.ranks[0]
    assert (cache.num_cached, cache.num_stored, cache.block_size) == (4, 4, 2)
    assert drawn(cache) == ["ab", "├ cd", "│ ef", "└ gh"]
    assert cache.blocks[("GPU", None, C)].parent == ("GPU", None, B)


def test_a_hash_stored_again_is_a_reuse_report_and_an_evicted_one_comes_back():
    caches = fold(
        ([stored([A, B], None, [1, 2, 3, 4], 2)], 0),
        ([stored([A], None, [1, 2], 2)], 0),  # already cached: reported again
        ([removed([B])], 0),
        ([stored([B], A, [3, 4], 2)], 0),
    )  # cached again after eviction
    cache = caches.ranks[0]
    assert cache.blocks[("GPU", None, A)].times_stored == 2 and cache.num_restored == 1
    assert cache.blocks[("GPU", None, B)].cached and cache.num_removed == 1 and cache.num_stored == 3
    assert not cache.evicted


def test_evictions_are_marked_then_pruned_oldest_first_keeping_parents_of_live_blocks():
    caches = fold(([stored([A, B], None, [1, 2, 3, 4], 2)], 0), ([removed([A])], 0))
    cache = caches.ranks[0]
    assert drawn(cache) == ["ab x", "cd"]  # evicted, still shown: its child is cached
    assert cache.num_cached == 1
    hashes = [bytes([100, i]) * 16 for i in range(EVICTED_SHOWN + 5)]
    caches.apply(decode_frames(frames(2, 2.0, [stored([h], None, [1], 1) for h in hashes])))
    caches.apply(decode_frames(frames(3, 3.0, [removed(hashes)])))
    assert len(cache.evicted) == EVICTED_SHOWN  # the oldest evicted leaves were pruned...
    assert ("GPU", None, A) in cache.blocks  # ...but not a parent of a cached block
    assert ("GPU", None, hashes[-1]) in cache.blocks and ("GPU", None, hashes[5]) not in cache.blocks


def test_chains_still_cached_are_drawn_before_chains_wholly_evicted():
    caches = fold(
        ([stored([A, B], None, [1, 2, 3, 4], 2)], 0),  # "ab" "cd": the first chain...
        ([stored([C], None, [5, 6], 2)], 0),  # "ef": a second chain
        ([removed([A, B])], 0),
    )  # ...wholly evicted
    assert drawn(caches.ranks[0]) == ["ef", "ab x", "cd x"]
    assert [row.block.text for row in caches.ranks[0].rows(limit=2)] == ["ef", "ab"]


def test_a_chain_whose_parent_is_not_cached_is_an_orphan_root():
    caches = fold(([stored([C], B, [5, 6], 2)], 0), ([removed([E])], 0))  # its parent was stored before we listened
    cache = caches.ranks[0]
    assert drawn(cache) == ["ef ..."]
    assert cache.num_removed_unseen == 1


def test_all_blocks_cleared_empties_only_its_rank_and_ranks_stay_apart():
    caches = fold(([stored([A], None, [1, 2], 2)], 0), ([stored([A], None, [1, 2], 2)], 1), ([cleared()], 1))
    assert list(caches.ranks) == [0, 1]
    assert caches.ranks[0].num_cached == 1 and caches.ranks[1].num_cached == 0
    assert caches.ranks[1].num_cleared == 1 and caches.ranks[1].last_seq == 2


def test_mediums_are_separate_caches_of_the_same_hash():
    caches = fold(
        ([stored([A], None, [1, 2], 2, medium="GPU"), stored([A], None, [1, 2], 2, medium="CPU")], 0),
        ([removed([A], medium="CPU")], 0),
    )
    cache = caches.ranks[0]
    assert cache.blocks[("GPU", None, A)].cached and not cache.blocks[("CPU", None, A)].cached


def test_a_tokenizer_arriving_later_decodes_every_block():
    caches = PrefixCaches()
    caches.apply(decode_frames(frames(0, 0.0, [stored([A], None, [1, 2], 2)])))
    assert caches.ranks[0].blocks[("GPU", None, A)].text is None
    caches.set_decoder(lambda ids: "-".join(map(str, ids)))
    assert caches.ranks[0].blocks[("GPU", None, A)].text == "1-2"


def test_the_recorded_session_builds_the_tree_vllm_held():
    decode, _ = load_decoder(str(DEFAULT_MODEL_DIR))
    caches = PrefixCaches(decode=decode)
    steps = {s["step"]: s["t"] for s in vllm_recorded.session()["steps"]}
    branched = None
    for frame, batch in zip(vllm_recorded.frames(), vllm_recorded.batches(), strict=True):
        if branched is None and frame["t"] > steps["the first prompt again (prefix-cache hits)"]:
            branched = caches.ranks[0].rows()  # the first two prompts were served
        caches.apply(batch)
    # One chain: the shared prefix's first block, branching where the two prompts differ.
    assert "Return the number of items in the list" in branched[0].block.text and not branched[0].prefix
    assert [r.prefix[:1] for r in branched].count("├") == 1 and [r.prefix[:1] for r in branched].count("└") == 1
    cache = caches.ranks[0]
    assert cache.num_removed > 0 and cache.num_cleared == 1  # the bursts evicted blocks; the reset cleared all
    assert 0 < cache.num_cached <= 3  # after the reset: only the last prompt's blocks
    assert all(b.cached for b in cache.blocks.values())

"""The torch reference for the two attention kernels.

This is the specification the Triton kernels must match, and the CPU engine's real path.
Cache layout: `[num_blocks, block_size, num_kv_heads, head_size]` for keys and values alike;
a slot is `physical_block_id * block_size + offset_in_block`.
"""

import torch

from enginetui.core.ceil_div import cdiv


def reshape_and_cache_ref(
    key: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    value: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    key_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    slot_mapping: torch.Tensor,  # [num_tokens] int64; < 0 means "do not write"
) -> None:
    """Write each token's K and V into its slot of the paged cache."""
    num_blocks, block_size, num_kv_heads, head_size = key_cache.shape
    valid = slot_mapping >= 0  # [num_tokens]
    slots = slot_mapping[valid]  # [num_valid]
    flat_k = key_cache.view(num_blocks * block_size, num_kv_heads, head_size)
    flat_v = value_cache.view(num_blocks * block_size, num_kv_heads, head_size)
    flat_k[slots] = key[valid].to(key_cache.dtype)
    flat_v[slots] = value[valid].to(value_cache.dtype)


def paged_attention_ref(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size]
    key_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32/int64, prefix sum of query lengths
    seq_lens: torch.Tensor,  # [num_reqs] full context length (history + new tokens)
    block_table: torch.Tensor,  # [num_reqs, max_blocks_per_req] physical block ids
    scale: float,
    out: torch.Tensor | None = None,  # [num_tokens, num_heads, head_size]
    sliding_window: int | None = None,  # keys a query sees, itself included (None: every earlier key)
) -> torch.Tensor:
    """Varlen causal attention over the paged cache, for any mix of prefill chunks and decodes.

    Request r owns query rows `query_start_loc[r]:query_start_loc[r+1]`; those are its last
    `query_len` positions of `seq_lens[r]`, and each attends to every cached position up to its own
    (with a sliding window W: the last W of them, itself included). Any head size works.
    Decodes (one query each) and longer queries are computed as two separate padded batches, so a
    decode never pays for padding up to a prefill's length.
    """
    num_tokens = query.shape[0]
    num_reqs = seq_lens.shape[0]
    if out is None:
        out = torch.empty_like(query)
    if num_tokens == 0 or num_reqs == 0:
        return out

    qsl = query_start_loc.to(torch.long)
    q_lens = qsl[1:] - qsl[:-1]  # [num_reqs]
    tok_req = torch.repeat_interleave(torch.arange(num_reqs, device=query.device), q_lens)  # [num_tokens]
    is_decode = q_lens == 1  # [num_reqs]
    for group in (is_decode, ~is_decode):
        if not bool(group.any()):
            continue
        rows = group[tok_req]  # [num_tokens] bool: the tokens of this group's requests
        out[rows] = _padded_attention(
            query[rows],
            key_cache,
            value_cache,
            q_lens[group],
            seq_lens[group],
            block_table[group],
            scale,
            sliding_window,
        )  # [num_group_tokens, num_heads, head_size]
    return out


def _padded_attention(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size]
    key_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    q_lens: torch.Tensor,  # [num_reqs] int64, query tokens per request (packed in `query`)
    seq_lens: torch.Tensor,  # [num_reqs] full context length
    block_table: torch.Tensor,  # [num_reqs, max_blocks_per_req]
    scale: float,
    sliding_window: int | None,
) -> torch.Tensor:  # [num_tokens, num_heads, head_size]
    """Attention for requests padded into one `[num_reqs, max_q] x [num_reqs, max_s]` SDPA call."""
    num_tokens, num_heads, head_size = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    num_reqs = q_lens.shape[0]
    s_lens = seq_lens.to(torch.long)  # [num_reqs]
    max_q = int(q_lens.max())
    max_s = int(s_lens.max())
    num_ctx_blocks = cdiv(max_s, block_size)
    device = query.device

    # Gather each request's history through its block table.
    blocks = block_table[:, :num_ctx_blocks].to(torch.long)  # [num_reqs, num_ctx_blocks]
    k = key_cache[blocks].reshape(num_reqs, num_ctx_blocks * block_size, num_kv_heads, head_size)
    v = value_cache[blocks].reshape(num_reqs, num_ctx_blocks * block_size, num_kv_heads, head_size)
    k = k[:, :max_s].to(query.dtype)  # [num_reqs, max_s, num_kv_heads, head_size]
    v = v[:, :max_s].to(query.dtype)  # [num_reqs, max_s, num_kv_heads, head_size]

    # Scatter the packed queries into a padded [num_reqs, max_q] layout.
    q_starts = torch.cumsum(q_lens, 0) - q_lens  # [num_reqs]
    tok_req = torch.repeat_interleave(torch.arange(num_reqs, device=device), q_lens)  # [num_tokens]
    tok_idx = torch.arange(num_tokens, device=device) - q_starts[tok_req]  # [num_tokens] index within request
    q = query.new_zeros(num_reqs, max_q, num_heads, head_size)
    q[tok_req, tok_idx] = query  # [num_reqs, max_q, num_heads, head_size]

    # Query i of request r sits at absolute position s_len - q_len + i; it sees keys <= that.
    q_pos = (s_lens - q_lens)[:, None] + torch.arange(max_q, device=device)[None, :]  # [num_reqs, max_q]
    k_pos = torch.arange(max_s, device=device)  # [max_s]
    mask = k_pos[None, None, :] <= q_pos[:, :, None]  # [num_reqs, max_q, max_s]
    mask &= k_pos[None, None, :] < s_lens[:, None, None]
    if sliding_window is not None:
        mask &= k_pos[None, None, :] > q_pos[:, :, None] - sliding_window
    # Padded query rows would see no key; give them key 0 so softmax stays finite (they are dropped).
    padded = torch.arange(max_q, device=device)[None, :] >= q_lens[:, None]  # [num_reqs, max_q]
    mask[:, :, 0] |= padded

    o = torch.nn.functional.scaled_dot_product_attention(
        q.permute(0, 2, 1, 3),  # [num_reqs, num_heads, max_q, head_size]
        k.permute(0, 2, 1, 3),  # [num_reqs, num_kv_heads, max_s, head_size]
        v.permute(0, 2, 1, 3),  # [num_reqs, num_kv_heads, max_s, head_size]
        attn_mask=mask[:, None],  # [num_reqs, 1, max_q, max_s]
        scale=scale,
        enable_gqa=True,
    )  # [num_reqs, num_heads, max_q, head_size]
    return o.permute(0, 2, 1, 3)[tok_req, tok_idx]  # [num_tokens, num_heads, head_size]

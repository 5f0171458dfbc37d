"""Triton kernel: varlen causal attention over the paged KV cache, prefill chunks and decodes alike.

Same contract as `enginetui.kernels.reference.paged_attention_ref`; one launch serves the whole step.
Program (t, h) computes query tile t for kv head h: BLOCK_Q query tokens of one request times the
GROUP query heads sharing kv head h (so a GQA decode still fills the tile for `tl.dot`). Request r's
tiles are numbered from `query_start_loc[r] // BLOCK_Q + r`, so the grid needs no host-side query
lengths (the extra programs exit at once). Each program walks the request's keys in tiles of TILE_N
through the block table with an online softmax in fp32; odd head sizes run padded to a power of two;
a sliding window masks per row. With num_splits > 1 (flash-decoding) a third grid axis splits each
tile's key range and `combine_splits` merges the partial results.
"""

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from enginetui.kernels.launch import Launch

# log2(e): the kernel works in base 2 (exp2) with the softmax scale folded into the scores.
LOG2E = 1.4426950408889634
# Keys per inner step when the caller names none (or the block size, if larger), by the cache's
# dtype. The H200 runs of 2026-12-04 (kernels/GPU_NOTES.md) timed every launch variant: in half
# precision 128 keys at 4 warps matched the fastest decode within the runs' noise and ran prefills
# 1.1-1.3x faster than 64; one 16-token block per step, the earlier default, was 1.15-1.6x slower
# than either. In fp32 a 128-key tile spills about 7 KB a thread at head size 128 (aot_check);
# 64 keys spill nothing on sm_90.
DEFAULT_TILE_N = {torch.float16: 128, torch.bfloat16: 128, torch.float32: 64}

_TL_DTYPES = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}

# Read when the kernels below are decorated, as triton itself does: they run interpreted or compiled.
_INTERPRETED = os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


@triton.jit
def _find_request(query_start_loc_ptr, tile, num_reqs, BLOCK_Q: tl.constexpr):
    """The request owning global query tile `tile`: the last r with qsl[r] // BLOCK_Q + r <= tile."""
    lo: tl.int32 = 0
    hi = num_reqs
    while lo < hi:
        mid = (lo + hi) // 2
        first_tile = tl.load(query_start_loc_ptr + mid) // BLOCK_Q + mid
        if first_tile <= tile:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@triton.jit(do_not_specialize=["num_reqs"])  # one compiled kernel whatever the batch size
def _paged_attention_kernel(
    out_ptr,  # [num_tokens, num_heads, head_size]
    query_ptr,  # [num_tokens, num_heads, head_size]
    key_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_size]
    query_start_loc_ptr,  # [num_reqs + 1]
    seq_lens_ptr,  # [num_reqs]
    block_table_ptr,  # [num_reqs, max_blocks_per_req]
    scale_log2,  # softmax scale * log2(e)
    num_reqs,
    stride_q_tok,
    stride_q_head,
    stride_q_dim,
    stride_o_tok,
    stride_o_head,
    stride_o_dim,
    stride_c_block,  # the four cache strides, shared by key_cache and value_cache
    stride_c_off,
    stride_c_head,
    stride_c_dim,
    stride_bt_req,
    part_acc_ptr,  # [NUM_SPLITS, num_tokens, num_heads, head_size] fp32 (NUM_SPLITS > 1 only)
    part_ml_ptr,  # [NUM_SPLITS, num_tokens, num_heads, 2] fp32: running max and denominator (idem)
    stride_part_split,  # num_tokens * num_heads: one split's (token, head) rows
    num_heads,
    GROUP: tl.constexpr,  # query heads per kv head
    BLOCK_Q: tl.constexpr,  # query tokens per tile
    BLOCK_M: tl.constexpr,  # rows per tile: BLOCK_Q * GROUP, rounded up to a power of two >= 16
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    TILE_N: tl.constexpr,  # keys per inner step, a power of two >= 16 (by default one block)
    HEAD_SIZE: tl.constexpr,  # channels per head
    HEAD_PAD: tl.constexpr,  # HEAD_SIZE rounded up to a power of two (tl.arange needs one); the rest is masked
    SLIDING_WINDOW: tl.constexpr,  # keys a query sees, itself included; 0: every earlier key
    DOT_DTYPE: tl.constexpr,  # operand dtype of both tl.dot calls
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 operands (no tf32), else the default
    NUM_SPLITS: tl.constexpr,  # 1: write the output; > 1: each split writes partial results
):
    """Program (tile, kv_head, split): online-softmax attention of one query tile over its
    request's keys, or over this split's share of them (flash-decoding) when NUM_SPLITS > 1."""
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)
    req = _find_request(query_start_loc_ptr, tile, num_reqs, BLOCK_Q)
    q_start = tl.load(query_start_loc_ptr + req)
    q_len = tl.load(query_start_loc_ptr + req + 1) - q_start
    q_tile = tile - (q_start // BLOCK_Q + req)  # tile index within the request
    if q_tile * BLOCK_Q >= q_len:
        return
    seq_len = tl.load(seq_lens_ptr + req)
    context_len = seq_len - q_len  # positions cached before this step's queries

    rows = tl.arange(0, BLOCK_M)  # [BLOCK_M] row = (query token, head in group)
    q_idx = q_tile * BLOCK_Q + rows // GROUP  # [BLOCK_M] query index within the request
    head = kv_head * GROUP + rows % GROUP  # [BLOCK_M] query head
    row_valid = (rows // GROUP < BLOCK_Q) & (q_idx < q_len)  # [BLOCK_M]
    q_pos = context_len + q_idx  # [BLOCK_M] absolute position of each row's query
    tok = (q_start + q_idx).to(tl.int64)  # [BLOCK_M] row in the packed query
    dims = tl.arange(0, HEAD_PAD)  # [HEAD_PAD]
    dim_valid = dims < HEAD_SIZE  # [HEAD_PAD] padding channels load as 0 and are never stored
    q = tl.load(
        query_ptr + tok[:, None] * stride_q_tok + head[:, None] * stride_q_head + dims[None, :] * stride_q_dim,
        mask=row_valid[:, None] & dim_valid[None, :],
        other=0.0,
    ).to(DOT_DTYPE)  # [BLOCK_M, HEAD_PAD]

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # [BLOCK_M] running max of scores (base 2)
    l_i = tl.zeros([BLOCK_M], tl.float32)  # [BLOCK_M] running softmax denominator
    acc = tl.zeros([BLOCK_M, HEAD_PAD], tl.float32)  # [BLOCK_M, HEAD_PAD] running numerator

    # Keys after the tile's last query are never visible, nor (with a sliding window) keys before
    # its first query's window. Without a window key 0 is visible to every row, so the first
    # split's running maxima are finite; a later split, or a window, may hold no key visible to a row.
    last_pos = context_len + tl.minimum((q_tile + 1) * BLOCK_Q, q_len) - 1
    num_kv_tiles = last_pos // TILE_N + 1
    kv_tile_start = 0
    if SLIDING_WINDOW > 0:
        kv_tile_start = tl.maximum(context_len + q_tile * BLOCK_Q - SLIDING_WINDOW + 1, 0) // TILE_N
    split = tl.program_id(2)
    tiles_per_split = tl.cdiv(num_kv_tiles - kv_tile_start, NUM_SPLITS)
    first_tile = kv_tile_start + split * tiles_per_split
    end_tile = tl.minimum(num_kv_tiles, first_tile + tiles_per_split)
    offs_n = tl.arange(0, TILE_N)  # [TILE_N]
    bt_row = block_table_ptr + req.to(tl.int64) * stride_bt_req
    head_off = kv_head.to(tl.int64) * stride_c_head
    for j in range(first_tile, end_tile):
        k_pos = j * TILE_N + offs_n  # [TILE_N] absolute key position
        in_seq = k_pos < seq_len  # [TILE_N] slots past seq_len hold garbage: never load them
        block = tl.load(bt_row + k_pos // BLOCK_SIZE, mask=in_seq, other=0).to(tl.int64)  # [TILE_N]
        slot = block * stride_c_block + (k_pos % BLOCK_SIZE) * stride_c_off + head_off  # [TILE_N]
        k = tl.load(
            key_cache_ptr + slot[None, :] + dims[:, None] * stride_c_dim,
            mask=in_seq[None, :] & dim_valid[:, None],
            other=0.0,
        ).to(DOT_DTYPE)  # [HEAD_PAD, TILE_N]
        v = tl.load(
            value_cache_ptr + slot[:, None] + dims[None, :] * stride_c_dim,
            mask=in_seq[:, None] & dim_valid[None, :],
            other=0.0,
        ).to(DOT_DTYPE)  # [TILE_N, HEAD_PAD]

        s = tl.dot(q, k, input_precision=DOT_PRECISION) * scale_log2  # [BLOCK_M, TILE_N]
        visible = k_pos[None, :] <= q_pos[:, None]  # [BLOCK_M, TILE_N] causal
        if SLIDING_WINDOW > 0:
            visible = visible & (k_pos[None, :] > q_pos[:, None] - SLIDING_WINDOW)
        s = tl.where(visible, s, float("-inf"))  # [BLOCK_M, TILE_N]
        m_new = tl.maximum(m_i, tl.max(s, 1))  # [BLOCK_M]
        if NUM_SPLITS > 1 or SLIDING_WINDOW > 0:  # a step may hold no key visible to a row: p 0, not NaN
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # [BLOCK_M]
        else:  # key 0, in the first step, is visible to every row
            m_use = m_new
        p = tl.exp2(s - m_use[:, None])  # [BLOCK_M, TILE_N]
        alpha = tl.exp2(m_i - m_use)  # [BLOCK_M] rescale of what was accumulated so far
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PRECISION)
        m_i = m_new

    if NUM_SPLITS == 1:
        if SLIDING_WINDOW > 0:  # rows past the request's last query may see no key: 0 / 1, not 0 / 0
            l_i = tl.where(l_i > 0, l_i, 1.0)
        o = acc / l_i[:, None]  # [BLOCK_M, HEAD_PAD]
        tl.store(
            out_ptr + tok[:, None] * stride_o_tok + head[:, None] * stride_o_head + dims[None, :] * stride_o_dim,
            o.to(out_ptr.dtype.element_ty),
            mask=row_valid[:, None] & dim_valid[None, :],
        )
    else:  # unnormalized partials; combine_splits() merges the splits
        part = split * stride_part_split + tok * num_heads + head  # [BLOCK_M] (split, token, head) row
        tl.store(
            part_acc_ptr + part[:, None] * HEAD_SIZE + dims[None, :], acc, mask=row_valid[:, None] & dim_valid[None, :]
        )
        tl.store(part_ml_ptr + part * 2, m_i, mask=row_valid)
        tl.store(part_ml_ptr + part * 2 + 1, l_i, mask=row_valid)


def _dot_dtype(dtype: torch.dtype) -> tuple[tl.dtype, str]:
    """The operand dtype and precision for `tl.dot` on queries of `dtype` (the reference, too,
    computes in the query's dtype).

    fp32 uses IEEE products (not tf32) to match the reference. bf16 is widened to fp32 under
    TRITON_INTERPRET=1 only, because the interpreter multiplies bf16 bit patterns in `tl.dot`
    (triton-lang/triton#11584); on a GPU bf16 goes to the tensor cores as is.
    """
    if dtype == torch.float32 or (dtype == torch.bfloat16 and _INTERPRETED):
        return tl.float32, "ieee"
    return _TL_DTYPES[dtype], "tf32"


def _check_tile_size(name: str, value: int) -> None:
    """A tile edge (keys per step, rows per tile) must be a power of two >= 16: tl.arange needs a
    power of two and tl.dot at least 16."""
    if value < 16 or value & (value - 1):
        raise ValueError(f"{name} must be a power of two >= 16, got {value}")


def _tile_shape(group: int, block_m: int | None) -> tuple[int, int]:
    """(BLOCK_Q, BLOCK_M): query tokens per tile and tile rows for `group` query heads per kv head;
    `block_m` asks for more rows than the smallest tile (16, or the group rounded up)."""
    block_m = max(block_m or 16, triton.next_power_of_2(group))
    return max(1, block_m // group), block_m


@dataclass(slots=True)
class SplitPartials:
    """What the splits of one flash-decoding launch write, for `combine_splits`."""

    acc: torch.Tensor  # [num_splits, num_tokens, num_heads, head_size] fp32 unnormalized outputs
    ml: torch.Tensor  # [num_splits, num_tokens, num_heads, 2] fp32 running max (base 2) and denominator


def paged_attention_triton(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size]
    key_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32/int64, prefix sum of query lengths
    seq_lens: torch.Tensor,  # [num_reqs] full context length (history + new tokens)
    block_table: torch.Tensor,  # [num_reqs, max_blocks_per_req] physical block ids
    scale: float,
    out: torch.Tensor | None = None,  # [num_tokens, num_heads, head_size]
    tile_n: int | None = None,  # keys per inner step, a power of two >= 16; default DEFAULT_TILE_N or one block
    num_warps: int = 4,  # warps per program
    num_splits: int = 1,  # > 1: each query tile's keys are shared among this many programs
    sliding_window: int | None = None,  # keys a query sees, itself included (None: every earlier key)
    block_m: int | None = None,  # rows (query token x head in group) per tile, a power of two >= 16; None: 16
) -> torch.Tensor:
    """Varlen causal paged attention for a mixed prefill/decode batch, in one kernel launch
    (plus one combine when num_splits > 1).

    `tile_n`, `num_warps`, `num_splits` and `block_m` change only the speed (tools/gpu_check.py
    times them)."""
    if out is None:
        out = torch.empty_like(query)
    launch, partials = paged_attention_launch(
        query,
        key_cache,
        value_cache,
        query_start_loc,
        seq_lens,
        block_table,
        scale,
        out,
        tile_n,
        num_warps,
        num_splits,
        sliding_window,
        block_m,
    )
    if launch is not None:
        launch.run()
    if partials is not None:
        combine_splits(partials, out)
    return out


def paged_attention_launch(
    query,
    key_cache,
    value_cache,
    query_start_loc,
    seq_lens,
    block_table,
    scale: float,
    out: torch.Tensor,
    tile_n: int | None,
    num_warps: int,
    num_splits: int = 1,
    sliding_window: int | None = None,
    block_m: int | None = None,
) -> tuple[Launch | None, SplitPartials | None]:
    """The launch `paged_attention_triton` makes (same arguments) and the partials its splits
    write (None for one split); (None, None) when there is nothing to do."""
    num_tokens, num_heads, head_size = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    num_reqs = seq_lens.shape[0]
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
    if head_size < 16:
        raise ValueError(f"head_size must be at least 16 (tl.dot's smallest K), got {head_size}")
    if sliding_window is not None and sliding_window < 1:
        raise ValueError(f"sliding_window must be at least 1, got {sliding_window}")
    if key_cache.stride() != value_cache.stride():
        raise ValueError("key_cache and value_cache must have the same strides")
    if tile_n is None:
        tile_n = max(DEFAULT_TILE_N[key_cache.dtype], triton.next_power_of_2(block_size))
    _check_tile_size("tile_n", tile_n)
    if num_splits < 1:
        raise ValueError(f"num_splits must be at least 1, got {num_splits}")
    if block_m is not None:
        _check_tile_size("block_m", block_m)
    if num_tokens == 0 or num_reqs == 0:
        return None, None

    partials = None
    if num_splits > 1:
        partials = SplitPartials(
            acc=torch.empty(num_splits, num_tokens, num_heads, head_size, dtype=torch.float32, device=query.device),
            ml=torch.empty(num_splits, num_tokens, num_heads, 2, dtype=torch.float32, device=query.device),
        )
    part_acc, part_ml = (partials.acc, partials.ml) if partials else (out, out)  # unused with one split
    group = num_heads // num_kv_heads
    block_q, block_m = _tile_shape(group, block_m)
    dot_dtype, dot_precision = _dot_dtype(query.dtype)
    args = (
        out,
        query,
        key_cache,
        value_cache,
        query_start_loc,
        seq_lens,
        block_table,
        scale * LOG2E,
        num_reqs,
        *query.stride(),
        *out.stride(),
        *key_cache.stride(),
        block_table.stride(0),
        part_acc,
        part_ml,
        num_tokens * num_heads,
        num_heads,
    )
    meta = dict(
        GROUP=group,
        BLOCK_Q=block_q,
        BLOCK_M=block_m,
        BLOCK_SIZE=block_size,
        TILE_N=tile_n,
        HEAD_SIZE=head_size,
        HEAD_PAD=triton.next_power_of_2(head_size),
        SLIDING_WINDOW=sliding_window or 0,
        DOT_DTYPE=dot_dtype,
        DOT_PRECISION=dot_precision,
        NUM_SPLITS=num_splits,
        num_warps=num_warps,
    )
    grid = (num_tokens // block_q + num_reqs, num_kv_heads, num_splits)
    return Launch(_paged_attention_kernel, grid, args, meta), partials


def combine_splits(partials: SplitPartials, out: torch.Tensor) -> None:
    """Merge the splits' online-softmax partials into `out` ([num_tokens, num_heads, head_size])."""
    m, denom = partials.ml.unbind(-1)  # [num_splits, num_tokens, num_heads] each: running max and sum
    weight = torch.exp2(m - m.amax(0))  # [num_splits, num_tokens, num_heads]; 0 for splits with no visible key
    merged = (partials.acc * weight[..., None]).sum(0) / (denom * weight).sum(0)[..., None]  # [num_tokens, heads, dim]
    out.copy_(merged)

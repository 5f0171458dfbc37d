"""Triton kernel: varlen causal attention over the paged KV cache, prefill chunks and decodes alike.

Same contract as `kernels.reference.paged_attention_ref`. One launch serves the whole step:
program (t, h) computes query tile t for kv head h. A tile holds BLOCK_Q query tokens of one
request times the GROUP query heads that share kv head h (BLOCK_M = BLOCK_Q * GROUP rows, padded
to at least 16 for `tl.dot`), so a decode with GQA still fills the tile. Request r's tiles are
numbered from `query_start_loc[r] // BLOCK_Q + r`, which needs no host-side knowledge of the
query lengths: the grid is the upper bound `num_tokens // BLOCK_Q + num_reqs`, and the extra
programs exit at once. Each program walks the request's keys up to its last query's position in
tiles of TILE_N keys (one cache block for block sizes of 16 and more; several smaller blocks
otherwise, each key looked up through the block table), with an online (flash-attention)
softmax accumulated in fp32.
"""

import os

import torch
import triton
import triton.language as tl

from kernels.launch import Launch

# log2(e): the kernel works in base 2 (exp2) with the softmax scale folded into the scores.
LOG2E = 1.4426950408889634

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
    GROUP: tl.constexpr,  # query heads per kv head
    BLOCK_Q: tl.constexpr,  # query tokens per tile
    BLOCK_M: tl.constexpr,  # rows per tile: BLOCK_Q * GROUP, rounded up to a power of two >= 16
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    TILE_N: tl.constexpr,  # keys per inner step, a power of two >= 16 (by default one block)
    HEAD_SIZE: tl.constexpr,
    DOT_DTYPE: tl.constexpr,  # operand dtype of both tl.dot calls
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 operands (no tf32), else the default
):
    """Program (tile, kv_head): online-softmax attention of one query tile over its request's keys."""
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
    dims = tl.arange(0, HEAD_SIZE)  # [HEAD_SIZE]
    q = tl.load(
        query_ptr + tok[:, None] * stride_q_tok + head[:, None] * stride_q_head + dims[None, :] * stride_q_dim,
        mask=row_valid[:, None],
        other=0.0,
    ).to(DOT_DTYPE)  # [BLOCK_M, HEAD_SIZE]

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # [BLOCK_M] running max of scores (base 2)
    l_i = tl.zeros([BLOCK_M], tl.float32)  # [BLOCK_M] running softmax denominator
    acc = tl.zeros([BLOCK_M, HEAD_SIZE], tl.float32)  # [BLOCK_M, HEAD_SIZE] running numerator

    # Keys after the tile's last query are never visible; the first tile holds key 0, visible to
    # every row, so every row's running max is finite after the first step.
    last_pos = context_len + tl.minimum((q_tile + 1) * BLOCK_Q, q_len) - 1
    num_kv_tiles = last_pos // TILE_N + 1
    offs_n = tl.arange(0, TILE_N)  # [TILE_N]
    bt_row = block_table_ptr + req.to(tl.int64) * stride_bt_req
    head_off = kv_head.to(tl.int64) * stride_c_head
    for j in range(0, num_kv_tiles):
        k_pos = j * TILE_N + offs_n  # [TILE_N] absolute key position
        in_seq = k_pos < seq_len  # [TILE_N] slots past seq_len hold garbage: never load them
        block = tl.load(bt_row + k_pos // BLOCK_SIZE, mask=in_seq, other=0).to(tl.int64)  # [TILE_N]
        slot = block * stride_c_block + (k_pos % BLOCK_SIZE) * stride_c_off + head_off  # [TILE_N]
        k = tl.load(
            key_cache_ptr + slot[None, :] + dims[:, None] * stride_c_dim,
            mask=in_seq[None, :],
            other=0.0,
        ).to(DOT_DTYPE)  # [HEAD_SIZE, TILE_N]
        v = tl.load(
            value_cache_ptr + slot[:, None] + dims[None, :] * stride_c_dim,
            mask=in_seq[:, None],
            other=0.0,
        ).to(DOT_DTYPE)  # [TILE_N, HEAD_SIZE]

        s = tl.dot(q, k, input_precision=DOT_PRECISION) * scale_log2  # [BLOCK_M, TILE_N]
        s = tl.where(k_pos[None, :] <= q_pos[:, None], s, float("-inf"))  # [BLOCK_M, TILE_N] causal
        m_new = tl.maximum(m_i, tl.max(s, 1))  # [BLOCK_M]
        p = tl.exp2(s - m_new[:, None])  # [BLOCK_M, TILE_N]
        alpha = tl.exp2(m_i - m_new)  # [BLOCK_M] rescale of what was accumulated so far
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PRECISION)
        m_i = m_new

    o = acc / l_i[:, None]  # [BLOCK_M, HEAD_SIZE]
    tl.store(
        out_ptr + tok[:, None] * stride_o_tok + head[:, None] * stride_o_head + dims[None, :] * stride_o_dim,
        o.to(out_ptr.dtype.element_ty),
        mask=row_valid[:, None],
    )


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


def _tile_shape(group: int) -> tuple[int, int]:
    """(BLOCK_Q, BLOCK_M): query tokens per tile and tile rows for `group` query heads per kv head."""
    block_m = max(16, triton.next_power_of_2(group))
    return max(1, block_m // group), block_m


def paged_attention_triton(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size]
    key_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    value_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_size]
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32/int64, prefix sum of query lengths
    seq_lens: torch.Tensor,  # [num_reqs] full context length (history + new tokens)
    block_table: torch.Tensor,  # [num_reqs, max_blocks_per_req] physical block ids
    scale: float,
    out: torch.Tensor | None = None,  # [num_tokens, num_heads, head_size]
    tile_n: int | None = None,  # keys per inner step, a power of two >= 16; default one block (>= 16)
    num_warps: int = 4,  # warps per program
) -> torch.Tensor:
    """Varlen causal paged attention for a mixed prefill/decode batch, in one kernel launch.

    `tile_n` and `num_warps` change only the speed (kernels.gpu_check times the variants)."""
    if out is None:
        out = torch.empty_like(query)
    launch = paged_attention_launch(query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale,
                                    out, tile_n, num_warps)
    if launch is not None:
        launch.run()
    return out


def paged_attention_launch(query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale: float,
                           out: torch.Tensor, tile_n: int | None, num_warps: int) -> Launch | None:
    """The launch `paged_attention_triton` makes (same arguments), or None when there is nothing to do."""
    num_tokens, num_heads, head_size = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    num_reqs = seq_lens.shape[0]
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
    if head_size < 16 or head_size & (head_size - 1):
        raise ValueError(f"head_size must be a power of two >= 16, got {head_size}")
    if key_cache.stride() != value_cache.stride():
        raise ValueError("key_cache and value_cache must have the same strides")
    if tile_n is None:
        tile_n = max(16, triton.next_power_of_2(block_size))
    if tile_n < 16 or tile_n & (tile_n - 1):
        raise ValueError(f"tile_n must be a power of two >= 16, got {tile_n}")
    if num_tokens == 0 or num_reqs == 0:
        return None

    group = num_heads // num_kv_heads
    block_q, block_m = _tile_shape(group)
    dot_dtype, dot_precision = _dot_dtype(query.dtype)
    args = (
        out, query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale * LOG2E, num_reqs,
        *query.stride(), *out.stride(), *key_cache.stride(), block_table.stride(0),
    )
    meta = dict(
        GROUP=group, BLOCK_Q=block_q, BLOCK_M=block_m, BLOCK_SIZE=block_size, TILE_N=tile_n, HEAD_SIZE=head_size,
        DOT_DTYPE=dot_dtype, DOT_PRECISION=dot_precision, num_warps=num_warps,
    )
    return Launch(_paged_attention_kernel, (num_tokens // block_q + num_reqs, num_kv_heads), args, meta)

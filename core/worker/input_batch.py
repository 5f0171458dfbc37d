"""The model runner's persistent batch: per-request rows kept across steps, updated by deltas."""

import numpy as np

from enginetui.core.sampling_params import SamplingParams


class InputBatch:
    """Row-per-request CPU arrays; rows stay packed at the front (a removed row is filled by the last)."""

    def __init__(self, max_num_reqs: int, max_model_len: int, max_blocks_per_req: int) -> None:
        self.max_num_reqs = max_num_reqs  # capacity in rows
        self.token_ids = np.zeros((max_num_reqs, max_model_len), dtype=np.int64)  # [rows, max_model_len]
        self.num_tokens = np.zeros(max_num_reqs, dtype=np.int64)  # [rows] known tokens per row
        self.num_prompt_tokens = np.zeros(max_num_reqs, dtype=np.int64)  # [rows]
        self.num_computed_tokens = np.zeros(max_num_reqs, dtype=np.int64)  # [rows] cached before this step
        self.block_table = np.zeros((max_num_reqs, max_blocks_per_req), dtype=np.int64)  # [rows, max_blocks]
        self.num_blocks = np.zeros(max_num_reqs, dtype=np.int64)  # [rows] block table lengths
        self.req_ids: list[str] = []  # row -> request id
        self.params: list[SamplingParams] = []  # row -> sampling params
        self.eos_ids: list[list[int]] = []  # row -> EOS token ids
        self.index: dict[str, int] = {}  # request id -> row

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    def add(
        self,
        req_id: str,
        token_ids: list[int],
        num_prompt: int,
        params: SamplingParams,
        eos_ids: list[int],
        block_ids: list[int],
        num_computed: int,
    ) -> None:
        row = len(self.req_ids)
        if row >= self.max_num_reqs:
            raise RuntimeError(f"input batch full ({self.max_num_reqs} rows)")
        self.req_ids.append(req_id)
        self.params.append(params)
        self.eos_ids.append(eos_ids)
        self.index[req_id] = row
        n = len(token_ids)
        self.token_ids[row, :n] = token_ids
        self.num_tokens[row] = n
        self.num_prompt_tokens[row] = num_prompt
        self.num_computed_tokens[row] = num_computed
        self.num_blocks[row] = 0
        self.append_blocks(row, block_ids)

    def append_tokens(self, row: int, token_ids: list[int]) -> None:
        start = self.num_tokens[row]
        self.token_ids[row, start : start + len(token_ids)] = token_ids
        self.num_tokens[row] = start + len(token_ids)

    def append_blocks(self, row: int, block_ids: list[int]) -> None:
        start = self.num_blocks[row]
        self.block_table[row, start : start + len(block_ids)] = block_ids
        self.num_blocks[row] = start + len(block_ids)

    def remove(self, req_id: str) -> None:
        """Drop a request's row, moving the last row into its place."""
        row = self.index.pop(req_id, None)
        if row is None:
            return
        last = len(self.req_ids) - 1
        if row != last:
            moved = self.req_ids[last]
            for arr in (
                self.token_ids,
                self.num_tokens,
                self.num_prompt_tokens,
                self.num_computed_tokens,
                self.block_table,
                self.num_blocks,
            ):
                arr[row] = arr[last]
            self.req_ids[row] = moved
            self.params[row] = self.params[last]
            self.eos_ids[row] = self.eos_ids[last]
            self.index[moved] = row
        self.req_ids.pop()
        self.params.pop()
        self.eos_ids.pop()

    def output_tokens(self, row: int) -> list[int]:
        return self.token_ids[row, self.num_prompt_tokens[row] : self.num_tokens[row]].tolist()

    def prompt_tokens(self, row: int) -> list[int]:
        return self.token_ids[row, : self.num_prompt_tokens[row]].tolist()

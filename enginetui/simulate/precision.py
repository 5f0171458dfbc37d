"""Bytes per weight and per KV value for the dtypes the roofline model takes."""

WEIGHT_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}  # --weight-dtype -> bytes per weight
KV_BYTES = {"auto": None, "bf16": 2, "fp16": 2, "fp8": 1}  # --kv-cache-dtype -> bytes per value (auto: 2)
ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8": "fp8", "fp8_e4m3": "fp8"}


def weight_bytes(dtype: str) -> int:
    dtype = ALIASES.get(dtype, dtype)
    if dtype not in WEIGHT_BYTES:
        raise ValueError(f"weight dtype must be one of {', '.join(WEIGHT_BYTES)}, got {dtype!r}")
    return WEIGHT_BYTES[dtype]


def kv_bytes(dtype: str) -> int:
    """KV cache bytes per value: fp8 when asked, else 2 (vLLM keeps the KV cache in 16 bits by default,
    fp8 weights or not)."""
    dtype = ALIASES.get(dtype, dtype)
    if dtype not in KV_BYTES:
        raise ValueError(f"kv cache dtype must be one of {', '.join(KV_BYTES)}, got {dtype!r}")
    return KV_BYTES[dtype] or 2

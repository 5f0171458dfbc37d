"""Accelerators the roofline model knows: peak dense FLOP/s, memory bandwidth and size, interconnect.

Figures are the vendors' datasheet peaks for the SXM parts (dense, i.e. without the 2:4 sparsity
doubling; L4 is a PCIe card). Memory is what `torch.cuda.mem_get_info` reports as total, which is
what vLLM's `--gpu-memory-utilization` takes a share of.
"""

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One accelerator's peaks."""

    name: str  # "h200"
    description: str  # what part exactly
    bf16_flops: float  # peak dense bf16 / fp16 tensor FLOP/s
    fp8_flops: float | None  # peak dense fp8 tensor FLOP/s (None: no fp8 tensor cores)
    memory_bandwidth: float  # HBM / GDDR bandwidth, bytes/s
    memory_bytes: int  # total device memory as CUDA reports it, bytes
    link_bandwidth: float  # per-GPU all-reduce bandwidth (NVLink, or PCIe for L4), bytes/s one way
    link_latency_s: float  # fixed cost of one all-reduce between GPUs, seconds


ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator("h200", "NVIDIA H200 SXM 141 GB HBM3e", 989.4e12, 1978.9e12, 4.8e12, int(139.8 * GIB), 450e9, 8e-6),
        Accelerator("h100", "NVIDIA H100 SXM 80 GB HBM3", 989.4e12, 1978.9e12, 3.35e12, int(79.2 * GIB), 450e9, 8e-6),
        Accelerator("a100", "NVIDIA A100 SXM 80 GB HBM2e", 312e12, None, 2.039e12, int(79.2 * GIB), 300e9, 10e-6),
        Accelerator("l4", "NVIDIA L4 24 GB GDDR6 (PCIe)", 121e12, 242e12, 300e9, int(22.0 * GIB), 25e9, 20e-6),
    )
}


def accelerator(name: str) -> Accelerator:
    try:
        return ACCELERATORS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown hardware {name!r}: choose one of {', '.join(ACCELERATORS)}") from None

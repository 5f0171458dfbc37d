"""A Triton kernel launch as data: what the launchers run, and what tools/aot_check.py compiles."""

from dataclasses import dataclass


@dataclass(slots=True)
class Launch:
    """One kernel launch, as `kernel[grid](*args, **meta)`; tools/aot_check.py compiles the same."""

    kernel: object  # the @triton.jit function
    grid: tuple[int, ...]  # programs per grid axis
    args: tuple  # the runtime arguments, in the kernel's order
    meta: dict  # the constexpr arguments and num_warps

    def run(self) -> None:
        self.kernel[self.grid](*self.args, **self.meta)

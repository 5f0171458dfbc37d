"""How fast the simulator runs: `python tools/sim_speed.py [N ...]` simulates N ShareGPT
requests (Llama-3.1-8B, bf16, an H200-sized pool, all arriving at once unless --request-rate) for
each N, and prints the wall and CPU seconds of the simulation alone (the workload is drawn first).
On a machine shared with other work the CPU seconds are the steadier figure."""

import argparse
import math
import time


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10000])
    parser.add_argument("--request-rate", type=float, default=math.inf)
    args = parser.parse_args(argv)
    from enginetui.simulate.api import simulate

    simulate(dataset="sharegpt", num_prompts=10)  # imports, dataset lengths cached
    print(f"{'requests':>9} {'steps':>8} {'wall s':>8} {'cpu s':>8} {'us/req-step':>12} {'simulated s':>12}")
    for n in args.sizes:
        cpu0 = time.process_time()
        result = simulate(dataset="sharegpt", num_prompts=n, request_rate=args.request_rate)
        cpu = time.process_time() - cpu0
        m = result.summary
        req_steps = sum(result.run.times.num_output)  # one request-step per generated token, about
        print(
            f"{n:>9} {m.num_steps:>8} {m.wall_seconds:>8.1f} {cpu:>8.1f} {1e6 * cpu / max(req_steps, 1):>12.1f} "
            f"{m.duration_s:>12.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()

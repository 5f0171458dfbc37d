"""Predicted against measured: a recorded run of this engine and the simulator's run of the same requests.

    python tools/sim_accuracy.py RUN.etrec --step-times FIT.json

prints each figure measured, predicted and the error (enginetui/simulate/measured.py). With
`--step-times recorded` every figure matches; with a fitted or roofline model the differences are the
model's error.
"""

import argparse

from enginetui.simulate.measured import compare_recording, fewer_threads, fewer_threads_line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="a recorded run of this engine against its simulation")
    parser.add_argument("recording")
    parser.add_argument("--step-times", default="recorded", help="recorded, roofline or a --calibrate JSON file")
    args = parser.parse_args(argv)
    print(f"{'figure':<20}{'measured':>12}{'predicted':>12}{'error':>9}")
    for label, m, p, err in compare_recording(args.recording, args.step_times):
        print(f"{label:<20}{m:>12.2f}{p:>12.2f}{err:>+8.1f}%")
    if line := fewer_threads_line(fewer_threads(args.recording)):
        print(line)


if __name__ == "__main__":
    main()

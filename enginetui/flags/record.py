"""`--record FILE` on the commands that start an engine (`enginetui`, `enginetui serve`): start
recording, say where, and say what was written when the command ends."""

import sys


def start_or_say(engine, path: str, prog: str):
    """engine.start_recording(path); the Recorder, or None after one line on stderr saying why not."""
    try:
        recorder = engine.start_recording(path, source=" ".join(["enginetui", *sys.argv[1:]]))
    except (OSError, ValueError) as exc:
        print(f"{prog}: cannot record to {path}: {exc}", file=sys.stderr)
        return None
    print(f"{prog}: recording every step event to {path}", file=sys.stderr)
    return recorder


def close_and_say(recorder, prog: str) -> None:
    """Close the recording (after the engine's shutdown) and say what it holds and how to open it."""
    summary = recorder.close()
    print(
        f"{prog}: recorded {summary.num_events} events to {summary.path} ({summary.num_bytes / 2**20:.1f} MiB); "
        f"replay it with: enginetui replay {summary.path}",
        file=sys.stderr,
    )

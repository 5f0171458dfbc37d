"""`enginetui replay FILE`: the dashboard on a recording.

`enginetui/cli.py` calls `add_replay_subparser`; the app is imported when the command runs.
"""

import argparse
import os
import sys

from enginetui.interrupt import sigterm_quits


def add_replay_subparser(subparsers: argparse._SubParsersAction) -> None:
    replay = subparsers.add_parser(
        "replay",
        help="open the dashboard on a recording (--record FILE): step, jump, play",
        description="The dashboard on a recording made with --record: every panel shows the run exactly as it was "
        "live, one event at a time. Keys: → / ← the next / previous engine step, . and , one event, "
        "Home / End the ends, g jumps to a step (123), a time (12.5s) or an event (e40), space plays "
        "(- and + from 0.25x to 8x), t shows or hides the timeline, ? lists every key. A recording of "
        "`attach --vllm` (a real vLLM: its probe's events or the outside rebuild's) replays the same way.",
    )
    replay.add_argument("file", help="the recording")
    replay.add_argument(
        "--at", metavar="WHERE", help="open at a step (123), a time into the recording (12.5s) or an event (e40)"
    )
    replay.add_argument(
        "--keep-idle",
        action="store_true",
        help="play idle stretches (nothing running, waiting or arriving) at their recorded length "
        "(default: each plays as 2 s at most)",
    )
    replay.set_defaults(func=run_replay)


def open_session(path: str):
    """(session, notes about the file) for a recording; raises RecordingError or OSError."""
    from enginetui.core.record.reader import read_recording
    from enginetui.core.record.tokenizer_files import unpack_tokenizer
    from enginetui.replay.session import ReplaySession

    recording = read_recording(path)
    if not len(recording):
        raise OSError(f"{path} holds no events")
    return ReplaySession(recording, unpack_tokenizer(recording.header.tokenizer)), recording.describe_problems()


def run_replay(args: argparse.Namespace) -> int:
    from enginetui.simulate.fleet_watch import is_fleet_recording

    if os.path.isfile(args.file) and is_fleet_recording(args.file):  # `enginetui simulate --replicas N --record`
        from enginetui.simulate.fleet_watch import run_fleet_replay

        return run_fleet_replay(args.file, args.at, keep_idle=args.keep_idle)
    from enginetui.core.record.format import RecordingError
    from enginetui.replay.app import parse_target
    from enginetui.replay.with_vllm import replay_app
    from enginetui.terminal_check import REPLAY_INSTEAD, refuse_without_terminal

    try:
        session, notes = open_session(args.file)
    except (OSError, RecordingError) as exc:
        print(f"enginetui replay: {exc}", file=sys.stderr)
        return 2
    start = 0
    if args.at:
        target = parse_target(args.at, session)
        if target.index is None:
            print(f"enginetui replay: --at: {target.error}", file=sys.stderr)
            return 2
        start = target.index
    if refuse_without_terminal("enginetui replay", REPLAY_INSTEAD):
        return 2
    for note in notes:  # also on screen, but the terminal keeps them after the app quits
        print(f"enginetui replay: {note}", file=sys.stderr)
    app = replay_app(session, notes=notes, start=start, keep_idle=args.keep_idle)
    with sigterm_quits(app):
        app.run()
    return app.return_code or 0

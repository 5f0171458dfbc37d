"""`enginetui export FILE [--format perfetto] [OUT.json]` | `enginetui export FILE --format csv [OUT_DIR]`.

`enginetui/cli.py` calls `add_export_subparser`; the exporters are imported when the command runs.
"""

import argparse
import json
import os
import sys


def add_export_subparser(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser(
        "export",
        help="write a recording as a Perfetto trace (JSON) or CSV tables",
        description="perfetto: a Chrome trace-event JSON file for ui.perfetto.dev or chrome://tracing (a track "
        "per request with its phases; engine steps split into schedule / execute / update; counters "
        "for KV usage, running, waiting and batch tokens; a vLLM's /metrics readings where it recorded them). csv: OUT is a directory; steps.csv has a "
        "row per engine step, requests.csv a row per request.",
    )
    export.add_argument("file", help="the recording (--record FILE)")
    export.add_argument(
        "--format", default="perfetto", choices=("perfetto", "csv"), help="what to write (default: perfetto)"
    )
    export.add_argument(
        "out",
        nargs="?",
        help="the JSON file (perfetto) or the directory (csv) to write (default: beside FILE, "
        "FILE's name without its extension + .perfetto.json, or + -csv)",
    )
    export.intermixed = True  # OUT may follow --format, as docs/record-replay.md writes it
    export.set_defaults(func=run_export)


def default_out(file: str, fmt: str) -> str:
    """Where an export goes when no OUT is given: beside the recording, named after it."""
    stem = os.path.splitext(file)[0]
    return stem + (".perfetto.json" if fmt == "perfetto" else "-csv")


def run_export(args: argparse.Namespace) -> int:
    args.out = args.out or default_out(args.file, args.format)
    from enginetui.core.record.format import RecordingError
    from enginetui.core.record.reader import read_recording

    try:
        recording = read_recording(args.file)
    except (OSError, RecordingError) as exc:
        print(f"enginetui export: {exc}", file=sys.stderr)
        return 2
    if recording.header.replicas:
        print(
            f"enginetui export: {args.file} is a simulated fleet's recording ({len(recording.header.replicas)} "
            f"engines): it opens with `enginetui replay`; export takes one engine's",
            file=sys.stderr,
        )
        return 2
    for note in recording.describe_problems():
        print(f"enginetui export: {note}", file=sys.stderr)
    try:
        if args.format == "perfetto":
            from enginetui.export.perfetto import perfetto_trace

            with open(args.out, "w") as f:
                json.dump(perfetto_trace(recording), f)
            written = [args.out]
        else:
            from enginetui.export.tables import write_tables

            written = [str(p) for p in write_tables(recording, args.out)]
    except OSError as exc:
        print(f"enginetui export: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    print(f"enginetui export: {len(recording)} events of {args.file} -> {', '.join(written)}", file=sys.stderr)
    return 0

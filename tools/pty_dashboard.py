"""The dashboard as a person runs it, in a pseudo-terminal, its screen saved: `python tools/pty_dashboard.py
OUT.svg [--after S] [-- ENGINETUI FLAGS ...]`.

Starts `python -m enginetui FLAGS` in a 120x36 pseudo-terminal with Textual's own screenshot timer
(TEXTUAL_SCREENSHOT: the screen saved as SVG S seconds after start, then the app exits). Once the screen
says the engine is running, it presses ^b (a burst of requests) and again every few seconds, so the
picture shows a loaded engine. The GPU session runs it with `--device cuda` (kernels/gpu_session.sh);
tools/screenshots.py draws the README's scenes headless instead (Textual's test driver, state by state).
"""

import argparse
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time

COLUMNS, ROWS = 120, 36
BURST_EVERY_S = 2.0  # seconds between ^b presses once the engine runs
READY = b"running"  # the title bar's state once the engine is ready (dashboard/app.py)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the SVG to write")
    parser.add_argument("--after", type=int, default=40, help="seconds from start to the screenshot (default 40)")
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1 :] if "--" in argv else []  # enginetui's flags
    args = parser.parse_args(argv[: len(argv) - len(flags) - (1 if "--" in argv else 0)])
    out = os.path.abspath(args.out)
    env = dict(
        os.environ,
        TERM="xterm-256color",
        COLUMNS=str(COLUMNS),
        LINES=str(ROWS),
        TEXTUAL_SCREENSHOT=str(args.after),
        TEXTUAL_SCREENSHOT_LOCATION=os.path.dirname(out),
        TEXTUAL_SCREENSHOT_FILENAME=os.path.basename(out),
    )
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "enginetui", *flags],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        start_new_session=True,  # the pty becomes its controlling terminal
    )
    os.close(follower)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a time limit: the finally below stops the app
    start = time.monotonic()
    deadline = start + args.after + 60  # the screenshot, then the engine's shutdown
    seen, ready_at, bursts, last_burst = b"", None, 0, 0.0
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            readable, _, _ = select.select([leader], [], [], 0.2)
            if readable:
                try:
                    seen = (seen + os.read(leader, 65536))[-4096:]  # the screen's latest updates
                except OSError:  # the app closed its terminal
                    break
            now = time.monotonic()
            if ready_at is None and READY in seen:
                ready_at = now
                print(f"engine running after {now - start:.1f} s", flush=True)
            if ready_at is not None and now - last_burst >= BURST_EVERY_S and now - start < args.after - 0.5:
                os.write(leader, b"\x02")  # ^b
                bursts, last_burst = bursts + 1, now
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        print("the dashboard did not exit after its screenshot", file=sys.stderr)
        return 1
    finally:
        if proc.poll() is None:  # SIGTERM first: the app shuts its engine down
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        os.close(leader)
    if ready_at is None:
        print(f"the screen never said {READY.decode()!r}: the engine did not start in {args.after} s", file=sys.stderr)
    if not os.path.exists(out):
        print(f"no screenshot at {out} (dashboard exit {proc.returncode})", file=sys.stderr)
        return 1
    print(f"{out}: {os.path.getsize(out)} bytes, {bursts} bursts, dashboard exit {proc.returncode}")
    return 0 if ready_at is not None else 1


if __name__ == "__main__":
    sys.exit(main())

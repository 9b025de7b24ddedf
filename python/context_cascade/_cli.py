"""The `cascade` console script: the same command as the Rust binary, run in process."""

from __future__ import annotations

import signal
import sys

from . import _native


def main() -> None:
    """Runs `cascade` with `sys.argv` and exits with its code."""
    # Ctrl-C and SIGTERM behave as for the binary: the proxy installs its own handlers
    # (stopping cleanly); any other command is simply ended. Python's default handler would
    # only set a flag that no Python code checks while Rust holds the thread.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_native.run(["cascade", *sys.argv[1:]]))


if __name__ == "__main__":
    main()

"""Small helpers shared by the command-line tools: ROS argument splitting, stopping child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Optional


def split_ros_args(argv: Optional[list] = None) -> tuple[list, list]:
    """(tool arguments, ROS arguments): everything from ``--ros-args`` on is for rclpy."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--ros-args" in argv:
        i = argv.index("--ros-args")
        return argv[:i], argv[i:]
    return argv, []


def stop_process_group(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    """Stops a child started with ``start_new_session=True``: SIGINT to its process group, then
    SIGTERM after ``timeout`` seconds, then SIGKILL after 5 more; returns its exit code."""
    if proc.poll() is not None:
        return proc.returncode
    for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait(5.0)

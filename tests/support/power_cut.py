"""A power cut, simulated: a data directory mounted through `power_cut_fs.py`.

`PowerCutMount.cut()` kills the filesystem's process, so every write not yet
synced is lost, and detaches the mount; the backing directory then holds what
a disk would after the power came back. `stall()` makes every sync wait, as on a
volume that stopped answering, until `resume()`. `unavailable()` says why it cannot run
here (no `/dev/fuse`, no `fusermount3`, no libfuse 3), for a skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def unavailable() -> str | None:
    """Why a power cut cannot be simulated here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian's fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as error:
        return f"mfusepy or libfuse 3 is missing: {error}"
    return None


class PowerCutMount:
    """`backing` mounted at `mountpoint` through `PowerCutFs`, in a process of its own."""

    def __init__(self, backing: Path, mountpoint: Path, log: Path) -> None:
        self.backing, self.mountpoint, self._log = backing, mountpoint, log
        self._stall_flag = log.with_name(f"{log.name}.stalled")  # outside the mount
        self._process: subprocess.Popen[bytes] | None = None

    def mount(self, timeout_s: float = 10.0) -> None:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.power_cut_fs",
                    self.backing,
                    self.mountpoint,
                    self._stall_flag,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=Path(__file__).resolve().parents[2],
            )
        deadline = time.monotonic() + timeout_s
        while not self.mounted():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"power-cut filesystem did not mount: {self._log.read_text()}")
            time.sleep(0.05)

    def stall(self) -> None:
        """Every sync waits from now on (the ones under way too) until `resume()`."""
        self._stall_flag.touch()

    def resume(self) -> None:
        """The volume answers again: the syncs waiting go through."""
        self._stall_flag.unlink(missing_ok=True)

    def cut(self) -> None:
        """The power goes: every write not synced is lost, the mount is gone (a stall too)."""
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()
            self._process = None
        self.resume()
        if self.mounted():  # a dead FUSE mount still holds its place until detached
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=True)

    def mounted(self) -> bool:
        """Whether the kernel lists the mount (its `stat` fails once the process is dead)."""
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            return any(line.split()[1] == str(self.mountpoint) for line in mounts)

"""The chart's pod at the runbook's scale, its memory as the kernel counts it.

The figures the kubelet and the OOM killer act on are the container cgroup's, not the
processes' summed RSS: cgroup v2 `memory.current` (v1: `memory.usage_in_bytes`, the same
counter: anonymous memory plus the page cache the cgroup is charged for, the store's
mapped pages among it) against `memory.max` (v1: `memory.limit_in_bytes`), and the
working set the kubelet reports and evicts by (the usage less the inactive file pages).

1. A store of `--namespaces` x `--per-namespace` memories (10,000 x 20, docs/runbook.md's
   scale) with the token vectors the default ranking keeps, built offline as
   benchmarks/namespaces.py builds it, copied into a podman volume owned by uid 10001 and
   dropped from the page cache, so that the pod's own reads are charged to it.
2. The chart rendered with its defaults (the image, that volume as
   `embedded.persistence.existingClaim`, `--set` more) and run by `podman kube play`
   with its memory limit; the cgroup's figures after start and a settle.
3. `--mixed` s of mixed load (8 callers, half commits, half 3-namespace searches): the
   cgroup's peak (the kernel's own, reset before; and polled every 0.1 s) and its usage
   after.
4. The runbook's backup on the running pod (`memory-plugin-vector export --from-url
   http://127.0.0.1:9100 --out -` by `podman exec`, inside the pod's limit): its peak,
   over the usage before it, its time and size.

Run as root after scripts/test-image (needs podman, helm in .tools/bin, the image):
    python -m benchmarks.kube_memory [--mixed 30] [--set config.engineWorkers=4]
        [--store DIR]
    (about 9 minutes on 2 cores, 7 of them building the store; 2 with --store built)
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from benchmarks import load
from benchmarks.common import machine
from benchmarks.namespaces_store import DISTINCT
from benchmarks.namespaces_store import build_store
from benchmarks.namespaces_store import measure_model
from benchmarks.namespaces_store import mixed_load

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "memory-plugin-vector"
RELEASE = "mpv-bench"
VOLUME = f"{RELEASE}-data"
MIB = 1024 * 1024
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""


def run(*args: str) -> str:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args[:4])}... failed: {result.stderr[-2000:]}")
    return result.stdout


class Cgroup:
    """A container's memory cgroup, v2 or v1, as the kernel counts it."""

    def __init__(self, container_id: str) -> None:
        v2 = glob.glob(f"/sys/fs/cgroup/**/*{container_id}*/memory.current", recursive=True)
        v1 = glob.glob(
            f"/sys/fs/cgroup/memory/**/*{container_id}*/memory.usage_in_bytes", recursive=True
        )
        if v2:
            self.dir, self.v2 = Path(v2[0]).parent, True
        elif v1:
            self.dir, self.v2 = Path(v1[0]).parent, False
        else:
            raise SystemExit(f"no memory cgroup found for container {container_id}")
        self.version = "v2 memory.current" if self.v2 else "v1 memory.usage_in_bytes"

    def _read(self, name: str) -> str:
        return (self.dir / name).read_text().strip()

    def current(self) -> int:
        return int(self._read("memory.current" if self.v2 else "memory.usage_in_bytes"))

    def limit(self) -> int | None:
        raw = self._read("memory.max" if self.v2 else "memory.limit_in_bytes")
        return None if raw == "max" or int(raw) >= 2**60 else int(raw)

    def peak(self) -> int | None:
        """The kernel's high-water mark since the last reset_peak (None where it has none)."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        return int(self._read(name)) if (self.dir / name).exists() else None

    def reset_peak(self) -> None:
        if not self.v2:
            (self.dir / "memory.max_usage_in_bytes").write_text("0")

    def stat(self) -> dict[str, int]:
        pairs = (line.split() for line in self._read("memory.stat").splitlines())
        return {key: int(value) for key, value in pairs}

    def report(self) -> str:
        stat = self.stat()
        anon, file = ("anon", "file") if self.v2 else ("total_rss", "total_cache")
        inactive = stat.get("inactive_file" if self.v2 else "total_inactive_file", 0)
        mapped = stat.get("file_mapped" if self.v2 else "total_mapped_file", 0)
        current = self.current()
        return (
            f"{current / MIB:,.0f} MiB (anonymous {stat.get(anon, 0) / MIB:,.0f}, file "
            f"{stat.get(file, 0) / MIB:,.0f} of which mapped {mapped / MIB:,.0f}); working set "
            f"{(current - inactive) / MIB:,.0f} MiB"
        )


@contextmanager
def polled_peak(cgroup: Cgroup) -> Iterator[list[int]]:
    """The cgroup's usage polled every 0.1 s while the block runs: [its maximum]."""
    found = [cgroup.current()]
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.1):
            found[0] = max(found[0], cgroup.current())

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join()
        found[0] = max(found[0], cgroup.current())


def fill_volume(data: Path) -> None:
    """The store into a new volume, its pages then dropped from the page cache: a page is
    charged to the cgroup that reads it first, so the pod's own reads must fault them in
    (as on a node after a restart), not this copy's."""
    run("podman", "volume", "rm", "-f", VOLUME)
    run("podman", "volume", "create", VOLUME)
    mountpoint = run("podman", "volume", "inspect", VOLUME, "--format", "{{.Mountpoint}}").strip()
    run("cp", "-a", f"{data}/.", mountpoint)
    run("chown", "-R", "10001:10001", mountpoint)
    os.sync()
    for directory, _, files in os.walk(mountpoint):
        for name in files:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def render(image: str, sets: list[str], out: Path) -> tuple[str, str]:
    helm = ROOT / ".tools" / "bin" / "helm"
    args = [str(helm), "template", RELEASE, str(CHART), "--namespace", "default"]
    repository, tag = image.rsplit(":", 1)
    for item in [
        f"image.repository={repository}",
        f"image.tag={tag}",
        f"embedded.persistence.existingClaim={VOLUME}",
        *sets,
    ]:
        args += ["--set", item]
    objects = [o for o in yaml.safe_load_all(run(*args)) if o]
    played = [o for o in objects if o["kind"] in ("ConfigMap", "Deployment")]
    out.write_text(yaml.safe_dump_all(played))
    [deployment] = [o for o in played if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    print(f"  the chart's resources: {json.dumps(container['resources'])}")
    name = deployment["metadata"]["name"]
    return f"{name}-pod-0", f"{name}-pod-0-{container['name']}"


def wait_healthy(url: str, limit_s: float = 300) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        try:
            with urllib.request.urlopen(f"{url}/v1/health", timeout=2) as response:
                if response.status == 200:
                    return time.perf_counter() - started
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"no healthy answer from {url} within {limit_s:.0f} s")


def share(value: int, limit: int | None) -> str:
    return f"{value / MIB:,.0f} MiB" + (f", {value / limit:.2f} of the limit" if limit else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", default="localhost/memory-plugin-vector:test-image")
    parser.add_argument("--namespaces", type=int, default=10_000)
    parser.add_argument("--per-namespace", type=int, default=20)
    parser.add_argument("--mixed", type=float, default=30.0, help="s of mixed load")
    parser.add_argument("--set", action="append", default=[], help="more chart values")
    parser.add_argument(
        "--store", type=Path, help="keep the built store here, and reuse it where it is"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (podman kube play)")
    print(f"kube_memory.py: the chart's pod under podman kube play ({machine()})")
    with tempfile.TemporaryDirectory(prefix="kube-memory-") as tmp:
        os.environ["CONTAINERS_CONF"] = str(Path(tmp) / "containers.conf")
        Path(os.environ["CONTAINERS_CONF"]).write_text(CONTAINERS_CONF)
        names = load.namespace_names(args.namespaces, seed=1234)
        total = len(names) * args.per_namespace
        started = time.perf_counter()
        data = args.store or Path(tmp) / "data"
        if not data.is_dir():
            model = measure_model(DISTINCT, tokens=True)
            asyncio.run(build_store(data, names, args.per_namespace, model))
            del model
        fill_volume(data)
        print(
            f"store: {len(names):,} namespaces, {total:,} memories with token vectors, "
            f"built and copied into volume {VOLUME} in {time.perf_counter() - started:.0f} s"
        )
        kube = Path(tmp) / "kube.yaml"
        pod, container = render(args.image, args.set, kube)
        run("podman", "pod", "rm", "-f", pod)
        try:
            run("podman", "kube", "play", str(kube))
            ip = run(
                "podman",
                "inspect",
                container,
                "--format",
                "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            ).strip()
            url = f"http://{ip}:9100"
            ready = wait_healthy(url)
            cid = run("podman", "inspect", container, "--format", "{{.Id}}").strip()
            cgroup = Cgroup(cid)
            limit = cgroup.limit()
            print(
                f"  healthy after {ready:.1f} s; cgroup {cgroup.version}, limit "
                f"{'none' if limit is None else f'{limit / MIB:,.0f} MiB'}"
            )
            time.sleep(5)
            after_start = cgroup.current()
            print(f"after start (+5 s): {cgroup.report()}; {share(after_start, limit)}")

            cgroup.reset_peak()
            with polled_peak(cgroup) as polled:
                phases = asyncio.run(mixed_load(url, names, args.mixed))
            load.print_phases(phases)
            kernel = cgroup.peak()
            peak = max(polled[0], kernel or 0)
            print(
                f"mixed load, {args.mixed:.0f} s: peak {share(peak, limit)} (kernel "
                f"{'n/a' if kernel is None else f'{kernel / MIB:,.0f}'} MiB, polled "
                f"{polled[0] / MIB:,.0f} MiB)"
            )
            print(f"after load: {cgroup.report()}; {share(cgroup.current(), limit)}")

            before = cgroup.current()
            cgroup.reset_peak()
            backup = Path(tmp) / "backup.jsonl"
            export = [
                "podman",
                "exec",
                container,
                "memory-plugin-vector",
                "export",
                "--from-url",
                "http://127.0.0.1:9100",
                "--out",
                "-",
            ]
            began = time.perf_counter()
            with polled_peak(cgroup) as polled, backup.open("wb") as out:
                done = subprocess.run(export, stdout=out, stderr=subprocess.PIPE, check=False)
            took = time.perf_counter() - began
            kernel = cgroup.peak()
            peak = max(polled[0], kernel or 0)
            last = backup.read_bytes().rstrip().rsplit(b"\n", 1)[-1].decode()[:200]
            print(
                f"export from the running pod (exit {done.returncode}, {took:.1f} s, "
                f"{backup.stat().st_size / MIB:,.0f} MiB): peak {share(peak, limit)}, "
                f"{(peak - before) / MIB:+,.0f} MiB over the {before / MIB:,.0f} MiB before "
                f"it; last line {last}"
            )
            if done.returncode != 0:
                print(done.stderr.decode()[-1000:])
        finally:
            subprocess.run(["podman", "pod", "rm", "-f", pod], capture_output=True, check=False)
            subprocess.run(
                ["podman", "volume", "rm", "-f", VOLUME, "tmp"], capture_output=True, check=False
            )
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

"""Hot reload latency: from writing a changed file to the new generation answering calls.

A small facet package is written to a temporary folder and loaded into a real facet host; a
:class:`~chord.facet_packages.ReloadCoordinator` watches it. Each of 50 edits rewrites the submodule that
decides what the service answers, and the clock stops when the consumer's (unchanged) singleton
handle returns the new answer. The time includes the watcher's batching (``step_ms``), the import
of a fresh generation, and the host's reload.

For scale it also times the alternative of restarting: a fresh ``python -c "import <pkg>"``
subprocess importing the same package (interpreter start plus chord), without even building a host.

Run: ``uv run python benchmarks/reload_latency.py`` (target: p50 <= 250 ms).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from chord.facet_packages import (
    ReloadCoordinator,
    ReloadReport,
    facet_package_from_folder,
    load_generation,
)
from chord.facets import create_facet_host, define_facet
from chord.services import define_service

EDITS = 50
STEP_MS = 50
Echo = define_service("bench.echo", local=True)

FILES = {
    "pyproject.toml": (
        '[project]\nname = "bench-echo"\nversion = "0"\n\n'
        '[project.entry-points."chord.facets"]\nbench = "bench_echo.plugin"\n'
    ),
    "src/bench_echo/__init__.py": "",
    "src/bench_echo/contract.py": (
        "from chord.services import define_service\n\n"
        'Echo = define_service("bench.echo", local=True)\n'
    ),
    "src/bench_echo/session.py": (
        "from chord.facets import define_facet\n\nfrom . import behaviour\n"
        "from .contract import Echo\n\n\nclass _Echo:\n    def answer(self, text):\n"
        "        return behaviour.answer(text)\n\n\n"
        'session_facet = define_facet("bench/echo", lambda env: env.provide(Echo, _Echo()))\n'
    ),
    "src/bench_echo/plugin.py": (
        "from chord import hookimpl\n\nfrom .session import session_facet\n\n\n"
        "@hookimpl\ndef chord_facets(host):\n    return [session_facet]\n"
    ),
}


def behaviour(version: int) -> str:
    return f"def answer(text):\n    return 'v{version}:' + text\n"


def write_package(root: Path) -> Path:
    project = root / "bench-echo"
    for relative, text in {**FILES, "src/bench_echo/behaviour.py": behaviour(0)}.items():
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return project


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def restart_baseline(project: Path, runs: int = 5) -> float:
    environment = {**os.environ, "PYTHONPATH": str(project / "src")}
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import bench_echo.plugin"], env=environment, check=True
        )
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def measure(project: Path) -> list[float]:
    (package,) = facet_package_from_folder(project)
    initial = [load_generation(package, "session")]
    holder: dict[str, Any] = {}
    consumer = define_facet("bench/consumer", lambda env: holder.__setitem__("echo", env.use(Echo)))
    send, receive = anyio.create_memory_object_stream[ReloadReport](100)
    latencies: list[float] = []
    with send, receive:
        async with create_facet_host([*initial[0].facets, consumer]) as host:
            coordinator = ReloadCoordinator(
                host, initial, on_report=send.send_nowait, step_ms=STEP_MS
            )
            async with anyio.create_task_group() as group:
                await group.start(coordinator.run)
                echo = holder["echo"]
                source = package.package_dir / "behaviour.py"
                for version in range(1, EDITS + 1):
                    started = time.perf_counter()
                    source.write_text(behaviour(version), encoding="utf-8")
                    with anyio.fail_after(10):
                        while echo.answer("x") != f"v{version}:x":
                            report = await receive.receive()
                            if not report.ok:
                                raise RuntimeError(report.message)
                    latencies.append(time.perf_counter() - started)
                coordinator.stop()
        await coordinator.dispose()
    return latencies


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        project = write_package(Path(folder))
        latencies = anyio.run(measure, project)
        baseline = restart_baseline(project)
    p50, p95 = percentile(latencies, 0.50), percentile(latencies, 0.95)
    print(
        f"hot reload, {EDITS} edits (watcher step {STEP_MS} ms): "
        f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
    )
    print(
        f'baseline, fresh `python -c "import bench_echo.plugin"` (median of 5): '
        f"{baseline * 1000:.0f} ms"
    )
    print(f"target p50 <= 250 ms: {'met' if p50 <= 0.25 else 'MISSED'}")


if __name__ == "__main__":
    main()

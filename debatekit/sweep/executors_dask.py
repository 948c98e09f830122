"""Sweep points on a Dask distributed cluster: `debatekit sweep ... --executor dask [--scheduler ADDRESS]`.

With no scheduler address a `LocalCluster` of worker processes (not threads: papermill's cwd
is not thread-safe) starts on 127.0.0.1 for the sweep and stops after it. With an address
(`tcp://host:8786`), points go to that cluster's workers; they need debatekit installed and
the same paths (notebook, sweep folder, datasets) on a shared filesystem, since every point
writes its own notebook, run folder and sidecar there. A point whose sidecar says complete is
skipped on a re-run by any executor, so a sweep started locally can finish on Dask and back.

Ctrl-C or SIGTERM cancels the points not yet started; with a LocalCluster, its processes and
the kernels they started are ended too (on a remote cluster the running points finish there).

A worker lost mid-point loses only that point: Dask reruns it on another worker (up to
`distributed.scheduler.allowed-failures` times), and if it keeps dying the point is reported
as failed while every finished point stays on disk.
"""

from __future__ import annotations

import logging
import os

from debatekit._base.extras import need
from debatekit._base.signals import descendants, stop_process_tree
from debatekit.sweep.results import PointResult


class DaskExecutor:
    """Runs each task as one Dask task (one point per worker at a time).

    Args:
        workers: worker processes of the LocalCluster (ignored with `scheduler`).
        scheduler: address of a running scheduler; None starts a LocalCluster.
        connect_timeout: seconds to wait for the scheduler.
    """

    def __init__(self, workers: int = 1, scheduler: str | None = None, connect_timeout: float = 30.0):
        self.workers = max(1, workers)
        self.scheduler = scheduler
        self.connect_timeout = connect_timeout

    def _client(self, n_tasks: int):
        distributed = need("distributed", "dask", "--executor dask")
        Client, LocalCluster = distributed.Client, distributed.LocalCluster
        if self.scheduler:
            try:
                return Client(self.scheduler, timeout=f"{self.connect_timeout}s"), None
            except OSError as exc:
                raise ValueError(f"cannot reach the Dask scheduler at {self.scheduler}: {exc}") from exc
        # silence_logs: the sweep reports each point's failure itself; left at WARNING, a stop could
        # print a worker's heartbeat traceback (the scheduler already closed) before "sweep stopped"
        cluster = LocalCluster(n_workers=min(self.workers, n_tasks), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None, scheduler_port=0,
                               silence_logs=logging.CRITICAL)
        return Client(cluster), cluster

    def map_unordered(self, fn, tasks):
        if not tasks:
            return
        before = set(descendants(os.getpid()))
        client, cluster = self._client(len(tasks))
        from distributed import as_completed

        futures = []
        try:
            # pure=False: a task is a run, not a value; resources are not used, one thread per worker
            futures = client.map(fn, tasks, pure=False, key=[f"point-{t.get('point_id', i)}"
                                                             for i, t in enumerate(tasks)])
            task_of = {f.key: t for f, t in zip(futures, tasks)}
            for future in as_completed(futures):
                try:
                    yield future.result()
                except Exception as exc:  # noqa: BLE001 - a worker that died (KilledWorker) fails its point only
                    task = task_of[future.key]
                    yield PointResult(task.get("point_id", str(future.key)), "failed", task.get("output", ""),
                                      error=f"dask: {type(exc).__name__}: {str(exc)[:300]}")
        except BaseException:  # Ctrl-C, SIGTERM: queued points are dropped; a local cluster ends with its kernels
            client.cancel(futures)
            if cluster is not None:
                started = [pid for pid in descendants(os.getpid()) if pid not in before]
                client.close()
                cluster.close(timeout=5)
                stop_process_tree(started)
            raise
        finally:
            client.close()
            if cluster is not None:
                cluster.close()

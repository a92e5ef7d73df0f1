"""Campaigns that outgrow one process, on Dask distributed (``--workers N`` / ``--scheduler ADDRESS``).

The suite does not keep a process pool of its own: work is handed to Dask, a ``LocalCluster`` of
``N`` single-threaded worker processes by default, or an existing cluster by its scheduler's
address. Every use is a *map of a pure function* over an ordered list of work items (a partition
of the explorer's frontier, a shard of verify's examples, a script, a mutant): results come back
in item order, so what a command reports cannot depend on how many workers computed it.

A worker lost mid-run is retried by Dask (the task is pure, so re-running it is safe), and the retry is
made visible: the scheduler logs a ``remove-worker`` event naming the tasks that worker was processing;
the pool subscribes to it and records each of its own items among them (:attr:`Pool.retried`, a line
``retried: <label> #<index> (worker lost)`` on stderr, a command's ``distributed.retries``). When the
scheduler gives up on a task (``KilledWorker``: it was on ``allowed-failures`` dying workers) or
the cluster cannot be reached, :class:`WorkerLost` is raised and the command reports the run
inconclusive (exit 3), never short. Dask is an optional extra: without it, ``--workers`` is a
usage error that says how to install it.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import zlib
from collections import Counter
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field
from functools import partial
from io import StringIO
from typing import Callable, NamedTuple

from surfacecheck.core.argtypes import positive_count

INSTALL = "pip install 'surfacecheck[dask]'  (Dask distributed)"
LOCAL_WORKERS = {"distributed.worker.profile.enabled": False}
"""A local cluster's workers run without Dask's sampling profiler (a thread that takes the interpreter lock every
10 ms to walk the task's stack: ~10 % of a CPU-bound task's time here); nothing reads its profiles."""
RETRIES = 2
"""Times a task is re-submitted after it raised (a worker that died is rescheduled by Dask itself)."""


class ClusterUnavailable(Exception):
    """``--workers``/``--scheduler`` asked for, but Dask is not installed or the options are wrong (exit 2)."""


class WorkerLost(Exception):
    """A task could not be completed: its workers kept dying, or the cluster went away (exit 3)."""


def add_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--workers N`` and ``--scheduler ADDRESS`` with the same help on every command."""
    group = parser.add_argument_group("distributed (optional: pip install 'surfacecheck[dask]')")
    group.add_argument("--workers", type=_workers, default=None, metavar="N",
                       help=f"split {what} over a local Dask cluster of N worker processes; results are identical "
                            "at any N (default: in this process)")
    group.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="use an existing Dask cluster (tcp://host:8786) instead of a local one")


def _workers(text: str) -> int:
    return positive_count(text, most=256)


def wanted(args) -> bool:
    return getattr(args, "workers", None) is not None or getattr(args, "scheduler", None) is not None


def stable_hash(value) -> int:
    """A hash that is the same in every process (Python's ``hash`` of a str is salted per process)."""
    return zlib.crc32(repr(value).encode())


class Retry(NamedTuple):
    """Item ``index`` of a map labelled ``label`` ran again elsewhere: its worker left mid-task (``reason``)."""

    label: str
    index: int
    reason: str

    def __str__(self) -> str:
        return f"retried: {self.label} #{self.index} ({self.reason})"

    def to_json(self) -> dict:
        return {"label": self.label, "index": self.index, "reason": self.reason}


def say_retry(retry: Retry) -> None:
    """The default :attr:`Pool.on_retry`: the retry's line on stderr, above any progress bar."""
    from tqdm import tqdm

    tqdm.write(str(retry), file=sys.stderr)


@dataclass
class Pool:
    """An open Dask client; :meth:`map` is the only way work leaves this process.

    ``retried`` lists every item re-run because its worker was lost, over the pool's maps in the order
    seen (a map's own are those with its label); ``on_retry(retry)`` is called for each as it is seen."""

    client: object
    address: str
    local: bool
    on_retry: Callable[[Retry], None] | None = say_retry
    retried: list[Retry] = field(default_factory=list)
    _removals: list = field(default_factory=list, repr=False)  # (task keys, expected) per worker removed
    _deaths: Counter = field(default_factory=Counter, repr=False)  # task key -> workers that died running it
    _allowed_failures: int = 3

    def watch(self) -> None:
        """Subscribe to the scheduler's ``remove-worker`` events (its topic ``all``), which name the tasks the
        removed worker was processing: those Dask reschedules, unless more than its ``allowed-failures``
        workers died running one (then the task errs: :class:`WorkerLost`, not a retry)."""
        self._allowed_failures = self.client.run_on_scheduler(_allowed_failures)
        self.client.subscribe_topic("all", self._event)

    def unwatch(self) -> None:
        """Unsubscribe before the client closes (else the scheduler writes its ``remove-client`` event to a
        closed comm, and logs that)."""
        try:
            self.client.unsubscribe_topic("all")
        except (ValueError, OSError):
            pass

    def _event(self, event) -> None:
        """On the client's event loop: keep a worker removal's task keys (list.append is atomic)."""
        _time, message = event
        if isinstance(message, dict) and message.get("action") == "remove-worker":
            self._removals.append((frozenset(message.get("processing-tasks") or ()), bool(message.get("expected"))))

    def _note_retries(self, seen: int, label: str, position: dict) -> int:
        """Record the retries among this map's keys in the removals after ``seen``; the new count seen."""
        removals = self._removals[seen:]
        for keys, expected in removals:
            for key in sorted((key for key in keys if key in position), key=position.get):
                if not expected:
                    self._deaths[key] += 1
                    if self._deaths[key] > self._allowed_failures:
                        continue  # the scheduler gave up on it: the map raises WorkerLost
                retry = Retry(label, position[key], "worker retired" if expected else "worker lost")
                self.retried.append(retry)
                if self.on_retry is not None:
                    self.on_retry(retry)
        return seen + len(removals)

    def retries(self, label: str | None = None) -> list[dict]:
        """The retries (of maps labelled ``label``, or all) as JSON, for a command's ``distributed`` block."""
        return [r.to_json() for r in self.retried if label is None or r.label == label]

    @property
    def workers(self) -> list[str]:
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def run_on_every_worker(self, fn, *args) -> dict:
        """``fn(*args)`` once in every worker process (cleaning up what work items left there, such as a
        warmed-up helper process); ``{worker address: result}``. A cluster that went away answers ``{}``."""
        try:
            return self.client.run(fn, *args)
        except (OSError, TimeoutError):
            return {}

    def map(self, fn, items: list, *, pin: bool = False, label: str = "task", done=None, quiet: bool = False) -> list:
        """``[fn(item) for item in items]`` on the cluster, in item order. ``pin``: item i goes to worker
        i mod W first (so a partition meets the caches it warmed), and to any worker if that one is lost.
        ``done(index, result)`` is called as each item finishes, in completion order (a progress bar);
        the list returned is still in item order, so nothing a command reports depends on that order.
        Items re-run because their worker was lost are recorded in :attr:`retried` as they are seen.
        ``quiet``: what ``fn`` writes on stderr in the worker is dropped (its own progress bars, which
        would draw over this process's one bar on a shared terminal)."""
        from distributed import as_completed

        if not items:
            return []
        if quiet:
            fn = partial(_quietly, fn)
        workers = self.workers if pin else []
        seen = len(self._removals)
        futures = []
        for index, item in enumerate(items):
            where = {"workers": [workers[index % len(workers)]], "allow_other_workers": True} if workers else {}
            futures.append(self.client.submit(fn, item, pure=False, retries=RETRIES, key=f"{label}-{index}-"
                                              f"{os.urandom(4).hex()}", **where))
        position = {future.key: index for index, future in enumerate(futures)}
        results: dict[int, object] = {}
        try:
            for future in as_completed(futures, loop=self.client.loop):
                seen = self._note_retries(seen, label, position)
                index = position[future.key]
                results[index] = _result(future, label)
                if done is not None:
                    done(index, results[index])
            return [results[index] for index in range(len(items))]
        finally:
            self._note_retries(seen, label, position)
            for future in futures:
                future.release()


def _allowed_failures(dask_scheduler) -> int:
    """On the scheduler: how many workers may die running one task before it errs (``KilledWorker``)."""
    return dask_scheduler.allowed_failures


def _quietly(fn, item):
    """``fn(item)`` in a worker with its stderr dropped (see :meth:`Pool.map`'s ``quiet``)."""
    with redirect_stderr(StringIO()):
        return fn(item)


def _result(future, label: str):
    """One future's value; Dask giving up on it (or the cluster going away) is :class:`WorkerLost`."""
    from distributed import CancelledError
    from distributed.scheduler import KilledWorker

    try:
        return future.result()
    except KilledWorker as exc:
        raise WorkerLost(f"{label}: a worker died running it {exc.args[1] if len(exc.args) > 1 else ''}; "
                         "the scheduler gave up (allowed-failures)") from None
    except (CancelledError, OSError, TimeoutError) as exc:
        raise WorkerLost(f"{label}: the Dask cluster went away ({type(exc).__name__}: {exc})") from None


@contextmanager
def pool(workers: int | None = None, scheduler: str | None = None, *, on_retry: Callable[[Retry], None] | None = say_retry):
    """A :class:`Pool` on a new ``LocalCluster`` of ``workers`` processes, or on ``scheduler``'s cluster;
    ``on_retry`` is told of every item re-run because its worker was lost (default: a line on stderr)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterUnavailable(f"--workers/--scheduler need Dask distributed: {INSTALL}") from None
    if scheduler is not None and workers is not None:
        raise ClusterUnavailable("give --workers N (a local cluster) or --scheduler ADDRESS (an existing one), not both")
    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    cluster = None
    try:
        if scheduler is None:
            import dask

            with dask.config.set(LOCAL_WORKERS):  # the spawned workers inherit the configuration
                cluster = LocalCluster(n_workers=workers or 1, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.ERROR)
            client = Client(cluster, set_as_default=False)
        else:
            try:
                client = Client(scheduler, timeout="10s", set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise WorkerLost(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        try:
            opened = Pool(client, scheduler or cluster.scheduler_address, scheduler is None, on_retry)
            opened.watch()
            try:
                yield opened
            finally:
                opened.unwatch()
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()
        quiet.setLevel(level)

"""Jobs: calls (diagnostics, try, holmake) that outran their caller's `defer_after`, and the table that holds them.

A deferred call runs in a task of its own, not its connection's: when
`defer_after` passes the caller gets a `JobStarted` handle and may hang up,
and the work goes on.  `job ID` waits (bounded) for its answer, the very
reply the plain call would have sent, or cancels it.  The table is bounded
in number (`max_jobs`) and a finished job's answer in age (`job_keep_s`):
expired ones are dropped whenever the table is read, so no timer runs.  Any
client may reach any job: the daemon's socket admits its owner's processes only.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from holsrv.errors import DaemonStopping, TooManyJobs, UnknownJob
from holsrv.rpc import messages as m

log = logging.getLogger(__name__)

# Where a call sends its progress (as `answers.common.Report`).
Report = Callable[[m.Progress], Awaitable[None]]
# The call a job runs, given where its progress goes (None: nowhere).
Work = Callable[[Report | None], Awaitable[m.Reply]]
# The calls that may become jobs.
Deferrable = m.Diagnostics | m.Try | m.Holmake
# What else a cancel must stop, besides the job's own task (a holmake's build).
Stop = Callable[[], Awaitable[None]]


class State(enum.Enum):
    RUNNING = "running"
    DONE = "done"  # its answer is kept, for `job_keep_s`
    CANCELLED = "cancelled"


@dataclass(eq=False)
class Job:
    id: str
    op: str
    file: str
    request: Deferrable  # the call, without its defer_after
    started: float  # the table's clock
    started_unix: float
    task: asyncio.Task[m.Reply]
    stop: Stop | None = None
    ended: float | None = None  # the table's clock, once not running
    delivered: bool = False  # its answer was sent once (then it may make room for a new job)

    @property
    def state(self) -> State:
        if not self.task.done():
            return State.RUNNING
        return State.CANCELLED if self.task.cancelled() else State.DONE

    def elapsed(self, now: float) -> float:
        return round(now - self.started, 1)


class _Relay:
    """A deferred call's progress, sent to its caller until the job is handed over, then dropped.

    The lock keeps a progress frame from being written after the handle: the
    caller would read it as the next call's.
    """

    def __init__(self, report: Report) -> None:
        self.report: Report | None = report
        self._lock = asyncio.Lock()

    async def __call__(self, progress: m.Progress) -> None:
        async with self._lock:
            if self.report is None:
                return
            try:
                await self.report(progress)
            except ConnectionError:  # the caller went away; the job does not
                self.report = None

    async def detach(self) -> None:
        async with self._lock:
            self.report = None


class Jobs:
    """The jobs the daemon holds, by id."""

    def __init__(self, max_jobs: int, keep_s: float, cancel_wait_s: float, clock: Callable[[], float]) -> None:
        self.max_jobs = max_jobs
        self.keep_s = keep_s
        self.cancel_wait_s = cancel_wait_s  # the most a cancel waits for the job to wind down
        self.clock = clock
        self._jobs: dict[str, Job] = {}

    async def defer(self, request: Deferrable, defer_after: float, work: Work, report: Report | None,
                    stop: Stop | None = None) -> m.Reply:
        """Run `work` (the answer to `request`) as a job: its reply if it ends within `defer_after`
        seconds, else a `JobStarted`.

        Progress goes to `report` until the handle is sent.  Cancelling this
        call (its caller hung up) leaves the job running.
        """
        self._make_room()
        relay = _Relay(report) if report is not None else None
        job = self._add(request, work(relay), stop)
        try:
            await asyncio.wait({job.task}, timeout=defer_after)
        except asyncio.CancelledError:
            if relay is not None:
                relay.report = None  # its caller is gone; the job goes on
            raise
        if job.task.done():
            del self._jobs[job.id]  # it never had to be a job
            if job.task.cancelled():
                raise DaemonStopping("the daemon is shutting down and stopped this call; call again in a few seconds")
            return job.task.result()
        if relay is not None:
            await relay.detach()
        log.info("%s on %s outran defer_after %gs: job %s", job.op, job.file, defer_after, job.id)
        started = round(job.started_unix, 3)
        return m.JobStarted(job.id, job.op, job.file, started, self._started_message(job, defer_after))

    def find(self, job_id: str) -> Job:
        """The job of this id; `UnknownJob` if the table has none (never started, or forgotten)."""
        self._expire()
        job = self._jobs.get(job_id)
        if job is None:
            raise UnknownJob(
                f"the daemon has no job {job_id[:40]!r}: it may have expired (a finished job's answer is kept "
                f"{self.keep_s:g}s, HOLSRV_JOB_KEEP_S, then forgotten), been cancelled, or been started by a "
                "daemon that has since stopped. `status` lists the jobs there are; make the call again for "
                "a new one."
            )
        return job

    async def wait(self, job: Job, seconds: float) -> m.Reply:
        """The job's answer if it has one within `seconds`, else how it stands."""
        if job.state is State.RUNNING:
            await asyncio.wait({job.task}, timeout=seconds)
        if job.state is State.DONE:
            job.delivered = True
            return job.task.result()
        now = self.clock()
        if job.state is State.CANCELLED:
            return m.JobState(job.id, job.op, job.file, job.state.value, job.elapsed(job.ended or now),
                              f"job {job.id} was cancelled: it has no answer. Make the call again if you want one.")
        return m.JobState(job.id, job.op, job.file, job.state.value, job.elapsed(now),
                          f"job {job.id} ({job.op} on {job.file}) is still running after {job.elapsed(now):g}s. "
                          f"Call job again with id {job.id} to wait longer, or cancel it.")

    async def cancel(self, job: Job) -> m.JobState:
        """Stop the job (a trial gives the server the file's text back; a holmake's build is killed), and forget it."""
        now = self.clock()
        if job.state is not State.RUNNING:
            self._jobs.pop(job.id, None)
            return m.JobState(job.id, job.op, job.file, job.state.value, job.elapsed(job.ended or now),
                              f"job {job.id} had already ended ({job.state.value}); it is forgotten now.")
        log.info("cancelling job %s (%s on %s)", job.id, job.op, job.file)
        if job.stop is not None:
            await job.stop()
        job.task.cancel()
        await asyncio.wait({job.task}, timeout=self.cancel_wait_s)
        self._jobs.pop(job.id, None)
        ended = "" if job.task.done() else " It is still winding down (giving the server the file's text back)."
        return m.JobState(job.id, job.op, job.file, State.CANCELLED.value, job.elapsed(self.clock()),
                          f"job {job.id} ({job.op} on {job.file}) is cancelled.{ended}")

    def rows(self) -> list[m.JobRow]:
        self._expire()
        now = self.clock()
        return [m.JobRow(j.id, j.op, j.file, j.state.value, j.elapsed(now)) for j in self._jobs.values()]

    def running(self) -> bool:
        return any(j.state is State.RUNNING for j in self._jobs.values())

    async def close(self, budget_s: float) -> None:
        """Cancel every running job (the daemon is stopping) and wait up to `budget_s` for them to end."""
        tasks = [j.task for j in self._jobs.values() if not j.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=max(0.0, budget_s))

    # -- the table -------------------------------------------------------------

    def _add(self, request: Deferrable, work: Awaitable[m.Reply], stop: Stop | None) -> Job:
        job_id = secrets.token_hex(4)
        while job_id in self._jobs:
            job_id = secrets.token_hex(4)
        task = asyncio.create_task(_answered(work), name=f"job-{job_id}")
        op = type(request).__struct_config__.tag
        job = Job(job_id, str(op), request.file, request, self.clock(), time.time(), task, stop)
        self._jobs[job_id] = job
        task.add_done_callback(lambda _: self._ended(job))
        return job

    def _ended(self, job: Job) -> None:
        job.ended = self.clock()

    def _make_room(self) -> None:
        """Room for one more job: expired ones go, then finished ones already answered, oldest first;
        `TooManyJobs` if that is not enough."""
        self._expire()
        spent = [j for j in self._jobs.values() if j.state is not State.RUNNING and j.delivered]
        while len(self._jobs) >= self.max_jobs and spent:
            del self._jobs[spent.pop(0).id]
        if len(self._jobs) >= self.max_jobs:
            held = ", ".join(f"{j.id} ({j.op}, {j.state.value})" for j in self._jobs.values())
            raise TooManyJobs(
                f"the daemon holds {len(self._jobs)} jobs already, its limit (HOLSRV_MAX_JOBS={self.max_jobs}): "
                f"{held or 'none'}. Collect or cancel one with `job ID`, or make the call without defer_after."
            )

    def _expire(self) -> None:
        now = self.clock()
        for job in [j for j in self._jobs.values() if j.ended is not None and now - j.ended > self.keep_s]:
            log.info("job %s ended %.0fs ago: forgotten", job.id, now - (job.ended or now))
            del self._jobs[job.id]

    def _started_message(self, job: Job, defer_after: float) -> str:
        return (
            f"{job.op} on {job.file} was still running after {defer_after:g}s (defer_after), so it goes on as "
            f"job {job.id}. Get its answer with job id {job.id} (it waits up to its `wait`, then says it is "
            f"still running), or cancel it. Its answer is kept {self.keep_s:g}s after it ends."
        )


async def _answered(work: Awaitable[m.Reply]) -> m.Reply:
    """The job's reply; a bug becomes an `internal` error reply, so that `job` always has one to give."""
    try:
        return await work
    except Exception as err:
        log.exception("job failed")
        return m.ErrorReply("internal", f"internal error in the daemon's job: {err!r}; see the daemon log")

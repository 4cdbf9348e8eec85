"""Jobs: a diagnostics, try or holmake that outruns its caller's `defer_after` answers with a handle,
goes on in the daemon whoever asked having gone, and `job` gets its answer or cancels it.

Against the fake HOL (`SLOW_TAC n` makes a proof take n ms, `LOOP_TAC` never ends)
and the fake Holmake (it waits at a FIFO named `holmake.gate`).
"""

from __future__ import annotations

import math
import os

import msgspec
import pytest
from click.testing import CliRunner
from mcp import Client
from test_fairness import _open_hello
from test_holmake import _processes_in
from test_trials import LINE, SCRIPT, server_text, settled

from holctl.cli import cli
from holctl.render import render
from holmcp.server import build_server
from holsrv import errors
from holsrv.rpc import client as rpc_client
from holsrv.rpc import framing
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, wait_until

DEADLINE_S = 60.0
# A proof the fake checks for 3 s: longer than any defer_after below, however loaded the machine.
SLOW_SCRIPT = GOOD_SCRIPT.replace("gen_tac >> simp[]", "gen_tac >> SLOW_TAC 3000 >> simp[]", 1)
# A proof the fake never finishes checking: a diagnostics on it runs until its wait ends.
LOOPING_SCRIPT = GOOD_SCRIPT.replace("gen_tac >> simp[]", "gen_tac >> LOOP_TAC", 1)


def _started(reply) -> m.JobStarted:
    assert isinstance(reply, m.JobStarted), reply
    return reply


def test_a_diagnostics_outrunning_defer_after_is_a_job_whose_answer_is_the_plain_call_s(daemon, write_script):
    path = write_script(SLOW_SCRIPT)
    handle = _started(daemon.call(m.Diagnostics(str(path), wait=DEADLINE_S, defer_after=0.2)))
    assert handle.op == "diagnostics" and handle.file == str(path)
    assert f"job id {handle.id}" in handle.message and f"JOB {handle.id} started" in render(handle)
    answer = daemon.call(m.Job(handle.id, wait=DEADLINE_S))
    assert isinstance(answer, m.DiagnosticsResult) and answer.complete, answer
    plain = daemon.call(m.Diagnostics(str(path), wait=DEADLINE_S))
    fields = ("file", "content_hash", "verdict", "headline", "tally", "proofs", "diagnostics", "cheats")
    assert {f: getattr(answer, f) for f in fields} == {f: getattr(plain, f) for f in fields}
    assert answer.verdict == "OK" and answer.freshness is not None
    assert answer.freshness.content_hash == plain.content_hash


def test_a_job_goes_on_when_its_caller_hangs_up_and_status_lists_it_running(daemon, write_script):
    path = write_script(LOOPING_SCRIPT)
    sock = _open_hello(daemon)
    # Its defer_after is past its whole run: only the hang-up can make it a job.
    sock.sendall(framing.encode(m.Diagnostics(str(path), wait=8, defer_after=DEADLINE_S)))
    wait_until(lambda: daemon.call(m.Status()).jobs, DEADLINE_S, "the call to start as a job")
    sock.close()
    wait_until(lambda: not daemon.daemon.connections.tasks, DEADLINE_S, "the daemon to see the caller go")
    [row] = daemon.call(m.Status()).jobs
    assert (row.op, row.file, row.state) == ("diagnostics", str(path), "running") and row.age_s >= 0
    assert f"{row.id}  diagnostics  running" in render(daemon.call(m.Status()))
    answer = daemon.call(m.Job(row.id, wait=DEADLINE_S))
    assert isinstance(answer, m.DiagnosticsResult) and answer.verdict == "INCOMPLETE", answer
    assert [r.state for r in daemon.call(m.Status()).jobs] == ["done"]


def test_a_deferred_call_s_progress_stops_at_its_handle_so_the_next_call_gets_only_its_own(daemon, write_script):
    path = write_script(SLOW_SCRIPT)
    with rpc_client.connect(daemon.socket, name="jobs-test", autostart=False) as conn:
        request = m.Diagnostics(str(path), wait=DEADLINE_S, progress=True, defer_after=0.2)
        handle = _started(conn.call(request, DEADLINE_S))
        answer = daemon.call(m.Job(handle.id, wait=DEADLINE_S))  # the job checks on, to its end
        assert isinstance(answer, m.DiagnosticsResult) and answer.complete
        late: list[m.Progress] = []
        assert isinstance(conn.call(m.Status(), DEADLINE_S, on_progress=late.append), m.StatusResult)
    assert late == [], "the job's progress reached a caller that had its handle"


def test_a_job_s_wait_that_ends_first_says_it_is_still_running(daemon, write_script):
    path = write_script(LOOPING_SCRIPT)
    handle = _started(daemon.call(m.Diagnostics(str(path), wait=DEADLINE_S, defer_after=0)))
    running = daemon.call(m.Job(handle.id, wait=0))
    assert isinstance(running, m.JobState) and running.state == "running" and running.elapsed_s >= 0
    assert "still running" in running.message and render(running).startswith(f"JOB {handle.id} RUNNING")
    cancelled = daemon.call(m.Job(handle.id, cancel=True))
    assert isinstance(cancelled, m.JobState) and cancelled.state == "cancelled"


def test_cancelling_a_try_job_gives_the_server_the_file_s_text_back(daemon, write_script):
    path = write_script(SCRIPT)
    assert settled(daemon, path).verdict == "OK"
    handle = _started(daemon.call(m.Try(str(path), LINE, ["LOOP_TAC"], timeout=DEADLINE_S, defer_after=0.5)))
    wait_until(lambda: b"LOOP_TAC" in (server_text(daemon, path) or b""), DEADLINE_S, "the candidate in the server")
    cancelled = daemon.call(m.Job(handle.id, cancel=True))
    assert isinstance(cancelled, m.JobState) and cancelled.state == "cancelled", cancelled
    assert server_text(daemon, path) == path.read_bytes()
    after = settled(daemon, path)
    assert after.verdict == "OK" and after.content_hash == daemon.call(m.Diagnostics(str(path))).content_hash
    with pytest.raises(errors.UnknownJob):  # a cancelled job is forgotten
        daemon.call(m.Job(handle.id, wait=0))


def test_cancelling_a_holmake_job_kills_the_build_with_its_process_group(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    os.mkfifo(path.parent / "holmake.gate")  # the fake Holmake waits there until opened: cancel alone ends it
    handle = _started(daemon.call(m.Holmake(str(path), defer_after=0.5)))
    assert handle.op == "holmake"
    wait_until(lambda: _processes_in(path.parent), DEADLINE_S, "the fake Holmake to run")
    cancelled = daemon.call(m.Job(handle.id, cancel=True))
    assert isinstance(cancelled, m.JobState) and cancelled.state == "cancelled", cancelled
    assert daemon.daemon.pool.builds.running == {}
    assert _processes_in(path.parent) == [], "the cancelled Holmake runs on"


def test_a_job_past_max_jobs_is_refused_with_its_code(daemon_factory, write_script):
    daemon = daemon_factory(max_jobs=1)
    path = write_script(LOOPING_SCRIPT)
    first = _started(daemon.call(m.Diagnostics(str(path), wait=DEADLINE_S, defer_after=0)))
    with pytest.raises(errors.TooManyJobs, match="HOLSRV_MAX_JOBS=1") as refused:
        daemon.call(m.Diagnostics(str(path), wait=DEADLINE_S, defer_after=0))
    assert refused.value.code == "too_many_jobs" and first.id in str(refused.value)
    daemon.call(m.Job(first.id, cancel=True))
    _started(daemon.call(m.Diagnostics(str(path), wait=DEADLINE_S, defer_after=0)))  # room again


def test_an_unknown_job_id_gets_its_code_saying_it_may_have_expired(daemon):
    with pytest.raises(errors.UnknownJob, match="may have expired") as unknown:
        daemon.call(m.Job("0123abcd", wait=0))
    assert unknown.value.code == "unknown_job"


def test_a_finished_job_is_forgotten_after_job_keep_s(daemon_factory, write_script):
    daemon = daemon_factory(job_keep_s=0.5)
    path = write_script(GOOD_SCRIPT)
    handle = _started(daemon.call(m.Diagnostics(str(path), wait=DEADLINE_S, defer_after=0)))
    wait_until(lambda: [r.state for r in daemon.call(m.Status()).jobs] != ["running"], DEADLINE_S, "the job to end")
    wait_until(lambda: not daemon.call(m.Status()).jobs, DEADLINE_S, "the finished job to be forgotten")
    with pytest.raises(errors.UnknownJob, match="may have expired"):
        daemon.call(m.Job(handle.id, wait=0))


@pytest.mark.parametrize("value", [math.nan, -1.0, math.inf])
def test_a_defer_after_that_is_not_a_finite_number_of_seconds_is_a_bad_request(daemon, write_script, value):
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.BadRequest, match="defer_after must be a finite number of seconds"):
        daemon.call(m.Diagnostics(str(path), defer_after=value))


def test_a_call_without_defer_after_sends_and_gets_what_it_did_before_jobs(daemon, write_script):
    request = m.Diagnostics(str(write_script(SLOW_SCRIPT)), wait=DEADLINE_S)
    assert "defer_after" not in msgspec.msgpack.decode(framing.encode(request)[4:])
    reply = daemon.call(request)
    assert isinstance(reply, m.DiagnosticsResult) and reply.complete and reply.verdict == "OK"
    assert daemon.call(m.Status()).jobs == []


def _holctl(daemon, *args: str):
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket), "--no-start", *args])


def test_holctl_defer_after_prints_a_handle_and_job_wait_prints_the_answer(daemon, write_script):
    path = write_script(SLOW_SCRIPT)
    started = _holctl(daemon, "diagnostics", str(path), "--wait", "60", "--defer-after", "0.2", "--json")
    assert started.exit_code == 0, started.output
    handle = msgspec.json.decode(started.stdout, type=m.JobStarted)
    answer = _holctl(daemon, "job", handle.id, "--wait", "60")
    assert answer.exit_code == 0, answer.output
    assert answer.stdout.startswith("OK: "), answer.stdout
    gone = _holctl(daemon, "job", handle.id, "--cancel")  # a finished job is forgotten by a cancel
    assert gone.exit_code == 0 and f"JOB {handle.id} DONE" in gone.stdout, gone.output
    unknown = _holctl(daemon, "job", handle.id)
    assert unknown.exit_code == 3 and unknown.stderr.startswith("holctl: unknown_job: "), unknown.output


@pytest.mark.asyncio
async def test_holmcp_defer_after_answers_a_job_id_whose_answer_the_job_tool_gets(daemon, write_script):
    path = write_script(SLOW_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        started = await client.call_tool("diagnostics", {"file": path.name, "wait": 60, "defer_after": 0.2})
        assert not started.is_error and started.structured_content["type"] == "jobStarted", started.content
        job_id = started.structured_content["id"]
        answer = await client.call_tool("job", {"id": job_id, "wait": 60})
        unknown = await client.call_tool("job", {"id": "0123abcd", "wait": 0})
    assert not answer.is_error and answer.structured_content["verdict"] == "OK", answer.content
    assert unknown.is_error and unknown.content[0].text.startswith("unknown_job: ")

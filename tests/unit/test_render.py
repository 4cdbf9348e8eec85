"""What holctl prints and holmcp's text content says, for replies built by hand."""

from __future__ import annotations

from holctl.render import render
from holsrv.config.settings import FIXED
from holsrv.rpc.messages import (
    Blocked,
    CheatUse,
    CompletionItem,
    CompletionResult,
    DefinitionResult,
    Diagnostic,
    DiagnosticsResult,
    DocumentSymbolResult,
    ErrorReply,
    EvalResult,
    Goal,
    GoalStateResult,
    HoverResult,
    Location,
    Progress,
    Proof,
    Range,
    ReferencesResult,
    RestartResult,
    ServerNote,
    SessionStatus,
    SettingSource,
    ShutdownResult,
    StatusResult,
    StopResult,
    Symbol,
    Tally,
    WorkspaceSymbolItem,
    WorkspaceSymbolResult,
)

HASH = "0123456789abcdef0123"
WARM = ServerNote(pid=4242)


def diagnostics(**changes) -> DiagnosticsResult:
    fields = dict(
        file="/p/fooScript.sml",
        content_hash=HASH,
        verdict="FAILED",
        headline="FAILED: 1 of 3 proofs failed",
        complete=True,
        tally=Tally(proved=2, failed=1),
        proofs=[
            Proof("good", 3, "proved"),
            Proof("bad", 10, "failed", detail="FAIL_TAC: nope\nsecond line"),
            Proof("good2", 20, "proved"),
        ],
        diagnostics=[],
        cheats=[],
        server=WARM,
    )
    return DiagnosticsResult(**(fields | changes))


def goal_state(**changes) -> GoalStateResult:
    fields = dict(
        file="/p/fooScript.sml",
        content_hash=HASH,
        line=5,
        column=3,
        state="goals",
        message="",
        server=WARM,
        theorem="add_comm",
        step=2,
    )
    return GoalStateResult(**(fields | changes))


def lines(reply) -> list[str]:
    return render(reply).splitlines()


# -- diagnostics ------------------------------------------------------------


def test_diagnostics_starts_with_headline_then_tally_without_zero_buckets():
    out = lines(diagnostics())
    assert out[0] == "FAILED: 1 of 3 proofs failed"
    assert out[1] == "proofs: 2 proved, 1 failed (3 total)"


def test_diagnostics_lists_only_proofs_that_are_not_proved_with_first_detail_line():
    out = lines(diagnostics())
    assert "  line 10  bad  failed  FAIL_TAC: nope" in out
    assert not any("good" in line for line in out)
    assert "second line" not in render(diagnostics())


def test_diagnostics_shows_each_message_at_its_one_based_position_with_continuations_indented():
    diag = Diagnostic(Range(7, 4, 7, 9), "error", "Type error\n  expected: num\n  got: bool")
    out = lines(diagnostics(diagnostics=[diag]))
    at = out.index("7:4 error: Type error")
    assert out[at + 1 : at + 3] == ["      expected: num", "      got: bool"]


def test_diagnostics_ends_with_content_hash_and_cached_marker():
    assert lines(diagnostics(cached=True))[-1] == "(about file content 0123456789ab; cached)"
    assert lines(diagnostics())[-1] == "(about file content 0123456789ab)"


def test_diagnostics_says_when_the_answer_is_not_settled_and_what_is_outstanding():
    reply = diagnostics(
        verdict="INCOMPLETE",
        headline="INCOMPLETE: 1 proof still checking after 25s",
        complete=False,
        tally=Tally(proved=1, checking=1),
        proofs=[Proof("slow", 4, "checking", checking_s=125.0)],
        outstanding=["theorem slow (line 4) still checking"],
        warnings=["theorem slow (line 4) has been checking for 2m05s: PROBABLY LOOPING"],
    )
    out = lines(reply)
    assert out[:2] == ["INCOMPLETE: 1 proof still checking after 25s", "proofs: 1 proved, 1 checking (2 total)"]
    assert "warning: theorem slow (line 4) has been checking for 2m05s: PROBABLY LOOPING" in out
    assert "outstanding: theorem slow (line 4) still checking" in out
    assert "  line 4  slow  checking" in out  # its time is in `outstanding`, once
    assert out[-1] == "(about file content 0123456789ab; not settled yet)"


def test_diagnostics_names_cheats_and_blocked_dependencies():
    reply = diagnostics(
        verdict="BLOCKED",
        headline="BLOCKED: barTheory could not be loaded",
        tally=Tally(unchecked=1),
        proofs=[Proof("lazy", 12, "cheated")],
        cheats=[CheatUse("lazy", 12, 5)],
        blocked=Blocked(["barTheory"], "barTheory failed to build"),
    )
    out = lines(reply)
    assert "proofs: 1 unchecked (1 total)" in out
    assert "blocked: barTheory failed to build" in out
    assert "cheat at line 12, in theorem lazy" in out


def test_diagnostics_with_no_proofs_says_so_rather_than_zero_total():
    out = lines(diagnostics(verdict="OK", headline="OK", tally=Tally(), proofs=[]))
    assert out[1] == "proofs: none found"


def test_a_call_that_started_a_server_says_so_after_the_freshness_line():
    server = ServerNote(pid=99, start="started", note="loading the heap took 12s")
    out = lines(diagnostics(server=server))
    assert out[-2:] == ["(about file content 0123456789ab)", "loading the heap took 12s (pid 99)"]


def test_a_restarted_server_is_reported_with_its_reason():
    server = ServerNote(pid=100, start="restarted", note="the previous server died (exit 137)")
    out = lines(diagnostics(server=server))
    assert out[-1] == "the previous server died (exit 137) (pid 100)"


def test_a_warm_server_adds_no_lines_after_the_freshness_line():
    assert lines(diagnostics())[-1].startswith("(about file content ")


# -- goal state -------------------------------------------------------------


def test_goal_state_prints_assumptions_numbered_above_a_rule_and_the_goal_below():
    reply = goal_state(goals=[Goal(["x = 1", "y = 2"], "x + y = 3"), Goal([], "T")])
    out = lines(reply)
    assert out[0] == "theorem add_comm, step 2"
    first = out.index("goal 1 of 2:")
    assert out[first + 1 : first + 5] == [
        "  0.  x = 1",
        "  1.  y = 2",
        "  ------------------------------------",
        "  x + y = 3",
    ]
    second = out.index("goal 2 of 2:")
    assert out[second + 1] == "  T"


def test_goal_state_with_no_goals_and_no_error_says_proved_here():
    assert "no goals: proved at this point" in lines(goal_state(state="proved_here"))


def test_goal_state_error_is_shown_with_its_range_and_no_proved_claim():
    reply = goal_state(state="failed", error="FAIL_TAC: nope", failed_range=Range(6, 3, 6, 17))
    out = lines(reply)
    assert "error at 6:3-6:17: FAIL_TAC: nope" in out
    assert "no goals: proved at this point" not in out


def test_provisional_goal_state_warns_the_answer_may_change():
    out = lines(goal_state(provisional=True, goals=[Goal([], "P")]))
    assert out[1] == "provisional: the file is still compiling, so this answer may change; ask again"


def test_goal_state_of_a_whole_line_shows_the_line_then_goals_before_and_after_it():
    reply = goal_state(
        column=None, line_text="  simp[] >> gvs[]", before=[Goal(["x = 1"], "x + 1 = 2")], goals=[],
        state="proved_here", message="No goals are left here: the tactics up to this point prove the goal.",
    )
    out = lines(reply)
    assert out[:3] == [
        "theorem add_comm, step 2",
        "line 5: simp[] >> gvs[]",
        "No goals are left here: the tactics up to this point prove the goal.",
    ]
    at = out.index("before the line:")
    assert out[at + 1 : at + 8] == [
        "  goal 1 of 1:",
        "    0.  x = 1",
        "    ------------------------------------",
        "    x + 1 = 2",
        "after the line:",
        "  no goals: proved at this point",
        "(about file content 0123456789ab)",
    ]


def test_goal_state_that_fails_shows_the_goals_given_to_the_failing_tactic_and_no_proved_claim():
    reply = goal_state(state="failed", error="simp failed", goals=[Goal([], "P")])
    out = lines(reply)
    assert "error: simp failed" in out and "goal 1 of 1:" in out
    assert "no goals: proved at this point" not in out


def test_goal_state_outside_a_proof_prints_the_daemon_message():
    reply = goal_state(state="not_in_proof", message="line 2 is not inside a Proof…QED block")
    assert lines(reply)[0] == "line 2 is not inside a Proof…QED block"


# -- navigation -------------------------------------------------------------


def test_hover_prints_text_or_says_nothing_to_show():
    assert lines(HoverResult("/f", HASH, "ADD_COMM : ⊢ ∀m n. m + n = n + m", WARM))[0].startswith("ADD_COMM")
    assert lines(HoverResult("/f", HASH, None, WARM))[0] == "nothing to show here"


def test_definition_prints_path_line_col_per_target():
    target = Location("/hol/arithmeticScript.sml", Range(40, 7, 40, 15))
    assert lines(DefinitionResult("/f", HASH, [target], WARM))[0] == "/hol/arithmeticScript.sml:40:7"
    assert lines(DefinitionResult("/f", HASH, [], WARM))[0] == "no definition found"


def test_references_without_support_prints_the_reason():
    reply = ReferencesResult("/f", HASH, False, [], "this HOL server cannot find references", WARM)
    assert lines(reply)[0] == "this HOL server cannot find references"


def test_completion_shows_fifty_items_and_how_many_more():
    items = [CompletionItem(f"ADD_{i}", "theorem", "⊢ T") for i in range(60)]
    out = lines(CompletionResult("/f", HASH, items, 75, True, WARM))
    assert out[0] == "ADD_0  (theorem)  ⊢ T"
    assert out[49] == "ADD_49  (theorem)  ⊢ T"
    assert out[50] == "25 more; type more of the name to narrow the list"


def test_document_symbols_are_an_outline_indented_by_depth():
    symbols = [Symbol("add_comm", "theorem", 3, 1, 8), Symbol("step", "value", 5, 3, 5, "num", depth=1)]
    out = lines(DocumentSymbolResult("/f", HASH, symbols, WARM))
    assert out[:2] == ["3  theorem  add_comm", "  5  value  step  num"]


def test_document_symbols_past_the_cap_are_counted():
    out = lines(DocumentSymbolResult("/f", HASH, [Symbol("a", "theorem", 1, 1, 2)], WARM, omitted=7))
    assert out[1] == "… and 7 more symbols, not listed"


def test_workspace_symbols_show_statement_theory_and_location():
    items = [
        WorkspaceSymbolItem("ADD_COMM", "theorem", "arithmetic", "$HOLDIR/src/num/arithScript.sml", 40,
                            statement="⊢ ∀m n.\n    m + n = n + m"),
        WorkspaceSymbolItem("ADD", "constant", "arithmetic"),
    ]
    out = lines(WorkspaceSymbolResult("/f", "ADD", items, WARM))
    assert out == [
        "ADD_COMM: ⊢ ∀m n. m + n = n + m  (theorem, arithmetic, $HOLDIR/src/num/arithScript.sml:40)",
        "ADD  (constant, arithmetic)",
    ]
    assert lines(WorkspaceSymbolResult("/f", "zzz", [], WARM)) == ["no symbols match 'zzz'"]


def test_workspace_symbols_say_how_many_more_pages_and_when_hol_cut_the_list():
    items = [WorkspaceSymbolItem(f"LE_{i}", "theorem", "arithmetic") for i in range(20)]
    out = lines(WorkspaceSymbolResult("/f", "LE", items, WARM, total=193, more=173, capped=True))
    assert out[20] == "page 1: 20 of 193 matches; 173 more on page 2 and after; a longer query narrows the list"
    assert out[21].startswith("HOL stops at a fixed number of matches")
    assert len(lines(WorkspaceSymbolResult("/f", "LE", items, WARM, total=20))) == 20


# -- eval and commands ------------------------------------------------------


def test_eval_prints_output_then_errors_then_stderr_then_timeout_note():
    reply = EvalResult("/f", "val it = 3: int\n", ["Unbound value x"], "warning: slow\n", True, WARM)
    out = lines(reply)
    assert out[:4] == ["val it = 3: int", "error: Unbound value x", "stderr:", "    warning: slow"]
    assert out[4].startswith("TIMED OUT:")


def test_eval_warnings_follow_the_errors_and_are_not_errors():
    reply = EvalResult("/f", "val it = 3: int\n", [], "", False, WARM, warnings=["1:5: soft report"])
    assert lines(reply) == ["val it = 3: int", "warning: 1:5: soft report"]


def test_eval_with_nothing_printed_says_so():
    assert lines(EvalResult("/f", "", [], "", False, WARM)) == ["(no output)"]


def test_stop_prints_the_daemon_message():
    message = "Stopped the HOL server for f (pid 12)."
    assert render(StopResult("/f", 12, message)) == message


def test_progress_is_one_line_with_the_count_when_there_is_one():
    assert render(Progress("checking proofs", 3, 10)) == "… checking proofs (3/10)"
    assert render(Progress("loading the heap")) == "… loading the heap"


def test_restart_and_shutdown_print_the_daemon_message():
    restart = RestartResult("/f", 10, 11, 4096, "restarted the HOL server for /f (pid 11, heap cap 4096 MB)")
    assert render(restart) == "restarted the HOL server for /f (pid 11, heap cap 4096 MB)"
    assert render(ShutdownResult("stopping 2 HOL servers and the daemon")) == "stopping 2 HOL servers and the daemon"


def test_error_reply_prints_code_message_and_indented_detail():
    out = lines(ErrorReply("server_died", "the HOL server exited", "Fatal: out of memory"))
    assert out == ["server_died: the HOL server exited", "    Fatal: out of memory"]


def test_status_prints_daemon_line_and_a_row_per_session():
    session = SessionStatus(
        file="/p/fooScript.sml",
        pid=321,
        state="ready",
        uptime_s=3725,
        idle_s=42,
        footprint_mb=812.4,
        max_heap_mb=0,
        tally=Tally(proved=3, failed=1),
        waiting_calls=1,
        clients=["holctl", "holmcp"],
    )
    reply = StatusResult("0.1.0", 2, 77, 90, "/run/holsrv.sock", 4, [session], 10, 3)
    out = lines(reply)
    assert out[0] == "holsrv 0.1.0  pid 77  up 1m30s  protocol 2"
    assert "servers: 1 running of 4  cache: 10 hits, 3 misses" in out
    header, row = out[-2].split("  "), out[-1].split("  ")
    assert [c.strip() for c in header if c.strip()] == [
        "FILE", "PID", "STATE", "UP", "IDLE", "MB", "PEAK", "CAP", "PROOFS", "LAST VERDICT", "WAITING", "CLIENTS"]
    cells = [c.strip() for c in row if c.strip()]
    assert cells == ["/p/fooScript.sml", "321", "ready", "1h02m", "42s", "812", "-", "none",
                     "3/4 proved, 1 failed", "-", "1", "holctl,holmcp"]


def test_status_says_what_the_fleet_uses_of_the_budget_and_how_many_more_servers_fit():
    session = SessionStatus(
        file="/p/fooScript.sml", pid=321, state="ready", uptime_s=10, idle_s=2, footprint_mb=130.4,
        max_heap_mb=6144, tally=Tally(), waiting_calls=0, clients=[], peak_mb=412.0,
    )
    reply = StatusResult(
        "0.1.0", 3, 77, 90, "/s", 8, [session], 0, 0, memory_budget_mb=12288, memory_used_mb=130.4,
        memory_budget_source="default: 75% of cgroup memory.max of /holsrv.service (16384 MB)",
        max_heap_mb=6144, usual_footprint_mb=412.0, servers_fit=7,
    )
    out = lines(reply)
    assert ("memory: 130 of 12288 MB budget used (budget: default: 75% of cgroup memory.max of "
            "/holsrv.service (16384 MB))") in out
    assert "capacity: 7 more of 412 MB fit; heap cap 6144 MB per server" in out
    cells = [c.strip() for c in out[-1].split("  ") if c.strip()]
    assert cells[5:8] == ["130", "412", "6144"]


def test_status_names_the_servers_still_loading_with_what_they_count_against_the_budget():
    loading = SessionStatus(
        file="/p/barScript.sml", pid=322, state="compiling", uptime_s=2, idle_s=2, footprint_mb=21.0,
        max_heap_mb=6144, tally=Tally(), waiting_calls=1, clients=[], counted_mb=1024.0,
    )
    reply = StatusResult("0.1.0", 3, 77, 90, "/s", 8, [loading], 0, 0, memory_budget_mb=12288,
                         memory_used_mb=1024.0)
    out = lines(reply)
    assert ("  still loading, so counted as a new server would be until measured after its first compile: "
            "barScript.sml (1024 MB)") in out


def test_status_shows_only_the_settings_not_at_their_default_one_a_line_with_their_source():
    settings = [
        SettingSource("HOLSRV_MAX_HEAP_MB", "4096", "environment HOLSRV_MAX_HEAP_MB"),
        SettingSource("HOLSRV_QUIET_S", "1.0", FIXED),
        SettingSource("HOLSRV_IDLE_TIMEOUT_S", "1800.0", "default"),
        SettingSource("HOLSRV_SPILL_WAIT_S", "0.5", "set"),
    ]
    out = lines(StatusResult("0.1.0", 2, 77, 5, "/s", 4, [], 0, 0, settings=settings))
    at = out.index("settings not at their default (`holctl config` lists every one):")
    assert out[at + 1 : at + 3] == [
        "  HOLSRV_MAX_HEAP_MB=4096  (environment HOLSRV_MAX_HEAP_MB)",
        "  HOLSRV_SPILL_WAIT_S=0.5  (set)",
    ]
    assert not any("QUIET_S" in line or "IDLE_TIMEOUT_S" in line for line in out)


def test_status_of_a_daemon_with_every_setting_at_its_default_says_so_in_one_line():
    settings = [SettingSource("HOLSRV_QUIET_S", "1.0", FIXED), SettingSource("HOLSRV_LETGO_S", "10.0", "default")]
    out = lines(StatusResult("0.1.0", 2, 77, 5, "/s", 4, [], 0, 0, settings=settings))
    assert "settings: all at their defaults (`holctl config` lists them)" in out
    assert not any("LETGO" in line for line in out)


def test_status_with_no_sessions_says_no_servers():
    reply = StatusResult("0.1.0", 1, 77, 5, "/s", 4, [], 0, 0)
    assert lines(reply)[-1] == "no HOL servers running"


def test_status_names_a_replacement_under_way_below_the_table():
    session = SessionStatus(
        file="/p/fooScript.sml", pid=321, state="settled", uptime_s=60, idle_s=1, footprint_mb=None,
        max_heap_mb=0, tally=Tally(), waiting_calls=0, clients=[],
        replacing="ancestor mylibTheory rebuilt; the new server is catching up", replacing_since_s=75,
        replacement_pid=654,
    )
    out = lines(StatusResult("0.1.0", 2, 77, 90, "/s", 4, [session], 0, 0))
    assert out[-1] == ("replacing /p/fooScript.sml (pid 321 → 654, for 1m15s): ancestor mylibTheory rebuilt; "
                       "the new server is catching up")

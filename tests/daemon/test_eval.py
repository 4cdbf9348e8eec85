"""eval through the daemon: the prelude, echoed expressions, positions, warnings, stderr, persistence."""

from __future__ import annotations

from holctl.render import render
from holsrv.answers import evalcode
from holsrv.lsp import replies
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT

TWO_ANCESTORS = GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors arithmetic list")
MISSING_ANCESTOR = GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors nosuchthing")


def evaluate(daemon, path, code: str) -> m.EvalResult:
    return daemon.call(m.Eval(str(path), code))


def everything(reply: m.EvalResult) -> str:
    return "\n".join([reply.output, reply.stderr, *reply.errors, *reply.warnings])


def test_a_bare_expression_prints_its_value(daemon, write_script):
    reply = evaluate(daemon, write_script(GOOD_SCRIPT), "EVAL ``LENGTH [1;2;3]``;")
    assert reply.errors == []
    assert reply.output == "⊢ LENGTH [1; 2; 3] = 3\n"


def test_a_final_expression_after_declarations_prints_its_value_and_units_print_nothing(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    reply = evaluate(daemon, path, "open listTheory; LENGTH_APPEND;")
    assert reply.errors == [] and reply.output == "⊢ ∀l1 l2. LENGTH (l1 ++ l2) = LENGTH l1 + LENGTH l2\n"
    unit = evaluate(daemon, path, 'val n = 1;\nprint "quiet\\n";')
    assert unit.output == "" and "quiet" in unit.stderr
    printed = evaluate(daemon, path, "PolyML.print (1 + 2);")
    assert printed.output == "3\n"


def test_db_find_prints_what_it_found(daemon, write_script):
    reply = evaluate(daemon, write_script(GOOD_SCRIPT), 'DB.find "ADD_COMM";')
    assert reply.errors == []
    assert '"ADD_COMM"' in reply.output and "m + n = n + m" in reply.output


def test_the_scripts_ancestor_theories_are_open_and_a_prelude_that_worked_says_nothing(daemon, write_script):
    reply = evaluate(daemon, write_script(TWO_ANCESTORS), "ADD_COMM;\n")
    assert reply.errors == []
    assert reply.output == "⊢ ∀m n. m + n = n + m\n"
    assert reply.warnings == []
    both = evaluate(daemon, write_script(TWO_ANCESTORS), "PolyML.print ADD_COMM;\nPolyML.print LENGTH_APPEND;")
    assert both.errors == [] and "LENGTH (l1 ++ l2)" in both.output


def test_an_ancestor_that_cannot_be_opened_is_a_warning_and_the_code_still_runs(daemon, write_script):
    reply = evaluate(daemon, write_script(MISSING_ANCESTOR), "EVAL ``1 + 2``;")
    assert reply.errors == []
    assert reply.output == "⊢ 1 + 2 = 3\n"
    assert "prelude: Structure (nosuchthingTheory) has not been declared" in reply.warnings


def test_a_soft_report_is_a_warning_not_an_error(daemon, write_script):
    reply = evaluate(daemon, write_script(GOOD_SCRIPT), "val f = fn 0 => 1;")
    assert reply.errors == []
    assert "1:9: Matches are not exhaustive." in reply.warnings


def test_a_parse_error_is_an_error_though_hol_marks_it_soft(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    declaration = evaluate(daemon, path, "val x = ;")
    assert declaration.errors == ["1:9: expected an expression"]
    assert declaration.warnings == [] and declaration.output == ""
    expression = evaluate(daemon, path, "1 + ;")
    assert [e.split(": ", 1)[1].splitlines()[0] for e in expression.errors] == [
        "expected an expression", "Type error in function application."]
    assert expression.output == ""


def test_an_uncaught_exception_is_an_error_and_prints_no_value(daemon, write_script):
    reply = evaluate(daemon, write_script(GOOD_SCRIPT), 'raise Fail "boom";')
    assert reply.output == ""
    assert reply.errors == ['1:1: Exception Fail "boom" raised']
    # HOL's note on the never-bound `it` is soft: a warning, not a second error.
    assert [w for w in reply.warnings if "free type variable" in w]


def test_the_placeholder_echo_of_an_expression_that_raised_is_not_shown_wherever_hol_puts_it():
    # The recording puts a print's output at 0:0, not on the declaration that printed.
    sent = evalcode.prepare('raise Fail "boom";', [])
    expression = sent.prelude_lines + 2  # the line after the wrapper's `val it = (`
    at = lambda line, a, b: replies.Range(replies.Position(line, a), replies.Position(line, b))  # noqa: E731
    reports = [
        replies.ErrorReport(pos=at(expression, 0, 17), msg='Exception Fail "boom" raised\n', hard=True),
        replies.ToplevelOut(pos=replies.Position(0, 0), body="()\n"),
    ]
    outcome = evalcode.read(reports, sent, "utf-8")
    assert outcome.errors == ['1:1: Exception Fail "boom" raised']
    assert outcome.output == ""
    ran = evalcode.read([replies.ToplevelOut(pos=replies.Position(0, 0), body="()\n")], sent, "utf-8")
    assert ran.output == "()\n", "a () the code did print is not dropped when nothing failed"


def test_error_positions_count_the_agents_lines_not_the_prelude(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    declarations = evaluate(daemon, path, "val a = 1;\nval z = 1 + true;")
    assert [e.split(": ", 1)[0] for e in declarations.errors] == ["2:9"]
    expression = evaluate(daemon, path, "\n  1 + true;")
    assert [e.split(": ", 1)[0] for e in expression.errors] == ["2:3"]
    assert expression.output == ""
    after_a_declaration = evaluate(daemon, path, "val a = 1; a + true;")
    assert [e.split(": ", 1)[0] for e in after_a_declaration.errors] == ["1:12"]


def test_holdep_noise_stays_out_of_the_answer_but_a_real_miss_does_not(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    reply = evaluate(daemon, path, 'TextIO.print "said\\n";')
    assert "said" in reply.stderr
    assert "Cannot find file" not in everything(reply) and "error in load" not in everything(reply)
    missing = evaluate(daemon, path, "open fooLib;")
    assert [e for e in missing.errors if "Structure (fooLib) has not been declared" in e]


def test_bindings_last_for_one_call_and_the_prelude_is_there_every_time(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    same_call = evaluate(daemon, path, "val kept = 42;\nkept;")
    assert same_call.output == "42\n" and same_call.errors == []
    next_call = evaluate(daemon, path, "kept;")
    assert [e for e in next_call.errors if "Value or constructor (kept) has not been declared" in e]
    again = evaluate(daemon, path, "EVAL ``LENGTH [1]``;")
    assert again.output == "⊢ LENGTH [1] = 1\n"


def test_an_undeclared_name_in_eval_keeps_hol_s_error_and_hints_to_search_for_it(daemon, write_script):
    reply = evaluate(daemon, write_script(GOOD_SCRIPT), "PolyML.print nosuch_thing;")
    assert reply.errors == ["1:14: Value or constructor (nosuch_thing) has not been declared"]
    [hint] = reply.hints
    assert "`search nosuch_thing`" in hint
    assert f"error: {reply.errors[0]}\n    hint: {hint}" in render(reply)
    assert evaluate(daemon, write_script(GOOD_SCRIPT), "1 + 1;").hints == []

"""Statements as HOL reads them, and where two scripts' statements differ (`holsrv.text.statements`),
and a repository's HEAD read from `.git`'s files (`holsrv.disk.gitrefs.head_key`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from holsrv.disk import gitrefs
from holsrv.text import statements, stepping

SCRIPT = """\
Theory t
Ancestors arithmetic

(* Theorem ghost: F  -- a comment declares nothing *)
Theorem add0[simp]:
  !n. n + 0 = n  (* trailing comment *)
Proof
  simp[]
QED

Definition dbl_def:
  dbl n = 2 * n
End

Datatype:
  tree = Leaf | Node tree tree
End

Theorem derived = REWRITE_RULE [] add0
"""


def of(text: str) -> dict[str, statements.Statement]:
    """The statements of `text`, as the daemon reads them (in steps)."""
    return stepping.run(statements.steps(text))


def changes(before: str, after: str) -> list[tuple[str, str]]:
    return [(c.name, c.change) for c in statements.compare(of(before), of(after))]


def test_theorems_definitions_datatypes_and_derived_theorems_are_read_and_comments_declare_nothing():
    found = of(SCRIPT)
    assert list(found) == ["add0", "derived", "dbl_def", "Datatype tree"]
    assert found["add0"].text == "!n. n + 0 = n  (* trailing comment *)"  # as written, attributes aside
    assert (found["dbl_def"].kind, found["Datatype tree"].kind) == ("definition", "definition")


@pytest.mark.parametrize("same", [
    "∀n. n+0 = n",  # Unicode for ASCII, no spaces around an operator
    "!n.\n    n + 0 (* a comment *) = n",
    "! n. n + 0 = n",
])
def test_layout_comments_and_ascii_spellings_do_not_change_a_statement(same):
    assert changes(SCRIPT, SCRIPT.replace("!n. n + 0 = n  (* trailing comment *)", same)) == []


@pytest.mark.parametrize("other", [
    "!n. n + 0 >= n",  # weakened
    "!n. n + 00 = n",
    "!n. n ++ 0 = n",  # two tokens joined are another token
    '!n. n + 0 = n /\\ "a  b" = "a b"',
])
def test_a_token_changed_changes_the_statement(other):
    assert changes(SCRIPT, SCRIPT.replace("!n. n + 0 = n", other)) == [("add0", "changed")]


def test_words_joined_are_another_word_and_strings_keep_their_spaces():
    assert statements.normal("SUC n") != statements.normal("SUCn")
    assert statements.normal('f "a  b"') != statements.normal('f "a b"')
    assert statements.normal("a + + b") != statements.normal("a ++ b")


def test_removed_renamed_added_and_a_changed_definition():
    renamed = SCRIPT.replace("Theorem add0[simp]:", "Theorem add_zero[simp]:")
    assert changes(SCRIPT, renamed) == [("add0", "renamed")]
    [change] = statements.compare(of(SCRIPT), of(renamed))
    assert (change.renamed_to, change.allowed) == ("add_zero", False)
    assert changes(SCRIPT, SCRIPT.replace("Theorem derived = REWRITE_RULE [] add0\n", "")) == [("derived", "removed")]
    more = SCRIPT + "\nTheorem more:\n  T\nProof\n  simp[]\nQED\n"
    added = statements.compare(of(SCRIPT), of(more))
    assert [(c.name, c.change, c.allowed) for c in added] == [("more", "added", True)]
    assert changes(SCRIPT, SCRIPT.replace("dbl n = 2 * n", "dbl n = n * 2")) == [("dbl_def", "changed")]
    assert changes(SCRIPT, SCRIPT.replace("Leaf | Node", "Leaf | Twig | Node")) == [("Datatype tree", "changed")]


def _git(directory: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "HOME": str(directory)}
    subprocess.run(["git", *args], cwd=directory, env=env, check=True, capture_output=True, timeout=30)


def test_head_is_read_from_git_files_in_a_repository_and_a_worktree(tmp_path):
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    assert gitrefs.head_key(repo / "sub") is None
    _git(repo, "init", "-q")
    assert gitrefs.head_key(repo / "sub").startswith("unborn refs/heads/")
    (repo / "a.sml").write_text("x")
    _git(repo, "add", "a.sml")
    _git(repo, "commit", "-qm", "one")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                          timeout=30).stdout.strip()
    assert gitrefs.head_key(repo / "sub") == head
    _git(repo, "worktree", "add", "-q", "-b", "other", str(tmp_path / "wt"))
    assert gitrefs.head_key(tmp_path / "wt") == head
    _git(repo, "pack-refs", "--all")
    assert gitrefs.head_key(repo) == head


@pytest.mark.asyncio
async def test_a_committed_text_is_read_and_a_missing_one_says_why(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    missing = await gitrefs.committed(repo / "fooScript.sml", "HEAD", 30.0)
    assert missing.text is None and "is not in a git repository" in missing.why
    _git(repo, "init", "-q")
    (repo / "fooScript.sml").write_text("Theory foo\n")
    _git(repo, "add", "fooScript.sml")
    _git(repo, "commit", "-qm", "one")
    (repo / "fooScript.sml").write_text("changed on disk\n")
    got = await gitrefs.committed(repo / "fooScript.sml", "HEAD", 30.0)
    assert got.text == "Theory foo\n" and len(got.commit) == 40
    other = await gitrefs.committed(repo / "barScript.sml", "HEAD", 30.0)
    assert other.text is None and other.not_committed and "barScript.sml is not in commit" in other.why
    assert gitrefs.bad_revision("--output=x") and gitrefs.bad_revision("a b") and not gitrefs.bad_revision("HEAD~1")

"""The README and docs/ against the code: links resolve, and every error code,
setting and holctl command the code has is documented where a reader looks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from holctl.calls import failure_for
from holctl.cli import cli
from holsrv import errors
from holsrv.config import settings
from holsrv.errors import error_for_code
from holsrv.main import main as holsrv_main

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

# [text](target) outside code; `_links` skips targets with a scheme, and a bare #anchor is the page's own.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.MULTILINE)


def _anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return {_anchor(heading) for heading in _HEADING.findall(text)}


def _links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [target for target in _LINK.findall(text) if "://" not in target and not target.startswith("mailto:")]


def _sent_codes() -> set[str]:
    """Every code the daemon or a client can report: the error classes', and the
    literal codes of ErrorReply frames built in place (`connection_closed`, `internal`)."""
    codes = {errors.HolsrvError.code} | {cls.code for cls in errors._all_subclasses(errors.HolsrvError)}
    literal = re.compile(r"ErrorReply\(\s*\"([a-z0-9_]+)\"")
    for source in (ROOT / "holsrv").rglob("*.py"):
        codes |= set(literal.findall(source.read_text(encoding="utf-8")))
    return codes


def test_the_readme_and_every_docs_page_exist():
    assert (ROOT / "README.md").is_file()
    for name in ["settings", "errors", "security", "performance", "operations", "design"]:
        assert (DOCS / f"{name}.md").is_file(), f"docs/{name}.md is missing"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_an_existing_file_and_heading(page: Path):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not broken, f"{page.relative_to(ROOT)} links to what is not there: {broken}"


def test_the_readme_links_every_docs_page():
    readme = ROOT / "README.md"
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in _links(readme)}
    unlinked = [page.name for page in DOCS.glob("*.md") if page.resolve() not in linked]
    assert not unlinked, f"README.md does not link {unlinked}"


def _explained_codes() -> set[str]:
    """The codes docs/errors.md explains: those in the first cell of its table's rows."""
    table = (DOCS / "errors.md").read_text(encoding="utf-8").split("## Exit statuses")[0]
    named: set[str] = set()
    for first_cell in re.findall(r"^\| ([^|]*) \|", table, re.MULTILINE):
        named |= set(re.findall(r"`([a-z0-9_]+)`", first_cell))
    return named


def test_every_error_code_the_code_can_report_is_explained_in_docs_errors():
    codes = _sent_codes()
    assert {"bad_request", "connection_closed", "internal"} <= codes, "the code scan found too little"
    missing = sorted(codes - _explained_codes())
    assert not missing, f"docs/errors.md's table does not explain {missing}"


def test_every_code_in_docs_errors_is_one_the_code_has():
    named = _explained_codes()
    invented = sorted(named - _sent_codes())
    assert named and not invented, f"docs/errors.md lists codes the code does not have: {invented}"


def test_docs_errors_gives_each_code_the_exit_status_holctl_exits_with():
    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    statuses = text.split("## Exit statuses", 1)[1]
    documented = {}
    for status, codes in re.findall(r"^\| (\d) \| (.*) \|$", statuses, re.MULTILINE):
        for code in re.findall(r"`([a-z0-9_]+)`", codes):
            documented[code] = int(status)
    # already_running is holsrv's own refusal to start, never a reply holctl gets.
    holctl = {code: failure_for(error_for_code(code, "x")).exit_code for code in _sent_codes() - {"already_running"}}
    wrong = {code: (documented.get(code), status) for code, status in holctl.items() if documented.get(code) != status}
    assert not wrong, f"docs/errors.md's exit statuses (documented, holctl's): {wrong}"


def _settings_sections() -> dict[str, str]:
    """docs/settings.md's text under each `## ` heading."""
    parts = re.split(r"^## (.+)$", (DOCS / "settings.md").read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_every_setting_its_environment_names_and_every_holsrv_flag_are_in_docs_settings():
    """A user's settings in the first table, an operator's in the second, each with
    every environment name it is read from; each constant in the list with its value;
    no constant in a table, where it would look like something to set."""
    text = (DOCS / "settings.md").read_text(encoding="utf-8")
    sections = _settings_sections()
    missing = []
    for title, names in [("User settings", settings.USER), ("Operator settings", settings.OPERATOR)]:
        table = sections[title]
        missing += [f"{name} in {title!r}" for setting in sorted(names)
                    for name in (setting, *settings.env_names(setting)) if f"`{name}`" not in table]
        missing += [f"no constant's {name} in {title!r}" for setting in sorted(settings.CONSTANTS)
                    for name in settings.env_names(setting) if f"`{name}`" in table]
    defaults, constants = settings.Settings(), sections["Constants"]
    missing += [f"`{name}` = {settings.show(getattr(defaults, name))} in 'Constants'"
                for name in sorted(settings.CONSTANTS)
                if f"`{name}` = {settings.show(getattr(defaults, name))}" not in constants]
    assert len(settings.USER) >= 12 and len(settings.CONSTANTS) >= 20, "the settings' kinds were not found"
    flags = [opt for param in holsrv_main.params if not getattr(param, "hidden", False) for opt in param.opts
             if opt.startswith("--") and opt != "--version"]
    assert "--hol" in flags and "--log-file" in flags, "holsrv's flags were not found"
    missing += [flag for flag in flags if f"`{flag}" not in text]
    assert not missing, f"docs/settings.md does not say {missing}"


def test_every_holctl_command_and_option_is_in_docs_holctl():
    text = (DOCS / "holctl.md").read_text(encoding="utf-8")
    missing = [name for name in cli.commands if f"`{name}" not in text]
    for command in [cli, *cli.commands.values()]:
        for param in command.params:
            missing += [f"{command.name} {opt}" for opt in param.opts if opt.startswith("--") and opt not in text]
    assert not missing, f"docs/holctl.md does not mention {missing}"


# `docs/protocol.md#anchor`, or `protocol.md#anchor` in a link from docs/, and the `, #more` anchors after it.
_PROTOCOL_CITE = re.compile(r"protocol\.md(#[\w-]+(?:,\s*#[\w-]+)*)")
_CITING = ["holsrv", "holctl", "holmcp", "tests", "bench", "docs"]


def _protocol_citations() -> dict[str, list[str]]:
    """Each anchor of docs/protocol.md cited in the tree, with where: `file:line`."""
    cited: dict[str, list[str]] = {}
    sources = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    for top in _CITING:
        sources += [p for p in sorted((ROOT / top).rglob("*")) if p.suffix in (".py", ".md")]
    for source in sources:
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            for anchors in _PROTOCOL_CITE.findall(line):
                for anchor in re.findall(r"#([\w-]+)", anchors):
                    cited.setdefault(anchor, []).append(f"{source.relative_to(ROOT)}:{number}")
    return cited


def test_every_cited_docs_protocol_anchor_is_a_heading_there():
    cited = _protocol_citations()
    assert len(cited) > 30, "the citations of docs/protocol.md were not found"
    headings = _anchors(DOCS / "protocol.md")
    # `docs/protocol.md#anchor` itself is how the docs name the form.
    missing = {anchor: where for anchor, where in cited.items() if anchor not in headings | {"anchor"}}
    assert not missing, f"cited anchors docs/protocol.md has no heading for: {missing}"


def test_the_code_cites_docs_protocol_not_the_protocol_notes_outside_the_project():
    old = re.compile(r"PROTOCOL\.md\s*§|(?<![\w.])§\d")
    stale = [f"{path.relative_to(ROOT)}:{number}"
             for top in ["holsrv", "holctl", "holmcp"] for path in sorted((ROOT / top).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if old.search(line)]
    assert not stale, f"cite docs/protocol.md#anchor instead of a section of PROTOCOL.md: {stale}"

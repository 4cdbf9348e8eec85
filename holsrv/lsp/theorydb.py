"""HOL's theorem database where `$/hol/search` has no selector for the question, through `$/eval`.

Each call sends one declaration that prints one SML string (`PolyML.print`
shows it quoted, on one line), with `holdep` 0 so nothing is loaded first.
Every function called is in HOL's `src/`:

* `DB.polarity_search : bool -> term -> public_data list` (postkernel/DB.sig):
  `true` finds the theorems with a subterm matching the pattern among the
  "positive" parts of the statement (its conclusions), `false` among the
  "negative" ones (its hypotheses; `DB.dest_polarity` splits them);
* `Theory.ancestry : string -> string list` (postkernel/Theory.sig);
* `DB.fetch : string -> string -> thm`, `DB.thms : string -> (string * thm) list`
  (postkernel/DB.sig), `Thm.tag` (prekernel/FinalThm-sig.sml), `Tag.dep_of`
  (prekernel/Tag.sig), `Dep.depid_of`, `Dep.depnumber_of`, `Dep.depidl_of`
  (prekernel/Dep.sig): a theorem's dependencies as (theory, number) pairs,
  named back through the numbers of the theory's theorems, as
  `src/AI/machine_learning/mlThmData.sml` (`thmid_of_depid`) does;
* `Parse.Term`, `Feedback.exn_to_string`, `Lib.can`, and the Basis's `String.concatWith`,
  `List.find`, `List.mapPartial`;
* for a server without a `$/hol/search` backend (`find_code`): `DB.listDB`,
  `DB.match : string list -> term -> data list`, `DB.definitions`, `DB.axioms`
  (postkernel/DB.sig), `Parse.thm_to_string`; the data's theorem is
  fetched again by name rather than taken apart, as its tuple grew over HOL's versions.

A failure inside the code is printed as `!` and HOL's words, so it is an
answer (`DbError`), not a compile error.
"""

from __future__ import annotations

from holsrv.errors import LspError
from holsrv.lsp.evalreports import ErrorReport, ToplevelOut, decode_eval_reports
from holsrv.lsp.quirks import readable, sml_string, sml_unquote

# Appended to every call: HOL's words for what went wrong, rather than an uncaught exception.
_FAILED = ' handle e => "!" ^ Feedback.exn_to_string e);'
FAILED = _FAILED  # for other modules' queries in the same shape (`inheritedcheats`)


class DbError(Exception):
    """HOL could not answer: the pattern did not parse, the theorem is unknown, …; `str` is HOL's words."""


def polarity_code(conclusion: bool, pattern: str) -> str:
    """The code naming (`theory.name`) the theorems whose conclusion (hypothesis) contains `pattern`."""
    side = "true" if conclusion else "false"
    return (f'val _ = PolyML.print (String.concatWith " " (map (fn ((thy, name), _) => thy ^ "." ^ name) '
            f"(DB.polarity_search {side} (Parse.Term [QUOTE {sml_string(pattern)}])))" + _FAILED)


def ancestry_code(theories: list[str]) -> str:
    """The code naming each theory and its ancestors, as HOL's theory graph has them."""
    listed = ", ".join(sml_string(t) for t in theories)
    return ('val _ = PolyML.print (String.concatWith " " (List.concat (map (fn t => t :: '
            f"(Theory.ancestry t handle _ => [])) [{listed}]))" + _FAILED)


def dependencies_code(theory: str, name: str) -> str:
    """The code naming what `theory.name`'s proof used, by HOL's dependency tags
    (`theory#n` for one whose number no theorem of its theory has)."""
    return ("val _ = PolyML.print (let fun num th = Dep.depnumber_of (Dep.depid_of (Tag.dep_of (Thm.tag th))) "
            "fun named (thy, n) = case List.find (fn (_, th) => (num th = n handle _ => false)) (DB.thms thy) of "
            'SOME (nm, _) => thy ^ "." ^ nm | NONE => thy ^ "#" ^ Int.toString n '
            'in String.concatWith " " (map named (Dep.depidl_of (Tag.dep_of (Thm.tag '
            f"(DB.fetch {sml_string(theory)} {sml_string(name)}))))) end" + _FAILED)


def stored_code(names: list[str], theories: list[str]) -> str:
    """The code naming (`theory.name`) those of `names` a theory of `theories` stores, the first that does."""
    listed = ", ".join(sml_string(n) for n in names)
    among = ", ".join(sml_string(t) for t in theories)
    return ('val _ = PolyML.print (String.concatWith " " (List.mapPartial (fn n => case List.find (fn t => '
            f'Lib.can (DB.fetch t) n) [{among}] of SOME t => SOME (t ^ "." ^ n) | NONE => NONE) [{listed}])'
            + _FAILED)


def find_code(theories: list[str], names: list[str], pattern: str, cap: int) -> str:
    """The code listing, one a line as `theory TAB name TAB class TAB statement`, the theorems of the
    loaded theories whose theory is one of `theories` (any when empty), whose name holds every one of
    `names` (any case, as plain text: `DB.find` would read a fragment as a regular expression), and,
    with a `pattern`, whose conclusion has a subterm it matches (`DB.match`); at most `cap` of them."""
    among = ", ".join(sml_string(t) for t in theories)
    held = ", ".join(sml_string(n.lower()) for n in names)
    found = f"DB.match [] (Parse.Term [QUOTE {sml_string(pattern)}])" if pattern else "DB.listDB ()"
    return ("val _ = PolyML.print (let fun low s = String.map Char.toLower s "
            f"fun has (l, x) = List.exists (fn y => y = x) l val thys = [{among}] val names = [{held}] "
            f"val found = {found} "
            "fun keep ((thy, name), _) = (null thys orelse has (thys, thy)) andalso "
            "List.all (fn n => String.isSubstring n (low name)) names "
            "fun cls (thy, name) = if has (map #1 (DB.definitions thy), name) then \"Def\" "
            "else if has (map #1 (DB.axioms thy), name) then \"Axm\" else \"Thm\" "
            "fun flat s = String.translate (fn #\"\\n\" => \" \" | c => String.str c) s "
            "fun show ((thy, name), _) = String.concatWith \"\\t\" "
            "[thy, name, cls (thy, name), flat (Parse.thm_to_string (DB.fetch thy name))] "
            f"val kept = List.filter keep found in String.concatWith \"\\n\" "
            f"(map show (List.take (kept, Int.min ({cap}, length kept)))) end" + _FAILED)


def found_rows(printed: str) -> list[tuple[str, str, str, str]]:
    """`find_code`'s answer as (theory, name, class, statement) rows."""
    rows = []
    for line in printed.splitlines():
        parts = line.split("\t", 3)
        if len(parts) == 4:
            rows.append((parts[0], parts[1], parts[2], readable(parts[3]).strip()))
    return rows


async def printed(hol, code: str, timeout: float) -> str:
    """Run one of the codes above; the string it printed.  Raises `DbError` with HOL's words
    when the code failed inside, `LspError` when the eval itself did."""
    reports = decode_eval_reports(await hol.eval(code, timeout, holdep=0))
    errors = [r for r in reports if isinstance(r, ErrorReport) and r.hard]
    if errors:
        raise LspError(f"HOL did not compile the daemon's database query: {errors[0].msg.strip()}")
    said = sml_unquote("".join(r.body for r in reports if isinstance(r, ToplevelOut)).strip())
    if said.startswith("!"):
        raise DbError(" ".join(readable(said[1:]).split()))
    return said


async def ask(hol, code: str, timeout: float) -> list[str]:
    """Run one of the codes above; the words it printed (see `printed`)."""
    return (await printed(hol, code, timeout)).split()

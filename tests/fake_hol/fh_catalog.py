"""Built-in knowledge of the fake HOL: which theories and libraries "exist",
a few standard theorems (for workspace/symbol, definition, search, completion)
and SML values with types (for hover and completion).

The lists are generous rather than exact: a test scripts' `Ancestors` line
should only block when it names something deliberately made up.
"""

STD_THEORIES = frozenset("""
    bool num arithmetic list pred_set combin pair option prim_rec relation
    rich_list sorting string integer real words finite_map set_relation while
    sum one marker ind_type bag alist llist path fcp bit numeral sat divides gcd
    logroot min sat numpair basicSize normalForms quantHeuristics transc
    int_arith intreal real_sigma poly seq lim topology metric nets
    powser prime cardinal ordinal wellorder fixedPoint container ternaryComparisons
    toto cmp lprefix_lub patternMatches list_ext indexedLists bitstring
    ASCIInumbers numposrep string_num sptree rat frac extreal measure probability
    lebesgue martingale borel real_topology util_prob ratRing integer_word
    blast sum_num sigma_algebra hrat hreal realax iterate derivative
    integration complex ring group field monoid number combinatorics
    """.split())

STD_LIBS = frozenset("""
    bossLib simpLib metisLib intLib numLib realLib BasicProvers boolLib Parse
    HolKernel Term Type Thm Drule Conv Tactic Tactical Rewrite listLib
    pred_setLib stringLib wordsLib finite_mapLib optionLib pairLib combinLib
    arithmeticLib mesonLib tautLib dep_rewrite lcsymtacs Q Unicode Abbrev
    markerLib TotalDefn Defn DefnBase Datatype IndDefLib computeLib EVAL
    RealArith intSimps numSimps listSimps pred_setSimps boolSimps pureSimps
    cv_transLib sortingLib blastLib bitstringLib holyHammer permLib
    SatisfySimps quantHeuristicsLib liteLib Opentheory HolSatLib realSimps
    transcLib fcpLib bagLib containerLib wordsSyntax numSyntax listSyntax
    """.split())

HOL_SCRIPT_PATHS = {
    "bool": "src/bool/boolScript.sml",
    "arithmetic": "src/num/theories/arithmeticScript.sml",
    "prim_rec": "src/num/theories/prim_recScript.sml",
    "list": "src/list/src/listScript.sml",
    "rich_list": "src/list/src/rich_listScript.sml",
    "pred_set": "src/pred_set/src/pred_setScript.sml",
    "quantHeuristics": "src/quantHeuristics/quantHeuristicsScript.sml",
    "combin": "src/combin/combinScript.sml",
}

# (name, theory, 0-based line in the theory's script, statement, class)
_KNOWN = [
    ("ADD_COMM", "arithmetic", 309, "⊢ ∀m n. m + n = n + m", "Thm"),
    ("ADD_ASSOC", "arithmetic", 311, "⊢ ∀m n p. m + (n + p) = m + n + p", "Thm"),
    ("ADD_0", "arithmetic", 280, "⊢ ∀n. n + 0 = n", "Thm"),
    ("ADD_CLAUSES", "arithmetic", 330, "⊢ 0 + m = m ∧ m + 0 = m", "Thm"),
    ("MULT_COMM", "arithmetic", 402, "⊢ ∀m n. m * n = n * m", "Thm"),
    ("MULT_CLAUSES", "arithmetic", 420, "⊢ ∀m n. 0 * m = 0 ∧ m * 0 = 0", "Thm"),
    ("LESS_EQ_REFL", "arithmetic", 520, "⊢ ∀m. m ≤ m", "Thm"),
    ("ADD_DEF", "arithmetic", 60, "⊢ (∀n. 0 + n = n) ∧ ∀m n. SUC m + n = SUC (m + n)", "Def"),
    ("CONJ_COMM", "bool", 759, "⊢ ∀t1 t2. t1 ∧ t2 ⇔ t2 ∧ t1", "Thm"),
    ("CONJ_ASSOC", "bool", 740, "⊢ ∀t1 t2 t3. t1 ∧ t2 ∧ t3 ⇔ (t1 ∧ t2) ∧ t3", "Thm"),
    ("DISJ_COMM", "bool", 770, "⊢ ∀A B. A ∨ B ⇔ B ∨ A", "Thm"),
    ("TRUTH", "bool", 120, "⊢ T", "Thm"),
    ("EQ_REFL", "bool", 130, "⊢ ∀x. x = x", "Thm"),
    ("T_DEF", "bool", 40, "⊢ T ⇔ (λx. x) = (λx. x)", "Def"),
    ("I_THM", "combin", 90, "⊢ ∀x. I x = x", "Thm"),
    ("LENGTH_APPEND", "list", 700, "⊢ ∀l1 l2. LENGTH (l1 ++ l2) = LENGTH l1 + LENGTH l2", "Thm"),
    # What the HOL found through `DB.find "FILTER"` when its search backend answered nothing.
    ("FILTER_APPEND_DISTRIB", "list", 760, "⊢ ∀P L M. FILTER P (L ++ M) = FILTER P L ++ FILTER P M", "Thm"),
    ("MAP_APPEND", "list", 720, "⊢ ∀f l1 l2. MAP f (l1 ++ l2) = MAP f l1 ++ MAP f l2", "Thm"),
    # rich_list re-exports it under the same name (transcript eval-errors: DB.find lists both).
    ("REVERSE_REVERSE", "list", 1999, "⊢ ∀l. REVERSE (REVERSE l) = l", "Thm"),
    ("REVERSE_REVERSE", "rich_list", 300, "⊢ ∀l. REVERSE (REVERSE l) = l", "Thm"),
    # ≤ in the conclusion of one, only in the hypothesis of the other (DB.polarity_search tells them apart).
    ("LESS_EQ_ADD", "arithmetic", 540, "⊢ ∀m n. m ≤ m + n", "Thm"),
    ("SUB_ADD", "arithmetic", 600, "⊢ ∀m n. n ≤ m ⇒ m − n + n = m", "Thm"),
]

# What a theorem's proof used, as its dependency tags name it (`Tag.dep_of`):
# (theory, name) -> (theory, name) list, a name None for a theorem whose number
# no stored theorem of that theory has (HOL's `thy#n`).  Made up, but shaped as HOL's.
DEPENDENCIES = {
    ("arithmetic", "ADD_COMM"): [("arithmetic", "ADD_0"), ("arithmetic", "ADD_CLAUSES"), ("num", None)],
    ("arithmetic", "ADD_0"): [("arithmetic", "ADD_DEF")],
}

# Each theory's parents: a small part of HOL's theory graph, the same shape
# (`Theory.ancestry` is the transitive closure; list does not build on rich_list).
PARENTS = {
    "min": [], "bool": ["min"], "marker": ["bool"], "combin": ["bool", "marker"], "relation": ["combin"],
    "num": ["bool"], "prim_rec": ["num", "relation"], "arithmetic": ["prim_rec"], "pair": ["relation"],
    "option": ["pair"], "pred_set": ["arithmetic"], "list": ["pred_set", "option"], "rich_list": ["list"],
    "quantHeuristics": ["list"],
}


def ancestry(theory):
    """`Theory.ancestry theory`: every theory it builds on, nearest first; KeyError if not loaded."""
    out, todo = [], list(PARENTS[theory])
    while todo:
        parent = todo.pop(0)
        if parent not in out:
            out.append(parent)
            todo += PARENTS.get(parent, [])
    return out

# Theorem names as the real server listed them for the completion prefix
# "si" (checkproofs-utf8-session transcript), in its order.
_LISTED = [
    ("list", "SING_HD SINGL_APPLY_MAP SINGL_APPLY_PERMUTE SINGL_LIST_APPLY_L "
             "SINGL_LIST_APPLY_R SINGL_SINGL_APPLY"),
    ("pred_set", "SIGMA_CARD_CONSTANT SIGMA_CARD_SAME_SIZE_SETS SIGMA_CONG "
                 "SIGMA_CONSTANT SIGMA_LE_SIGMA SIMPLE_FINITE_INDUCT SING "
                 "SING_applied SING_CARD_1 SING_DEF SING_DELETE SING_ELEMENT "
                 "SING_EMPTY SING_FINITE SING_IFF_CARD1 SING_IFF_EMPTY_REST "
                 "SING_INSERT SING_INTER SING_ONE_ELEMENT SING_partitions "
                 "SING_TEST SING_UNION"),
    ("prim_rec", "SIMP_REC SIMP_REC_EXISTS SIMP_REC_REL SIMP_REC_REL_UNIQUE "
                 "SIMP_REC_REL_UNIQUE_RESULT SIMP_REC_THM"),
    ("quantHeuristics",
     "SIMPLE_GUESS_EXISTS_ALT_DEF SIMPLE_GUESS_EXISTS_AND_1 "
     "SIMPLE_GUESS_EXISTS_AND_2 SIMPLE_GUESS_EXISTS_def SIMPLE_GUESS_EXISTS_EQ_1 "
     "SIMPLE_GUESS_EXISTS_EQ_2 SIMPLE_GUESS_EXISTS_EQ_FUN SIMPLE_GUESS_EXISTS_EQ_T "
     "SIMPLE_GUESS_EXISTS_EXISTS SIMPLE_GUESS_EXISTS_FORALL SIMPLE_GUESS_EXISTS_NEG "
     "SIMPLE_GUESS_EXISTS_THM SIMPLE_GUESS_FORALL_ALT_DEF SIMPLE_GUESS_FORALL_def "
     "SIMPLE_GUESS_FORALL_EXISTS SIMPLE_GUESS_FORALL_FORALL SIMPLE_GUESS_FORALL_IMP_1 "
     "SIMPLE_GUESS_FORALL_IMP_2 SIMPLE_GUESS_FORALL_NEG SIMPLE_GUESS_FORALL_OR_1 "
     "SIMPLE_GUESS_FORALL_OR_2 SIMPLE_GUESS_FORALL_THM SIMPLE_GUESS_SELECT_THM "
     "SIMPLE_GUESS_SOME_THM SIMPLE_GUESS_UEXISTS_THM"),
    ("rich_list", "SING_LIST_TO_SET"),
]


def _theorems():
    out = list(_KNOWN)
    for theory, names in _LISTED:
        for i, name in enumerate(names.split()):
            out.append((name, theory, 1000 + 7 * i, "⊢ T", "Thm"))
    return out


THEOREMS = _theorems()
THEOREM_BY_NAME = {t[0]: t for t in reversed(THEOREMS)}  # a name's first theory wins

# SML values in scope in a HOL session: name -> type, for hover/completion.
SML_VALUES = {
    "simp": "Thm.thm list -> Tactic.tactic",
    "simp_tac": "simpLib.simpset -> Thm.thm list -> Tactic.tactic",
    "simple_assert": "string -> bool -> unit",
    "single": "'a -> 'a list",
    "singleton_of_list": "'a list -> 'a",
    "singt": "'a -> 'a HOLset.set",
    "size": "string -> int",
    "rw": "Thm.thm list -> Tactic.tactic",
    "fs": "Thm.thm list -> Tactic.tactic",
    "gs": "Thm.thm list -> Tactic.tactic",
    "gvs": "Thm.thm list -> Tactic.tactic",
    "metis_tac": "Thm.thm list -> Tactic.tactic",
    "gen_tac": "Tactic.tactic",
    "GEN_TAC": "Tactic.tactic",
    "strip_tac": "Tactic.tactic",
    "STRIP_TAC": "Tactic.tactic",
    "conj_tac": "Tactic.tactic",
    "CONJ_TAC": "Tactic.tactic",
    "disch_tac": "Tactic.tactic",
    "rpt": "Tactic.tactic -> Tactic.tactic",
    "DECIDE_TAC": "Tactic.tactic",
    "decide_tac": "Tactic.tactic",
    "EVAL_TAC": "Tactic.tactic",
    "ACCEPT_TAC": "Thm.thm -> Tactic.tactic",
    "ALL_TAC": "Tactic.tactic",
    "NO_TAC": "Tactic.tactic",
    "FAIL_TAC": "string -> Tactic.tactic",
    "Induct": "Tactic.tactic",
    "Induct_on": "Term.term Lib.frag list -> Tactic.tactic",
    "cheat": "Tactic.tactic",
    "suspend": "string -> Tactic.tactic",
    "first_x_assum": "Tactic.thm_tactic -> Tactic.tactic",
    "first_assum": "Tactic.thm_tactic -> Tactic.tactic",
    "irule": "Thm.thm -> Tactic.tactic",
    "drule": "Thm.thm -> Tactic.tactic",
    "print": "string -> unit",
}
STRUCTURES = ["simpLib", "simpfrag", "bossLib", "boolLib", "metisLib", "numLib",
              "intLib", "listTheory", "arithmeticTheory", "boolTheory"]
TYPES = ["simpset", "thm", "term", "hol_type", "tactic", "goal"]

# Tactic names whose only effect in the fake goal walker is to prove the goal.
PROVERS = frozenset("""
    simp rw fs gs gvs metis_tac DECIDE_TAC decide_tac cheat EVAL_TAC ACCEPT_TAC
    first_x_assum first_assum simp_tac SIMP_TAC RW_TAC srw_tac fsrw_tac
    asm_simp_tac ASM_SIMP_TAC full_simp_tac FULL_SIMP_TAC PROVE_TAC prove_tac
    ARITH_TAC intLib.ARITH_TAC numLib.ARITH_TAC COOPER_TAC irule MATCH_ACCEPT_TAC
    asm_rewrite_tac ASM_REWRITE_TAC rewrite_tac REWRITE_TAC TRY_TAC res_tac
    """.split())

HOL_KEYWORDS = ["Theorem", "Triviality", "Proof", "QED", "Definition", "Termination",
                "End", "Datatype", "Inductive", "CoInductive", "Resume", "Finalise",
                "Overload", "Type", "Ancestors", "Libs", "Theory"]

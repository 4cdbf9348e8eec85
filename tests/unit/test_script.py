from holsrv.text import textinfo

TWO = """\
Theory t

Theorem one:
  T
Proof
  simp[]
QED

Theorem two:
  T
Proof
  simp[]
QED
"""


def test_cheat_scan_finds_whole_words_with_their_theorem():
    text = TWO.replace("  simp[]\nQED\n\nTheorem two", "  cheat\nQED\n\nTheorem two")
    found = list(textinfo.of(text).cheats)
    assert [(c.theorem, textinfo.of(text).index.line_col(c.offset)) for c in found] == [("one", (6, 3))]


def test_cheat_scan_skips_nested_comments_and_strings():
    text = TWO.replace(
        "  simp[]\nQED\n\nTheorem two",
        '  (* not (* a *) cheat *) simp[] >> print "cheat" \nQED\n\nTheorem two',
    )
    assert list(textinfo.of(text).cheats) == []


def test_cheat_scan_ignores_words_that_merely_contain_cheat():
    text = TWO.replace("simp[]\nQED\n\nTheorem two", "cheat_tac >> cheater\nQED\n\nTheorem two")
    assert list(textinfo.of(text).cheats) == []


def test_cheat_outside_any_theorem_has_no_owner():
    found = list(textinfo.of('val th = prove(``T``, cheat);\n').cheats)
    assert [c.theorem for c in found] == [""]


def test_proof_blocks_span_proof_keyword_to_qed():
    blocks = textinfo.of(TWO).blocks
    assert [b.name for b in blocks] == ["one", "two"]
    one = blocks[0]
    assert TWO[one.start:].startswith("Theorem one")
    assert TWO[one.body_start - len("Proof"):one.body_start] == "Proof"
    assert TWO[one.body_end:].startswith("QED")


def test_resume_block_is_named_with_its_label():
    text = "Resume foo[bar]:\n  simp[]\nQED\n"
    assert [b.name for b in textinfo.of(text).blocks] == ["foo[bar]"]


def test_edit_inside_one_body_does_not_spill():
    new = TWO.replace("Proof\n  simp[]\nQED\n\nTheorem two", "Proof\n  rw[]\nQED\n\nTheorem two")
    assert textinfo.spilling_proof(TWO, new) is None


def test_edit_from_one_body_past_its_qed_spills():
    start = TWO.index("  simp[]")
    end = TWO.index("Proof", TWO.index("Theorem two"))
    new = TWO[:start] + "  rw[]\nQED\n\nTheorem two:\n  F\n" + TWO[end:]
    spill = textinfo.spilling_proof(TWO, new)
    assert spill is not None and spill.name == "one"


def test_pool_names_number_rebound_theorems_and_keep_resume_labels():
    text = TWO + TWO.replace("Theory t\n", "") + "Resume one[p]:\n  simp[]\nQED\n"
    assert [name for name, _ in textinfo.of(text).named] == ["one", "two", "one#2", "two#2", "one[p]"]


def test_line_index_agrees_with_counting_lines():
    index = textinfo.LineIndex(TWO)
    for offset in range(len(TWO) + 1):
        assert index.line(offset) == textinfo.of(TWO).index.line_col(offset)[0]


def test_cheat_inside_a_term_quotation_is_a_variable_not_a_cheat():
    text = TWO.replace(
        "  T\nProof\n  simp[]\nQED\n\nTheorem two",
        "  ∀cheat. cheat\nProof\n  qspec_then ‘cheat’ mp_tac th >> simp[``cheat``]\nQED\n\nTheorem two",
    )
    assert list(textinfo.of(text).cheats) == []
    assert [b.name for b in textinfo.of(text).blocks] == ["one", "two"]


def test_cheat_as_a_name_in_terms_and_headers_is_not_a_cheat():
    text = "Theory cheat\n\nDefinition cheat_def:\n  cheat x = x + 1\nEnd\n\n" + TWO.replace("Theory t\n", "")
    assert list(textinfo.of(text).cheats) == []
    cheating = text.replace("  simp[]\nQED\n\nTheorem two", "  cheat\nQED\n\nTheorem two")
    assert [c.theorem for c in list(textinfo.of(cheating).cheats)] == ["one"]


def test_a_termination_proof_or_code_after_an_old_datatype_is_still_scanned():
    old_datatype = "Datatype `tree = Leaf | Node tree tree`;\n\n" + TWO.replace("Theory t\n", "").replace(
        "  simp[]\nQED\n\nTheorem two", "  cheat\nQED\n\nTheorem two"
    ) + "\nDefinition f_def:\n  f x = x\nEnd\n"
    assert [c.theorem for c in list(textinfo.of(old_datatype).cheats)] == ["one"]
    termination = "Definition f_def:\n  f x = f (x - 1)\nTermination\n  cheat\nEnd\n"
    assert len(list(textinfo.of(termination).cheats)) == 1

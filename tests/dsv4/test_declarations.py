"""A builder's declarations are validated once, where capabilities are computed: a malformed one is one line and
exit 2 on every entry point, before anything runs; a builder that declares nothing is said to be judged on target
verify alone (issue 40 item 1).  The bundled builders declare every capability as a class variable, a declaration
its methods do not back is refused in one line, and inference is left to builders that declare nothing, said so in
``check``'s header; a memo forwards the judged builder's contract and nothing else (issue 42 item 5)."""

from __future__ import annotations

import textwrap

import pytest

from metadata_builders.cli import main as cli_main
from metadata_builders.errors import BuilderContractError, InvalidDeclaration
from metadata_builders.families.dsv4.batch import MODES
from metadata_builders.families.dsv4.builders import AuditedBuilder, MemoBuilder, capabilities_of, get_builder
from metadata_builders.families.dsv4.builders import capabilities as capabilities_module
from metadata_builders.families.dsv4.builders.capabilities import DECLARED, declared_modes
from metadata_builders.families.dsv4.builders.contract import JUDGED

MALFORMED = {
    "empty": "()",
    "string": '"draft_decode"',
    "unknown": '("target_verify", "draft_verify")',
    "not_strings": '("target_verify", 3)',
    "twice": '("decode", "decode")',
}


@pytest.fixture()
def mypkg(tmp_path, monkeypatch, no_mypkg):
    """A package of the user's own in a folder outside the repository, the current directory (as ``check`` is run)."""
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    body = "".join(f"\n\nclass {name.title().replace('_', '')}(HipBuilder):\n    modes = {value}\n"
                   for name, value in MALFORMED.items())
    (package / "badmodes.py").write_text("from metadata_builders.families.dsv4.hip import HipBuilder\n" + body +
                                         "\n\nclass Undeclared:\n    def build(self, inputs):\n"
                                         "        return HipBuilder().build(inputs)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "mypkg.badmodes"


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_declaration_is_refused_naming_class_value_and_modes(name: str) -> None:
    """The error carries the class, the attribute and the value as data, and lists the known modes."""
    klass = type(name, (), {"modes": eval(MALFORMED[name])})  # noqa: S307 - the test's own literals
    with pytest.raises(InvalidDeclaration) as info:
        declared_modes(klass, "mypkg:X")
    error = info.value
    assert (error.field, error.index, error.actual) == ("modes", name, repr(klass.modes))
    assert all(mode in str(error) for mode in MODES)
    assert isinstance(error, BuilderContractError)


def test_no_declaration_is_target_verify_alone_and_a_declaration_is_kept() -> None:
    """Nothing declared: the documented default; a declaration (a list too) is taken as declared."""
    assert declared_modes(type("Plain", (), {}), "x") == ("target_verify",)
    assert declared_modes(type("Two", (), {"modes": ["target_verify", "decode"]}), "x") == ("target_verify", "decode")


def test_a_capture_geometry_is_declared_or_the_released_rule_and_nothing_else() -> None:
    """``capture_geometry``: none declared is ``token_slots`` (the released runner's rule, so a builder keeps its
    verdicts); a declaration is kept; a value of neither rule is refused naming the class and the value."""
    from metadata_builders.families.dsv4.builders.capabilities import declared_capture_geometry

    assert declared_capture_geometry(type("Plain", (), {}), "x") == "token_slots"
    assert declared_capture_geometry(type("Fixed", (), {"capture_geometry": "request_slots"}), "x") == "request_slots"
    with pytest.raises(InvalidDeclaration) as info:
        declared_capture_geometry(type("Wrong", (), {"capture_geometry": "ceil"}), "mypkg:Wrong")
    assert (info.value.field, info.value.index, info.value.actual) == ("capture_geometry", "Wrong", "'ceil'")
    assert "token_slots" in str(info.value) and "request_slots" in str(info.value)
    assert get_builder("hip").capabilities.capture_geometry == "token_slots"
    assert get_builder("reference").capabilities.capture_geometry == "token_slots"


@pytest.mark.parametrize("name", MALFORMED)
def test_check_and_replay_exit_2_with_one_line_before_anything_runs(mypkg, name, capsys) -> None:
    """``check`` and ``replay`` refuse the builder in one line (exit 2); nothing is judged first."""
    builder = f"{mypkg}:{name.title().replace('_', '')}"
    assert cli_main(["check", "--builder", builder, "--profile", "dev", "--max-examples", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "InvalidDeclaration" in err[0] and ".modes = " in err[0], err
    with pytest.raises(BuilderContractError):
        get_builder(builder)


def test_the_gate_refuses_either_builder_before_drawing_its_corpus(mypkg, capsys) -> None:
    """``gate --base-builder X --head-builder Y``: a malformed declaration on either side is refused in a second."""
    for option in ("--base-builder", "--head-builder"):
        other = "--head-builder" if option == "--base-builder" else "--base-builder"
        assert cli_main(["gate", option, f"{mypkg}:Empty", other, "hip", "--no-cache"]) == 2
        out = capsys.readouterr()
        assert "corpus" not in out.out and "Empty.modes = ()" in out.err


def test_a_builder_that_declares_nothing_is_said_to_be_judged_on_target_verify_alone(mypkg, capsys) -> None:
    """The per-mode table is printed and says what was not judged and why."""
    assert cli_main(["check", "--builder", f"{mypkg}:Undeclared", "--properties", "P8", "--profile", "dev",
                     "--max-examples", "2", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "declares no modes: judged on target_verify alone" in out
    assert "not judged: draft_extend, decode, draft_decode, idle" in out


def test_a_run_that_judged_nothing_is_no_green(tmp_path, monkeypatch, capsys) -> None:
    """Every example not applicable (a draft-extend builder asked for P2): NOTHING JUDGED, exit 2, never held."""
    (tmp_path / "extendonly.py").write_text(textwrap.dedent("""
        from metadata_builders.families.dsv4.hip import HipBuilder

        class ExtendOnly(HipBuilder):
            modes = ("draft_extend",)
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli_main(["check", "--builder", "extendonly:ExtendOnly", "--properties", "P2", "--profile", "dev",
                     "--max-examples", "2", "--workers", "1"]) == 2
    assert "NOTHING JUDGED" in capsys.readouterr().out


def _no_inference(*args, **kwargs):
    raise AssertionError("a bundled builder's capabilities were inferred from its methods")


def test_a_bundled_builders_capabilities_come_from_its_declarations(monkeypatch) -> None:
    """``hip``, the reference (audited, as a subclass is) and the mutant builder: every capability declared, no
    method inspected to infer one."""
    from metadata_builders.families.dsv4.mutants.catalogue import MUTANTS
    from metadata_builders.families.dsv4.mutants.patching import mutant_builder_class
    from metadata_builders.families.dsv4.reference import ReferenceBuilder

    monkeypatch.setattr(capabilities_module, "_inferred", _no_inference)
    monkeypatch.setattr(capabilities_module, "_graph_contract", _no_inference)
    hip = get_builder("hip").capabilities
    assert hip.declared and (hip.graph, hip.mirror_validation, hip.capture_slots) == ("phases", True, True)
    mutant = capabilities_of(mutant_builder_class()(next(iter(MUTANTS))), "mutant")
    assert mutant == hip
    with pytest.warns(DeprecationWarning):
        assert AuditedBuilder(ReferenceBuilder(), "cpu").capabilities.declared
    assert get_builder("reference").capabilities.declared


def test_a_declaration_its_methods_do_not_back_is_one_line_naming_class_field_and_value() -> None:
    """``store_kernels = True`` without ``swa_store_rows()``, a graph contract whose methods are unset: refused."""
    from metadata_builders.families.dsv4.hip import HipBuilder

    claims = type("Claims", (HipBuilder,), {"store_kernels": True})
    with pytest.raises(InvalidDeclaration) as info:
        capabilities_of(claims(), "mypkg:Claims")
    assert (info.value.field, info.value.index, info.value.actual) == ("store_kernels", "Claims", "True")
    assert "swa_store_rows()" in str(info.value) and len(str(info.value).splitlines()) == 1
    unset = type("Unset", (HipBuilder,), {"graph_contract": "phases", "in_graph": None})
    with pytest.raises(InvalidDeclaration, match=r"Unset\.graph_contract = 'phases' .*in_graph\(\)"):
        capabilities_of(unset(), "mypkg:Unset")
    with pytest.raises(InvalidDeclaration, match="one of"):
        capabilities_of(type("Odd", (HipBuilder,), {"capture_layout": "yes"})(), "mypkg:Odd")


def test_the_plugin_and_the_gate_refuse_an_unbacked_declaration_without_constructing(tmp_path, monkeypatch) -> None:
    """``check_declarations`` (the plugin's and the gate's first look) refuses it from the class alone."""
    from metadata_builders.families.dsv4.builders.registry import check_declarations

    (tmp_path / "claimsmod.py").write_text(textwrap.dedent("""
        class Claims:
            mirror_validation = True

            def __init__(self):
                raise AssertionError("constructed")

            def build(self, inputs):
                return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InvalidDeclaration, match=r"Claims\.mirror_validation = True .*with_mirror_validation\(\)"):
        check_declarations("claimsmod:Claims")


def test_a_subclass_that_overrides_a_method_is_judged_on_it_not_on_its_bases_declaration() -> None:
    """The most derived class that says anything decides: unsetting ``with_mirror_validation`` under ``hip``'s
    ``mirror_validation = True`` is no mirror validation, inferred (and said); declaring it again is declared."""
    from metadata_builders.families.dsv4.hip import HipBuilder

    unset = capabilities_of(type("NoMirror", (HipBuilder,), {"with_mirror_validation": None})(), "x")
    assert (unset.mirror_validation, unset.inferred) == (False, ("mirror_validation",))
    said = capabilities_of(type("Said", (HipBuilder,), {"with_mirror_validation": None,
                                                        "mirror_validation": False})(), "x")
    assert (said.mirror_validation, said.declared) == (False, True)
    bare = capabilities_of(type("Bare", (), {"build": lambda self, inputs: None})(), "x")
    assert set(bare.inferred) == set(DECLARED) and bare.graph == "none"


def test_checks_header_says_whether_capabilities_were_declared_or_inferred(mypkg, capsys) -> None:
    """``hip``: declared; a builder of the user's that declares nothing: inferred from methods, and where to declare."""
    for builder, said in (("hip", "capabilities: declared"),
                          (f"{mypkg}:Undeclared", "capabilities: inferred from methods: graph_contract")):
        assert cli_main(["check", "--builder", builder, "--properties", "P8", "--profile", "dev",
                         "--max-examples", "1", "--workers", "1"]) == 0
        out = capsys.readouterr().out
        assert said in out.splitlines()[1], out
    assert "declare them: docs/BUILDERS.md" in out


def test_a_memo_forwards_the_judged_contract_and_refuses_anything_else() -> None:
    """Every name of ``JUDGED`` reads through a memo; a name outside it is an ``AttributeError`` naming it."""
    audited = get_builder("hip")
    memo = MemoBuilder(audited)
    assert all(hasattr(audited, name) for name in JUDGED)
    assert {n for n in JUDGED if n in vars(MemoBuilder)} == set(JUDGED) - {"name"}
    assert memo.capture_verify_lens(6, 2, 3) == audited.capture_verify_lens(6, 2, 3)
    with pytest.raises(AttributeError, match="last_by_mode"):
        memo.last_by_mode  # noqa: B018 - the read is the point

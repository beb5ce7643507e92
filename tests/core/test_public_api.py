"""The public surface: a sorted ``__all__`` that matches the module, and ``get_builder``'s contract."""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path

import pytest
from _examples import EXAMPLES
from metadata_builders.families.dsv4.metadata import fields_for

import metadata_builders
import strategies
from metadata_builders import (
    AuditedBuilder,
    BuilderNotFound,
    MetadataBuildersError,
    ReferenceBuilder,
    Variant,
    get_builder,
)


def _isort_key(name: str) -> tuple[int, str]:
    """ruff RUF022 / isort order: CONSTANTS, then Classes, then functions, each alphabetical."""
    if name.isupper():
        return (0, name)
    return (1 if name[:1].isupper() else 2, name)


def _public_names(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }


def test_package_all_is_sorted() -> None:
    """metadata_builders.__all__ is sorted isort-style (constants, classes, functions) with no duplicates."""
    names = list(metadata_builders.__all__)
    assert names == sorted(names, key=_isort_key)
    assert len(set(names)) == len(names)


def test_package_all_lists_exactly_the_public_names() -> None:
    """Every __all__ name resolves (the facade imports each on first use) and no other public name is defined."""
    for name in metadata_builders.__all__:
        getattr(metadata_builders, name)
    assert set(metadata_builders.__all__) == _public_names(metadata_builders) - {"TYPE_CHECKING"}


def test_strategies_all_is_sorted_and_complete() -> None:
    """strategies.__all__ is sorted isort-style and lists exactly the module's public names."""
    if not hasattr(strategies, "__all__"):
        pytest.skip("strategies has no __all__ yet")
    names = list(strategies.__all__)
    assert names == sorted(names, key=_isort_key)
    assert set(names) == _public_names(strategies)


# -- get_builder ---------------------------------------------------------------------------

HELPER = '''
"""A user's builder, importable as tests_helpers_builder (written by test_public_api.py)."""

import torch

from metadata_builders import Audit, SyncRecord, VerifyMetadata
from metadata_builders.families.dsv4.reference import ReferenceBuilder


class ChattyBuilder:
    """Reference metadata, page_table as a tensor, one deliberate sync, and a false audit claim."""

    def __init__(self, device="cpu"):
        self.device = device

    def build(self, batch, variant):
        ref = ReferenceBuilder().build(batch, variant)
        torch.tensor(batch.seq_lens, device=self.device).tolist()  # the D2H sync the audit must see
        fields = dict(ref.fields)
        fields["page_table"] = torch.tensor(ref.fields["page_table"], device=self.device)
        claimed = Audit([SyncRecord("claimed", "nowhere")], [])
        return VerifyMetadata(fields, ref.decision, claimed)


def make_chatty(device="cpu"):
    return ChattyBuilder(device)


def make_reference():
    return ReferenceBuilder()


def make_nothing():
    return object()


NOT_CALLABLE = 3
'''


@pytest.fixture
def helper_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "tests_helpers_builder.py").write_text(textwrap.dedent(HELPER))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tests_helpers_builder", raising=False)
    return "tests_helpers_builder"


@pytest.mark.parametrize(
    "name",
    ["nope", "", "metadata_builders_no_such_module:build", "metadata_builders:no_such_attr", "metadata_builders:"],
)
def test_get_builder_unknown_names_raise_builder_not_found(name: str) -> None:
    """An unknown name, an unimportable module or a missing attribute raises BuilderNotFound (a LookupError)."""
    with pytest.raises(BuilderNotFound) as info:
        get_builder(name)
    assert isinstance(info.value, LookupError)
    assert isinstance(info.value, MetadataBuildersError)
    assert info.value.actual == name


@pytest.mark.parametrize("attr", ["NOT_CALLABLE", "make_nothing"])
def test_get_builder_rejects_factories_that_give_no_builder(helper_module: str, attr: str) -> None:
    """A module:attr that is not callable, or returns an object without build(), raises BuilderNotFound."""
    with pytest.raises(BuilderNotFound) as info:
        get_builder(f"{helper_module}:{attr}")
    assert info.value.actual == f"{helper_module}:{attr}"


@pytest.mark.parametrize("attr", ["ChattyBuilder", "make_chatty"])
def test_module_attr_builder_is_audited_from_outside(helper_module: str, attr: str) -> None:
    """A module:attr builder is wrapped: its fields come back as plain lists, its audit observed, not claimed."""
    builder = get_builder(f"{helper_module}:{attr}")
    assert isinstance(builder, AuditedBuilder)
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    variant = Variant("eager", "host", "host", "dspark")
    result = builder.build(batch, variant)
    assert set(result.fields) >= set(fields_for(batch.geometry))
    assert all(type(result.fields[name]) is list for name in fields_for(batch.geometry))
    assert result.fields == ReferenceBuilder().build(batch, variant).fields
    assert [(s.op, s.stage) for s in result.audit.host_syncs] == [("Tensor.tolist", "build")]
    assert result.audit.faults == []


def test_module_attr_class_receives_the_device(helper_module: str) -> None:
    """A builder class that takes a ``device`` keyword is constructed with get_builder's device.

    On CPU that is the device's own name, ``"cpu:0"``: ``"cpu"`` is the host (DESIGN.md section 4).
    """
    from metadata_builders.audit import DEVICE_NAME

    builder = get_builder(f"{helper_module}:ChattyBuilder", device="cpu")
    assert isinstance(builder, AuditedBuilder)
    assert builder.inner.device == DEVICE_NAME == "cpu:0"
    assert builder.device == "cpu"


def test_module_attr_returning_the_reference_is_not_rewrapped(helper_module: str) -> None:
    """A factory that returns the reference builder gets it back as is (its audit is the contract)."""
    assert isinstance(get_builder(f"{helper_module}:make_reference"), ReferenceBuilder)

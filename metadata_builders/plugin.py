"""pytest plugin: run the harness's tests against any builder, on any device, in any project.

Loaded by the ``pytest11`` entry point (and by the root ``conftest.py`` of a
checkout) into every pytest run of the environment, so it stays light: it
registers its options and markers and builds nothing until a test asks for the
``builder`` fixture; torch is imported only then, or when an item carries the
``gpu`` marker.  Options, prefixed so they never collide with another plugin's
(pytest-playwright defines ``--device``):

``--mb-family F``      the backend family: ``dsv4`` (default) or ``dsa`` (SGLang's
                       DSA backend; fixture ``builder`` is then the family's
                       audited subject, docs/examples/test_my_dsa_builder.py).
``--mb-builder NAME``  the builder under test: ``hip`` (default), ``reference``,
                       ``sglang`` or ``module:attr``; fixture ``builder``.  On
                       ``--mb-family dsa``: ``dsa-torch`` (default), ``sglang``
                       or ``module:attr``.
``--mb-device DEV``    ``auto`` picks the GPU when ``torch.cuda.is_available()``
                       (ROCm too); under pytest-xdist worker N takes GPU N;
                       fixture ``device``.  A device this machine cannot use
                       stops the session before any test runs.
``--mb-profile P``     the Hypothesis profile: ``dev`` (default), ``ci`` (the
                       default when ``CI`` is set: derandomized), ``nightly``.

The profile is the plugin's own, registered as ``metadata-builders-<P>`` so it
never replaces a profile of the user's: deadlines off (torch builds have
first-call overheads), the health checks a large batch trips suppressed.  It is
loaded for the session unless the user chose a profile of their own, with
Hypothesis' ``--hypothesis-profile`` or ``settings.load_profile`` in a conftest;
the session header says which applies.

Markers: ``gpu`` (skipped without a CUDA/ROCm device), ``sglang`` (skipped
without an importable SGLang), ``triton``, ``slow``; a test is skipped only for
a marker it carries, never for a directory or name that happens to read
``sglang``.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

from metadata_builders.runs.profiles import PROFILES, hypothesis_name, register_profiles

_DEFAULT_BUILDER = "hip"
"""The DSV4 builder under test when ``--mb-builder`` names none: the bundled one, known good by construction (each
family names its own: the DSA family's ``dsa-torch``)."""

_DEVICE = pytest.StashKey[str]()
_BUILDER = pytest.StashKey[Any]()
_PROFILE = pytest.StashKey[str]()

MARKERS = (
    "gpu: needs a CUDA/ROCm device; skipped without one",
    "sglang: needs an importable SGLang (the upstream adapter); skipped without it",
    "triton: needs triton (run under TRITON_INTERPRET=1 on CPU)",
    "slow: long-running; nightly only",
)
"""Every marker the harness uses, registered here only (``--strict-markers`` holds in any project)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    from metadata_builders.devices import DEVICE_HELP

    group = parser.getgroup("metadata-builders", "target-verify metadata harness")
    group.addoption("--mb-family", default=None, metavar="FAMILY",
                    help="the backend family: dsv4 (default) or dsa; the fixture builder is that family's")
    group.addoption(
        "--mb-builder", default=None, metavar="NAME",
        help='builder under test: "hip" (bundled, default), "reference", "sglang" (installed SGLang) or "module:attr" '
        '(a zero-argument factory or class); on --mb-family dsa "dsa-torch" (default), "sglang" or "module:attr"',
    )
    group.addoption("--mb-device", default="auto", metavar="DEV",
                    help=DEVICE_HELP + "; with xdist, worker N takes GPU N")
    group.addoption(
        "--mb-profile", default=None, choices=PROFILES,
        help="Hypothesis profile for the harness's strategies: dev (default; ci when CI is set), ci "
        "(derandomized, no database), nightly; registered as metadata-builders-<name>",
    )


def pytest_configure(config: pytest.Config) -> None:
    from metadata_builders.devices import check_spelling
    from metadata_builders.errors import DeviceUnavailable

    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    try:
        check_spelling(config.getoption("--mb-device"), "--mb-device")
    except DeviceUnavailable as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.getoption("--mb-family") is not None:  # a session that names none imports no family
        _check_family_builder(config)
    device = config.getoption("--mb-device")
    named = config.getoption("--mb-builder") not in (None, _DEFAULT_BUILDER) or device == "meta"
    if named and _family(config) is None:
        _check_builder(config)  # the bundled default needs no checking: a session that names none imports no builder
    config.stash[_PROFILE] = _load_profile(config)


def _builder_name(config: pytest.Config) -> str | None:
    """``--mb-builder``, or on the default family its bundled builder (another family names its own default)."""
    name = config.getoption("--mb-builder")
    return name if name is not None or _family(config) is not None else _DEFAULT_BUILDER


def _family(config: pytest.Config) -> str | None:
    """``--mb-family`` when it names a family other than the default (whose fixtures are the core's own)."""
    family = config.getoption("--mb-family")
    if family is None:
        return None
    from metadata_builders.families import DEFAULT_FAMILY

    return None if family == DEFAULT_FAMILY else family


def _check_builder(config: pytest.Config) -> None:
    """``--mb-builder`` names a builder whose declarations hold, before any test runs (one usage line if not)."""
    from metadata_builders.errors import BuilderContractError, BuilderNotFound, UsageError

    try:
        _default_family().check_builder(_builder_name(config), config.getoption("--mb-device"))
    except (BuilderNotFound, BuilderContractError, UsageError) as exc:
        raise pytest.UsageError(str(exc)) from None


def _default_family() -> Any:
    """The default family's plugin pieces (``check_builder``, ``subject``, ``skip_reason``, ``under_test``)."""
    from metadata_builders.families import DEFAULT_FAMILY, family_module

    return family_module(DEFAULT_FAMILY, "plugin")


def _check_family_builder(config: pytest.Config) -> None:
    """Another family's ``--mb-builder``, made once before any test runs: the family says what is wrong in one
    line (a factory that raises, no ``build``, a ``modes`` declaration it cannot take)."""
    from metadata_builders.errors import MetadataBuildersError, UsageError
    from metadata_builders.families import family_subject, split_family

    try:
        family, _ = split_family(["--family", config.getoption("--mb-family")])
    except UsageError as exc:
        raise pytest.UsageError(f"--mb-family: {exc}") from None
    if _family(config) is None:
        return
    try:
        config.stash[_BUILDER] = family_subject(family, config.getoption("--mb-builder"), _worker_device(config))
    except MetadataBuildersError as exc:
        raise pytest.UsageError(f"--mb-builder: {exc}") from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A property's failure reads as ``check`` prints it -- the failure line and Hypothesis' falsifying
    example -- not as pages of the harness's own source (only under pytest's default ``--tb``)."""
    outcome = yield
    report = outcome.get_result()
    excinfo = call.excinfo
    from metadata_builders.errors import PropertyFailure

    if report.failed and excinfo is not None and isinstance(excinfo.value, PropertyFailure) \
            and item.config.getoption("tbstyle", "auto") == "auto":
        failure = excinfo.value
        # Hypothesis' "Explanation" lists lines of the harness's own audit: noise to the builder's author.
        notes = [n for n in getattr(failure, "__notes__", []) if n.strip() and not n.startswith("Explanation:")]
        report.longrepr = "\n".join([f"{type(failure).__name__}: {failure}", *notes,
                                     "(--tb=long shows the traceback)"])


def _hypothesis_automatic_ci(name: str) -> bool:
    """``name`` is the ``ci`` profile Hypothesis loads by itself when it detects CI (``CI`` set), unchanged: its
    documented values (derandomized, no deadline, no database, blobs printed, only ``too_slow`` suppressed, the
    default example count).  That is Hypothesis' default under CI, not a choice of the user's; a ``ci`` profile
    the user registered with other values, or named with ``--hypothesis-profile``, is theirs."""
    from hypothesis import HealthCheck, settings

    if name != "ci":
        return False
    ci, default = settings.get_profile("ci"), settings.get_profile("default")
    return (ci.derandomize is True and ci.deadline is None and ci.database is None and ci.print_blob is True
            and list(ci.suppress_health_check) == [HealthCheck.too_slow] and ci.max_examples == default.max_examples)


def _load_profile(config: pytest.Config) -> str:
    """Load the harness's profile unless the user chose one of their own; what applies, for the header.

    Hypothesis' automatic ``ci`` profile (loaded when ``CI`` is set) is no choice: under ``CI`` the harness's
    ``metadata-builders-ci`` applies, as documented (docs/CI.md).
    """
    from hypothesis import settings

    register_profiles()
    chosen = config.getoption("--mb-profile")
    theirs = getattr(config.option, "hypothesis_profile", None)
    current = settings.get_current_profile_name()
    ours = ("default", *map(hypothesis_name, PROFILES))
    if chosen is None and (theirs or (current not in ours and not _hypothesis_automatic_ci(current))):
        return f"{theirs or current} (yours; --mb-profile to use the harness's)"
    name = hypothesis_name(chosen or ("ci" if os.environ.get("CI") else "dev"))
    settings.load_profile(name)
    return name


def pytest_report_header(config: pytest.Config) -> str:
    family = _family(config)
    builder = _builder_name(config) or "the family's bundled builder"
    return (f"metadata-builders: {'' if family is None else f'--mb-family {family}, '}--mb-builder "
            f"{builder}, hypothesis profile {config.stash.get(_PROFILE, 'not loaded')}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A test that takes the ``builder`` fixture draws, with ``batches_for(prop)``, the modes that builder declares
    (what ``check`` draws for it), not target verify alone."""
    builder = getattr(item, "funcargs", {}).get("builder")
    if builder is None or not hasattr(builder, "capabilities"):
        yield
        return
    family = _default_family()
    reason = family.skip_reason(builder, getattr(getattr(item, "callspec", None), "params", {}).values())
    if reason is not None:
        pytest.skip(reason)
    with family.under_test(builder):
        yield


def _worker_device(config: pytest.Config) -> str:
    from metadata_builders.devices import usable_device
    from metadata_builders.errors import DeviceUnavailable

    spelled = config.getoption("--mb-device")
    try:
        device = usable_device(spelled, "--mb-device")
    except DeviceUnavailable as exc:
        raise pytest.UsageError(str(exc)) from None
    if spelled != "auto" or not device.startswith("cuda"):
        return device
    import torch

    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    return f"cuda:{index % torch.cuda.device_count()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--mb-device") not in ("auto", "cpu", "meta") and any(
            "builder" in getattr(item, "fixturenames", ()) or "device" in getattr(item, "fixturenames", ())
            for item in items):
        _worker_device(config)  # a device this machine cannot use stops the session here, not in every test
    has_sglang = None
    has_gpu = None
    for item in items:
        if item.get_closest_marker("sglang") is not None:
            if has_sglang is None:
                has_sglang = importlib.util.find_spec("sglang") is not None
            if not has_sglang:
                item.add_marker(pytest.mark.skip(
                    reason="SGLang is not importable; install it with ci/install-sglang.sh"))
        if item.get_closest_marker("gpu") is not None:
            if has_gpu is None:
                import torch

                has_gpu = torch.cuda.is_available()
            if not has_gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA/ROCm device: torch.cuda.is_available() is False"))


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    """This worker's device (``--mb-device``, resolved on first use)."""
    stash = pytestconfig.stash
    if _DEVICE not in stash:
        stash[_DEVICE] = _worker_device(pytestconfig)
    return stash[_DEVICE]


@pytest.fixture(scope="session")
def builder(pytestconfig: pytest.Config, device: str):
    """The builder under test (``--mb-builder``), audited, on this worker's device; built on first use."""
    from metadata_builders.errors import BuilderContractError, BuilderNotFound
    stash = pytestconfig.stash
    if _BUILDER not in stash:
        try:
            stash[_BUILDER] = _default_family().subject(_builder_name(pytestconfig), device)
        except (BuilderNotFound, BuilderContractError) as exc:  # a factory's builder: made only now
            pytest.exit(f"--mb-builder: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    return stash[_BUILDER]

"""Which device a run uses: the spellings accepted, and a device that cannot be used refused up front.

Every entry point -- ``check``, ``replay``, ``gate``, the pytest plugin and
:func:`~metadata_builders.get_builder` -- resolves its ``--device`` here before
anything runs, so a misconfigured job stops in a second with one line naming the
device, never after minutes of "builder raised" on every batch (a gate whose
sides both raise on every batch would call the regression pre-existing).

Accepted: ``auto`` (the GPU when ``torch.cuda.is_available()`` -- true on ROCm
builds too -- else ``cpu``), ``cpu``, ``meta`` (shapes only), ``cuda`` and
``cuda:N``.  ROCm's torch names its GPUs ``cuda`` as well, so ``gpu``, ``rocm``
and ``hip`` are refused with that hint: ``usable_device("rocm")`` raises
``DeviceUnavailable: --device rocm: not a device name; ROCm's torch calls its GPUs
cuda too: use cuda, cuda:N or auto``, and ``usable_device("cuda")`` on a CPU-only
torch ``--device cuda: torch.cuda.is_available() is False on this machine ...``.
"""

from __future__ import annotations

import re

from metadata_builders.errors import DeviceUnavailable

__all__ = ["DEVICE_HELP", "check_spelling", "resolve_device", "usable_device"]

DEVICE_HELP = "auto (the GPU if torch.cuda.is_available(), ROCm included, else cpu) | cpu | cuda | cuda:N | meta"
"""The one help text every ``--device``/``--mb-device`` option shows."""

_SPELLED = re.compile(r"^(auto|cpu|meta|cuda|cuda:\d+)$")
_ALIASES = ("gpu", "rocm", "hip", "amd", "nvidia")


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when ``torch.cuda.is_available()`` (true on ROCm too), else ``cpu``; others unchanged."""
    if device != "auto":
        return device
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_spelling(device: str, option: str = "--device") -> None:
    """Refuse a device name that is none of the accepted spellings (no torch imported)."""
    if _SPELLED.match(device):
        return
    if device.split(":")[0].lower() in _ALIASES:
        raise DeviceUnavailable(option, device, "not a device name; ROCm's torch calls its GPUs cuda too: "
                                                "use cuda, cuda:N or auto")
    raise DeviceUnavailable(option, device, f"not a device name; use {DEVICE_HELP}")


def usable_device(device: str = "auto", option: str = "--device") -> str:
    """``device`` resolved (``auto``), or :class:`DeviceUnavailable` naming it when this machine cannot use it."""
    check_spelling(device, option)
    resolved = resolve_device(device)
    if not resolved.startswith("cuda"):
        return resolved
    import torch

    if not torch.cuda.is_available():
        raise DeviceUnavailable(option, device, "torch.cuda.is_available() is False on this machine "
                                                f"(torch {torch.__version__}, built without a usable GPU); "
                                                "use cpu or auto")
    count = torch.cuda.device_count()
    index = int(resolved.partition(":")[2] or 0)
    if index >= count:
        raise DeviceUnavailable(option, device, f"this machine has {count} GPU(s): cuda:0..cuda:{count - 1}")
    return resolved

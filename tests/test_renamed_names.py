"""The public names renamed for one meaning per name (issue 37) still resolve, for one release.

A package written against the last release imports ``pico3.GENERATION_KIND`` or
``pico3.models.Provider``; it must keep working and be told the new name. This module spells the
old names on purpose: the script that made the renames (issue 37) never rewrites it or
``pico3/_renamed.py``.
"""

from __future__ import annotations

import importlib

import pytest

import pico3
import pico3.models

OLD_TO_NEW = [
    ("pico3", "GENERATION_KIND", "MODEL_CALL_KIND"),
    ("pico3.models", "Provider", "ModelProvider"),
    ("pico3.models", "DeferringProvider", "DeferringModelProvider"),
    ("pico3.models", "ProviderError", "ModelProviderError"),
]


@pytest.mark.parametrize(("module", "old", "new"), OLD_TO_NEW)
def test_an_old_name_answers_the_new_object_and_warns_with_the_new_name(
    module: str, old: str, new: str
) -> None:
    imported = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is renamed {module}\.{new}"):
        value = getattr(imported, old)
    assert value is getattr(imported, new)


@pytest.mark.parametrize(("module", "old", "new"), OLD_TO_NEW)
def test_an_old_name_is_neither_exported_nor_a_module_attribute(
    module: str, old: str, new: str
) -> None:
    imported = importlib.import_module(module)
    assert old not in imported.__all__ and new in imported.__all__
    assert old not in vars(imported)  # answered by __getattr__ only, so each use warns


def test_a_from_import_of_an_old_name_warns_too() -> None:
    with pytest.warns(DeprecationWarning, match="ModelProviderError"):
        from pico3.models import ProviderError
    assert issubclass(ProviderError, Exception)
    assert ProviderError is pico3.models.ModelProviderError


def test_the_durable_kind_name_keeps_its_spelling() -> None:
    assert pico3.MODEL_CALL_KIND.name == "pi.generation"


@pytest.mark.parametrize("module", ["pico3", "pico3.models"])
def test_an_unknown_name_is_still_an_attribute_error(module: str) -> None:
    imported = importlib.import_module(module)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        imported.NoSuchName  # noqa: B018

"""The adapter's old module names still import, as the very modules of their rooms (issue 46).

Until issue 46 the start-up and profile modules sat in the adapter's top folder; the docs, the
plugin entry point (``vllm_nnrp_adapter.vllm_plugin:register``) and operators' ``vllm serve
--middleware vllm_nnrp_adapter.vllm_plugin.NnrpServing`` name them there. The package's alias
table (``vllm_nnrp_adapter.ALIASES``) keeps each name: the same module object, imported on
demand, so importing the package still imports neither vLLM nor any room.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import vllm_nnrp_adapter
from vllm_nnrp_adapter import ALIASES

ROOT = Path(__file__).resolve().parents[2] / "reference_adapter"

#: every module the top folder held before issue 46 whose name is not now a room's
OLD_NAMES = ("adapter_process", "backend_call", "bodies", "embedded", "handlers", "logs",
             "mapping", "policy", "probe", "proc_cpu", "processes", "responses_mapping",
             "scaleout", "security", "serve", "settings", "stall", "twin", "vllm_plugin")


def _fresh(code: str) -> str:
    """What ``code`` prints in a new interpreter (nothing imported before it)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    return out.stdout.strip()


def test_the_table_keeps_every_old_name_and_only_those() -> None:
    assert sorted(ALIASES) == [f"vllm_nnrp_adapter.{name}" for name in OLD_NAMES]
    for old, new in ALIASES.items():
        assert not (ROOT / Path(*old.split("."))).with_suffix(".py").exists(), old
        assert (ROOT / Path(*new.split("."))).with_suffix(".py").is_file(), new


@pytest.mark.parametrize(("old", "new"), sorted(ALIASES.items()))
def test_an_old_name_imports_the_same_module_object(old: str, new: str) -> None:
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module is sys.modules[old] is sys.modules[new]
    # the module keeps its own name and spec: its loggers, pickles and reloads are the room's
    assert module.__name__ == new and module.__spec__ is not None
    assert module.__spec__.name == new
    assert getattr(vllm_nnrp_adapter, old.rsplit(".", 1)[1]) is module


def test_every_old_name_works_in_a_fresh_interpreter() -> None:
    code = (
        "import importlib, sys\n"
        "import vllm_nnrp_adapter.vllm_plugin as plugin\n"
        "from vllm_nnrp_adapter.settings import SETTINGS\n"
        "from vllm_nnrp_adapter import serve\n"
        "assert plugin is sys.modules['vllm_nnrp_adapter.launch.vllm_plugin']\n"
        "assert SETTINGS is sys.modules['vllm_nnrp_adapter.launch.settings'].SETTINGS\n"
        "assert serve is sys.modules['vllm_nnrp_adapter.launch.serve']\n"
        "print('ok')"
    )
    assert _fresh(code) == "ok"


def test_importing_the_package_imports_no_room_and_no_vllm() -> None:
    code = (
        "import json, sys, vllm_nnrp_adapter\n"
        "ours = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'vllm_nnrp_adapter', 'vllm', 'nnrp', 'nnrp_conformance'})\n"
        "tested = vllm_nnrp_adapter.NEWEST_TESTED\n"  # the policy's names: read on first use
        "print(json.dumps([ours, tested, 'vllm_nnrp_adapter.profile.policy' in sys.modules]))"
    )
    ours, tested, policy_loaded = json.loads(_fresh(code))
    assert ours == ["vllm_nnrp_adapter"]
    assert tested == importlib.import_module("vllm_nnrp_adapter.profile.policy").NEWEST_TESTED
    assert policy_loaded is True


def test_the_entry_point_and_the_middleware_resolve_as_vllm_resolves_them() -> None:
    code = (
        "import importlib, sys\n"
        "from importlib.metadata import entry_points\n"
        "[ep] = [e for e in entry_points(group='vllm.general_plugins') if e.name == 'nnrp']\n"
        "register = ep.load()\n"
        "plugin = sys.modules['vllm_nnrp_adapter.launch.vllm_plugin']\n"
        "assert register is plugin.register, ep.value\n"
        # vLLM's --middleware: import the module path, then take the object's name from it
        "module, _, name = plugin.MIDDLEWARE.rpartition('.')\n"
        "assert getattr(importlib.import_module(module), name) is plugin.NnrpServing\n"
        "print(ep.value, plugin.MIDDLEWARE)"
    )
    assert _fresh(code) == ("vllm_nnrp_adapter.vllm_plugin:register "
                            "vllm_nnrp_adapter.vllm_plugin.NnrpServing")


def test_the_conformance_room_keeps_the_commands_names() -> None:
    from vllm_nnrp_adapter import conformance
    from vllm_nnrp_adapter.conformance import conformance as command

    assert command.__all__
    assert all(getattr(conformance, name) is getattr(command, name) for name in command.__all__)


def test_a_name_that_never_was_is_still_missing() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("vllm_nnrp_adapter.no_such_module")
    with pytest.raises(AttributeError):
        _ = vllm_nnrp_adapter.no_such_name

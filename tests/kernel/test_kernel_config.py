"""tether.toml and the ``tether.plugins`` entry-point group, with a real third-party distribution
(:mod:`plugin_dist`)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from plugin_dist import Distribution

from tether.kernel import (
    Notice,
    PluginConfigError,
    PluginEntry,
    PluginError,
    PluginRequirementError,
    ServiceKey,
)
from tether.kernel._config import (
    ConfigFileError,
    TetherConfig,
    UnknownPluginError,
    available_plugins,
    load_plugins,
    read_config,
    resolve_plugin,
)
from tether.kernel._plugin import DuplicatePluginError, Kernel

PREEXISTING = ServiceKey[int]("preexisting")
TICK = Notice[object]("tick")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tether.toml"
    path.write_text(textwrap.dedent(text))
    return path


# -- read_config ------------------------------------------------------------------------------


def test_read_valid_config(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [model]
        default = "deepseek:deepseek-chat"

        [[plugins]]
        name = "root_approvals"
        config = { guarded = ["bash", "write"] }

        [[plugins]]
        name = "hooks"
        """,
    )
    config = read_config(path)
    assert config.plugins == [
        PluginEntry(name="root_approvals", config={"guarded": ["bash", "write"]}),
        PluginEntry(name="hooks", config={}),
    ]
    assert config.model_extra == {"model": {"default": "deepseek:deepseek-chat"}}


def test_read_empty_config(tmp_path: Path) -> None:
    assert read_config(write(tmp_path, "")) == TetherConfig(plugins=[])


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[[plugins]\nname = 'x'\n")
    with pytest.raises(ConfigFileError) as info:
        read_config(path)
    assert info.value.code == "CONFIG_FILE"
    assert str(info.value).startswith(f"{path}: not valid TOML: ")


def test_unknown_key_in_a_plugin_entry(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [[plugins]]
        name = "ok"

        [[plugins]]
        name = "hooks"
        settings = { x = 1 }
        """,
    )
    with pytest.raises(ConfigFileError) as info:
        read_config(path)
    assert str(info.value) == f"{path}: plugins.1.settings: Extra inputs are not permitted"


def test_missing_plugin_name(tmp_path: Path) -> None:
    path = write(tmp_path, "[[plugins]]\nconfig = { a = 1 }\n")
    with pytest.raises(ConfigFileError) as info:
        read_config(path)
    assert str(info.value) == f"{path}: plugins.0.name: Field required"


def test_empty_plugin_name(tmp_path: Path) -> None:
    path = write(tmp_path, '[[plugins]]\nname = ""\n')
    with pytest.raises(ConfigFileError) as info:
        read_config(path)
    assert str(info.value).startswith(f"{path}: plugins.0.name: String should have at least 1")


def test_plugins_must_be_an_array_of_tables(tmp_path: Path) -> None:
    path = write(tmp_path, 'plugins = "hooks"\n')
    with pytest.raises(ConfigFileError) as info:
        read_config(path)
    assert str(info.value).startswith(f"{path}: plugins: ")


def test_plugin_config_must_be_a_table(tmp_path: Path) -> None:
    path = write(tmp_path, '[[plugins]]\nname = "x"\nconfig = 3\n')
    with pytest.raises(ConfigFileError) as info:
        read_config(path)
    assert str(info.value).startswith(f"{path}: plugins.0.config: ")


def test_unreadable_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.toml"
    with pytest.raises(ConfigFileError) as info:
        read_config(path)
    assert str(info.value).startswith(f"{path}: cannot read: ")


# -- entry points -----------------------------------------------------------------------------


def test_third_party_plugins_are_discovered(third_party: Distribution) -> None:
    found = available_plugins()
    assert found[third_party.greeter] == f"{third_party.package}:PLUGIN"
    assert found[third_party.module] == f"{third_party.package}.modplugin"
    assert found[third_party.broken] == f"{third_party.package}.broken:PLUGIN"
    assert not any(name.startswith("not-a-plugin") for name in found)


def test_resolve_and_load_a_third_party_plugin(third_party: Distribution) -> None:
    plugin = resolve_plugin(third_party.greeter)
    assert plugin is sys.modules[third_party.package].PLUGIN
    kernel = Kernel()
    handle = kernel.load(plugin, {"greeting": "hi"})
    assert handle.name == third_party.greeter
    assert kernel.ctx.get(third_party.key("GREETING")) == "hi"


def test_a_module_can_be_the_plugin(third_party: Distribution) -> None:
    kernel = Kernel()
    kernel.load(resolve_plugin(third_party.greeter))
    module = resolve_plugin(third_party.module)
    assert module is sys.modules[f"{third_party.package}.modplugin"]
    kernel.load(module)
    assert kernel.ctx.get(third_party.key("ECHO")) == "hello!"


def test_unknown_plugin_lists_the_available_ones(third_party: Distribution) -> None:
    with pytest.raises(UnknownPluginError) as info:
        resolve_plugin("no_such_plugin")
    assert info.value.code == "UNKNOWN_PLUGIN"
    expected = ", ".join(sorted(available_plugins()))
    assert str(info.value) == f"unknown plugin 'no_such_plugin' (available: {expected})"
    assert third_party.greeter in str(info.value)


def test_a_plugin_that_fails_to_import_names_itself(third_party: Distribution) -> None:
    with pytest.raises(PluginError) as info:
        resolve_plugin(third_party.broken)
    assert info.value.code == "PLUGIN_ERROR"
    assert str(info.value) == (
        f"plugin {third_party.broken!r} ({third_party.package}.broken:PLUGIN) failed to import: "
        "needs the frobnicate package"
    )


def test_load_plugins_from_a_config_file(tmp_path: Path, third_party: Distribution) -> None:
    path = write(
        tmp_path,
        f"""
        [[plugins]]
        name = "{third_party.greeter}"
        config = {{ greeting = "ahoy" }}

        [[plugins]]
        name = "{third_party.module}"
        """,
    )
    kernel = Kernel()
    handles = load_plugins(kernel, read_config(path).plugins)
    assert [h.name for h in handles] == [third_party.greeter, third_party.module]
    assert kernel.ctx.get(third_party.key("ECHO")) == "ahoy!"
    assert kernel.plugins() == [third_party.greeter, third_party.module]


def test_config_from_the_file_is_validated_at_load(
    tmp_path: Path, third_party: Distribution
) -> None:
    path = write(
        tmp_path,
        f"""
        [[plugins]]
        name = "{third_party.greeter}"
        config = {{ greting = "typo" }}
        """,
    )
    kernel = Kernel()
    with pytest.raises(PluginConfigError) as info:
        load_plugins(kernel, read_config(path).plugins)
    assert str(info.value) == (
        f"plugin {third_party.greeter!r}: invalid config: greting: Extra inputs are not permitted"
    )
    assert kernel.plugins() == []


@pytest.mark.parametrize("failure", ["unknown", "broken", "config", "duplicate"])
def test_load_plugins_rolls_back_on_failure(third_party: Distribution, failure: str) -> None:
    kernel = Kernel()
    heard: list[str] = []
    kernel.ctx.provide(PREEXISTING, 1)
    kernel.ctx.on(TICK, lambda p: heard.append("root listener"))
    if failure == "duplicate":
        kernel.load(resolve_plugin(third_party.greeter), {"greeting": "kept"})
    before = kernel.plugins()
    greeter, module = PluginEntry(name=third_party.greeter), PluginEntry(name=third_party.module)
    entries, expected = {
        "unknown": ([greeter, module, PluginEntry(name="no_such_plugin")], UnknownPluginError),
        "broken": ([greeter, module, PluginEntry(name=third_party.broken)], PluginError),
        "config": (
            [greeter, PluginEntry(name=third_party.module, config={"x": 1})],
            PluginConfigError,
        ),
        # The module plugin loads (the preloaded greeter satisfies it), then the second
        # greeter is a duplicate: the module plugin is unloaded, the preloaded one kept.
        "duplicate": ([module, greeter], DuplicatePluginError),
    }[failure]
    with pytest.raises(expected):
        load_plugins(kernel, entries)
    assert kernel.plugins() == before
    assert kernel.ctx.get(third_party.key("ECHO")) is None
    assert kernel.ctx.get(PREEXISTING) == 1
    assert kernel.ctx.get(third_party.key("GREETING")) == (
        "kept" if failure == "duplicate" else None
    )
    kernel.ctx.emit(TICK, None)
    assert heard == ["root listener"]


def test_load_plugins_requirement_order_matters(third_party: Distribution) -> None:
    kernel = Kernel()
    with pytest.raises(PluginRequirementError) as info:
        load_plugins(
            kernel, [PluginEntry(name=third_party.module), PluginEntry(name=third_party.greeter)]
        )
    assert str(info.value) == (
        f"plugin {third_party.module!r} requires service 'greeting', which no loaded plugin provides"
    )
    assert kernel.plugins() == []


def test_load_plugins_with_no_entries() -> None:
    kernel = Kernel()
    assert load_plugins(kernel, []) == []
    assert kernel.plugins() == []

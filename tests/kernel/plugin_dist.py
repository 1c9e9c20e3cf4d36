"""A real third-party plugin distribution, for the kernel's configuration and trust tests.

The distribution is written to a temporary directory (a package plus a ``*.dist-info`` with
``entry_points.txt``) and put on ``sys.path``, so ``importlib.metadata`` discovers it exactly as
it would an installed wheel.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tether.kernel import ENTRY_POINT_GROUP, ServiceKey

_serial = itertools.count()


@dataclass
class Distribution:
    package: str
    greeter: str
    module: str
    broken: str
    declarer: str
    """Declares ``.mcp.json`` as a file it reads."""
    bad_declarer: str
    """Its ``workspace_files`` raises."""

    def key(self, name: str) -> ServiceKey[object]:
        """A service key the distribution declares (``GREETING``, ``ECHO``, ``MCP``): a
        third-party plugin shares its services through its own key objects."""
        key: ServiceKey[object] = getattr(importlib.import_module(self.package), name)
        return key


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Distribution]:
    """Write the distribution, put it on ``sys.path`` for the test, then forget its modules."""
    n = next(_serial)
    package = f"tether_thirdparty_{n}"
    dist = Distribution(
        package,
        f"tp_greeter_{n}",
        f"tp_module_{n}",
        f"tp_broken_{n}",
        f"tp_declarer_{n}",
        f"tp_bad_declarer_{n}",
    )
    site = tmp_path / "site"
    pkg = site / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            f"""
            from pydantic import BaseModel, ConfigDict

            from tether.kernel import FunctionPlugin, ServiceKey

            GREETING = ServiceKey("greeting")
            ECHO = ServiceKey("echo")
            MCP = ServiceKey("mcp")


            class Config(BaseModel):
                model_config = ConfigDict(extra="forbid")
                greeting: str = "hello"


            def _apply(ctx, config):
                ctx.provide(GREETING, config.greeting)


            PLUGIN = FunctionPlugin({dist.greeter!r}, _apply, config_model=Config)
            """
        )
    )
    (pkg / "modplugin.py").write_text(
        textwrap.dedent(
            f"""
            # A whole module as a plugin: name, requires and apply at module level.
            from {package} import ECHO, GREETING

            name = {dist.module!r}
            requires = (GREETING,)


            def apply(ctx, config):
                ctx.provide(ECHO, ctx.get(GREETING) + "!")
            """
        )
    )
    (pkg / "broken.py").write_text('raise ImportError("needs the frobnicate package")\n')
    (pkg / "declarer.py").write_text(
        textwrap.dedent(
            f"""
            # A later feature's plugin: it reads files of the workspace, so it declares them.
            from tether.kernel import WORKSPACE_FILES
            from {package} import MCP


            class Declarer:
                def __init__(self, name, fail):
                    self.name = name
                    self.fail = fail

                def workspace_files(self, config, workspace):
                    if self.fail:
                        raise RuntimeError("cannot list")
                    return [".mcp.json"]

                def apply(self, ctx, config):
                    ctx.provide(MCP, ctx.get(WORKSPACE_FILES).read(".mcp.json"))


            PLUGIN = Declarer({dist.declarer!r}, False)
            BAD = Declarer({dist.bad_declarer!r}, True)
            """
        )
    )
    info = site / f"tether_thirdparty_{n}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: tether-thirdparty-{n}\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            f"""
            [{ENTRY_POINT_GROUP}]
            {dist.greeter} = {package}:PLUGIN
            {dist.module} = {package}.modplugin
            {dist.broken} = {package}.broken:PLUGIN
            {dist.declarer} = {package}.declarer:PLUGIN
            {dist.bad_declarer} = {package}.declarer:BAD

            [console_scripts]
            not-a-plugin-{n} = {package}:PLUGIN
            """
        )
    )
    monkeypatch.syspath_prepend(str(site))
    yield dist
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]

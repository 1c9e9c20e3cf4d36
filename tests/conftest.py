"""Shared test configuration: this directory is on ``sys.path`` (pytest's prepend import mode
adds a conftest's directory), so cross-package helpers such as ``proc_support`` import by name."""

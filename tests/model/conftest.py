from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .fake_openai import FakeOpenAI


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()

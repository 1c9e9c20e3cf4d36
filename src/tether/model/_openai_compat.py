"""A streaming client for OpenAI-compatible chat completions (OpenAI, DeepSeek, vLLM, ...).

It speaks plain HTTP through ``httpx`` rather than the ``openai`` package (which now pulls in
``httpx2``). Behaviour worth knowing:

- Requests stream (``stream: true`` with ``stream_options.include_usage``) unless
  :class:`~tether.model._openai_wire.WireOptions` says ``stream=False``; a server that answers
  with a whole JSON completion is accepted either way.
- Failures retry with exponential backoff: HTTP 408/409/429/5xx, connection errors and
  connect timeouts, honouring ``Retry-After``/``retry-after-ms`` up to ``retry_after_cap`` seconds. A
  500 whose body is a validation error, like every other 4xx, is the request's fault and is
  not retried. Once any delta has been yielded to the caller nothing is retried: the caller
  already saw output. A response that breaks off after HTTP 200 on every attempt says so,
  and suggests turning streaming off. A server that accepted the request and then sent
  nothing for the read timeout is not asked again (``MODEL_TIMEOUT``): it has the request, and
  each retry would wait as long again.
- A stream must deliver a ``finish_reason``; ``data: [DONE]`` after it is optional (the
  ``openai`` SDK accepts a stream without it too). A stream that ends before one counts as
  truncated (``MODEL_BAD_RESPONSE``), and an error the server sends after HTTP 200 (an
  ``error`` object, or llama.cpp's ``error:`` line) is reported with the server's message.
- When the :class:`~tether._signals.AbortSignal` fires, the HTTP response is closed and
  :class:`~tether._signals.AbortedError` is raised.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypedDict, Unpack, cast

import httpx

from tether._signals import AbortedError, AbortSignal, race
from tether.model._context_window import known_context_window
from tether.model._help import MODEL_SPEC_HELP
from tether.model._openai_wire import (
    NO_STREAM_HINT,
    StreamAssembler,
    WireOptions,
    build_body,
    error_detail,
    is_validation_failure,
)
from tether.model._prices import Price
from tether.model._sse import SSEDecoder, SSEFormatError
from tether.model._types import Completion, ModelError, ModelErrorCode, ModelRequest, StreamEvent
from tether.session import JsonValue

_ERROR_BODY_LIMIT = 64 * 1024
_JSON_BODY_LIMIT = 16 * 1024 * 1024

# Module-level so tests can observe the delays without sleeping.
_sleep = asyncio.sleep


@dataclass(frozen=True, slots=True)
class ProviderPreset:
    """Where a named provider lives and which environment variables configure it."""

    name: str
    default_base_url: str
    api_key_env: str
    base_url_env: str
    sends_reasoning: bool = False
    """Whether recorded reasoning goes back as ``reasoning_content`` by default: DeepSeek's
    thinking mode requires it; an OpenAI-compatible server is not assumed to accept it."""

    def destination(
        self, env: Mapping[str, str], base_url: str | None, api_key_env: str | None
    ) -> tuple[str, str | None, str | None]:
        """``(base URL, key variable, base URL variable)``: the one rule for where a key goes.

        Without a configured ``base_url``, the key in ``api_key_env`` (default: the provider's
        variable) goes to the provider's host (its ``*_BASE_URL`` variable, else its default).
        With one, only the key its own ``api_key_env`` names is sent there, and none when it
        names none: a provider's key never follows a base URL somebody else configured.
        """
        if base_url is None:
            url = env.get(self.base_url_env, "").strip() or self.default_base_url
            return url, api_key_env or self.api_key_env, self.base_url_env
        return base_url, api_key_env, None


DEEPSEEK = ProviderPreset(
    name="deepseek",
    default_base_url="https://api.deepseek.com",
    api_key_env="DEEPSEEK_API_KEY",
    base_url_env="DEEPSEEK_BASE_URL",
    sends_reasoning=True,
)
OPENAI = ProviderPreset(
    name="openai",
    default_base_url="https://api.openai.com/v1",
    api_key_env="OPENAI_API_KEY",
    base_url_env="OPENAI_BASE_URL",
)
PRESETS: Mapping[str, ProviderPreset] = {"deepseek": DEEPSEEK, "openai": OPENAI}


class ClientOptions(TypedDict, total=False):
    """The keyword arguments of :class:`OpenAICompatClient` that :meth:`~OpenAICompatClient.
    from_preset` and :func:`~tether.model._settings.resolve_model` pass through to it (the
    others are the preset's)."""

    timeout: float | httpx.Timeout
    max_retries: int
    retry_base_delay: float
    retry_max_delay: float
    retry_after_cap: float
    extra_headers: Mapping[str, str] | None
    extra_body: Mapping[str, JsonValue] | None
    wire: WireOptions | None
    context_window: int | None
    http_client: httpx.AsyncClient | None
    transport: httpx.AsyncBaseTransport | None


class OpenAICompatClient:
    """A :class:`~tether.model._client.ModelClient` for ``POST {base_url}/chat/completions``.

    ``max_retries`` counts retries after the first attempt (the default 3 makes 4 attempts).
    ``api_key_env`` / ``base_url_env`` only name the variables in error messages.
    ``extra_body`` is merged into every request body (``temperature``, ``max_tokens``, ...);
    a ``None`` value removes a key, e.g. ``{"stream_options": None}`` for a server that
    rejects it. ``wire`` holds the per-model switches (streaming, thinking, how tool-call
    messages are sent); ``context_window`` is the model's, in tokens: the configured one,
    else :meth:`from_preset`'s known default, else ``None`` (unknown).
    Pass ``http_client`` (not closed by :meth:`aclose`) or ``transport`` to control HTTP.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout: float | httpx.Timeout = 120.0,
        max_retries: int = 3,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        retry_after_cap: float = 30.0,
        provider: str = "openai-compatible server",
        api_key_env: str | None = None,
        base_url_env: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        wire: WireOptions | None = None,
        context_window: int | None = None,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.provider = provider
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.retry_after_cap = retry_after_cap
        self.api_key_env = api_key_env
        self.base_url_env = base_url_env
        self._extra_body = dict(extra_body or {})
        self.wire = wire or WireOptions()
        self.context_window = context_window
        self.price: Price | None = None
        """What its tokens cost (``model/_prices.py``); set by ``resolve_model``."""
        self._keyed = bool(api_key)
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if self.wire.stream else "application/json",
            "User-Agent": "tether",
        }
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(extra_headers or {})
        self._owns_client = http_client is None
        self._http = http_client or httpx.AsyncClient(
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            transport=transport,
        )

    @classmethod
    def from_preset(
        cls,
        preset: ProviderPreset | str,
        model: str,
        env: Mapping[str, str],
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        **options: Unpack[ClientOptions],
    ) -> OpenAICompatClient:
        """A client for a named provider, configured from ``env``.

        ``base_url`` and ``api_key_env`` are a configured model's (see
        :meth:`ProviderPreset.destination` for where the key goes). Without a
        ``context_window`` the model's known one is used (:data:`KNOWN_CONTEXT_WINDOWS
        <tether.model._context_window.KNOWN_CONTEXT_WINDOWS>`). Raises ``MODEL_CONFIG``
        when the key's variable is missing or empty.
        """
        if isinstance(preset, str):
            if preset not in PRESETS:
                raise ModelError(
                    f"unknown provider preset {preset!r}; known: {', '.join(PRESETS)}",
                    code="MODEL_CONFIG",
                )
            preset = PRESETS[preset]
        base_url, key_env, base_url_env = preset.destination(env, base_url, api_key_env)
        options.setdefault("wire", WireOptions(send_reasoning=preset.sends_reasoning))
        if options.get("context_window") is None:
            options["context_window"] = known_context_window(preset.name, model)
        api_key = env.get(key_env, "").strip() if key_env else None
        if key_env and not api_key:
            local = (
                f" (a local server that needs no key accepts any value; point "
                f"{preset.base_url_env} at it)"
                if preset is OPENAI and base_url_env is not None
                else ""
            )
            raise ModelError(
                f"{preset.name}:{model} needs an API key in {key_env}, which is not "
                f"set{local}.\n{MODEL_SPEC_HELP}",
                code="MODEL_CONFIG",
            )
        return cls(
            base_url=base_url,
            api_key=api_key,
            model=model,
            provider=preset.name,
            api_key_env=key_env,
            base_url_env=base_url_env,
            **options,
        )

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def __repr__(self) -> str:
        return (
            f"OpenAICompatClient(provider={self.provider!r}, model={self.model!r}, "
            f"url={self.url!r})"
        )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._http.aclose()

    async def __aenter__(self) -> OpenAICompatClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def stream(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamEvent]:
        if signal is not None and signal.aborted:
            raise AbortedError(signal.reason)
        body = build_body(self.model, request, self._extra_body, self.wire)
        try:
            http_request = self._http.build_request(
                "POST", self.url, content=json.dumps(body).encode(), headers=self._headers
            )
        except httpx.InvalidURL as exc:
            raise self._config_error(exc) from exc
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await race(signal, self._http.send(http_request, stream=True))
            except httpx.UnsupportedProtocol as exc:
                raise self._config_error(exc) from exc
            except httpx.ReadTimeout as exc:
                # The server has the request: asking again would multiply the silence (and
                # may run the request twice), so the wait is reported at once.
                raise self._silent(attempt) from exc
            except httpx.TransportError as exc:
                if attempt > self.max_retries:
                    raise self._unreachable(exc, attempt) from exc
                await race(signal, _sleep(self._backoff(attempt, None)))
                continue
            progress = _Progress()
            try:
                if not 200 <= response.status_code < 300:
                    error, retryable = await self._http_failure(response, signal, attempt)
                    if not retryable or attempt > self.max_retries:
                        raise error
                    await response.aclose()
                    await race(signal, _sleep(self._backoff(attempt, response.headers)))
                    continue
                async with aclosing(self._events(response, signal, progress)) as events:
                    async for event in events:
                        yield event
                return
            except httpx.TransportError as exc:
                if progress.yielded:
                    raise ModelError(
                        f"bad response from {self._where()}: the stream was cut off after "
                        f"output had started ({self._detail(exc)}); not retried "
                        "because output was already delivered",
                        code="MODEL_BAD_RESPONSE",
                    ) from exc
                if attempt > self.max_retries:
                    raise self._cut_after_200(exc, attempt) from exc
                await response.aclose()
                await race(signal, _sleep(self._backoff(attempt, None)))
            except httpx.DecodingError as exc:
                raise ModelError(
                    f"bad response from {self._where()}: undecodable body ({exc})",
                    code="MODEL_BAD_RESPONSE",
                ) from exc
            finally:
                await response.aclose()

    async def _events(
        self, response: httpx.Response, signal: AbortSignal | None, progress: _Progress
    ) -> AsyncGenerator[StreamEvent, None]:
        assembler = StreamAssembler(self._where(), streaming=self.wire.stream)
        content_type = response.headers.get("content-type", "")
        if "json" in content_type and "event-stream" not in content_type:
            completion = await self._whole_json(response, signal, assembler)
            yield completion
            return
        decoder = SSEDecoder()
        async with aclosing(cast(AsyncGenerator[str, None], response.aiter_lines())) as lines:
            while True:
                line = await race(signal, _next_line(lines))
                try:
                    event = decoder.flush() if line is None else decoder.feed_line(line)
                except SSEFormatError as exc:
                    raise ModelError(
                        f"bad response from {self._where()}: expected a server-sent-events "
                        f"stream (content-type {content_type or 'missing'!r}), got line "
                        f"{exc.line[:200]!r}",
                        code="MODEL_BAD_RESPONSE",
                    ) from exc
                if event is not None:
                    if event.event == "error":
                        raise assembler.failed_mid_stream(error_detail(event.data))
                    if event.data.strip() == "[DONE]":
                        break
                    for delta in assembler.feed(self._decode(event.data)):
                        progress.yielded = True
                        yield delta
                if line is None:
                    break
        yield assembler.finish()  # refuses a stream that ended before its finish_reason

    async def _whole_json(
        self, response: httpx.Response, signal: AbortSignal | None, assembler: StreamAssembler
    ) -> Completion:
        raw = await race(signal, _read_limited(response, _JSON_BODY_LIMIT))
        obj = self._decode(raw)
        if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
            if isinstance(obj, dict) and "error" in obj:
                assembler.feed(obj)  # raises with the server's message
            raise ModelError(
                f"bad response from {self._where()}: a JSON body without 'choices': "
                f"{error_detail(raw)}",
                code="MODEL_BAD_RESPONSE",
            )
        assembler.feed(obj)
        return assembler.finish()

    def _decode(self, data: str) -> object:
        try:
            return json.loads(data)
        except ValueError as exc:
            snippet = data if len(data) <= 200 else data[:200] + "…"
            raise ModelError(
                f"bad response from {self._where()}: invalid JSON in stream data {snippet!r} "
                f"({exc})",
                code="MODEL_BAD_RESPONSE",
            ) from exc

    async def _http_failure(
        self, response: httpx.Response, signal: AbortSignal | None, attempt: int
    ) -> tuple[ModelError, bool]:
        """The error for a non-2xx answer, and whether it is worth retrying."""
        status = response.status_code
        try:
            detail = error_detail(await race(signal, _read_limited(response, _ERROR_BODY_LIMIT)))
        except httpx.TransportError as exc:
            detail = f"(body unreadable: {type(exc).__name__})"
        where = self._where()
        code: ModelErrorCode
        retryable = False
        if status in (401, 403):
            code = "MODEL_AUTH"
            if self.api_key_env:
                fix = f"Check {self.api_key_env}."
            elif self._keyed:
                fix = "Check the api_key given to the client."
            else:
                fix = (
                    "No API key was sent: a model whose base_url is configured gets only the "
                    "key its own api_key_env names, in your user configuration (docs/models.md)."
                )
            message = f"{where} refused the API key (HTTP {status}): {detail}. {fix}"
        elif status == 404:
            code = "MODEL_NOT_FOUND"
            fix = f" (set by {self.base_url_env})" if self.base_url_env else ""
            message = (
                f"{self.provider} answered HTTP 404 for model {self.model!r} at {self.url}: "
                f"{detail}. Check the model name and the base URL {self.base_url}{fix}."
            )
        elif status == 429:
            code = "MODEL_RATE_LIMITED"
            retryable = True
            message = f"{where} kept rate-limiting (HTTP 429) after {_attempts(attempt)}: {detail}"
        elif status >= 500 and is_validation_failure(detail):
            code = "MODEL_BAD_REQUEST"
            message = (
                f"{where} rejected the request as invalid (HTTP {status}, not retried): {detail}"
            )
        elif status in (408, 409) or status >= 500:
            code = "MODEL_UNAVAILABLE"
            retryable = True
            message = f"{where} kept failing (HTTP {status}) after {_attempts(attempt)}: {detail}"
        elif 400 <= status < 500:
            code = "MODEL_BAD_REQUEST"
            message = f"{where} rejected the request (HTTP {status}): {detail}"
        else:
            code = "MODEL_BAD_RESPONSE"
            message = f"bad response from {where}: unexpected HTTP status {status}: {detail}"
        return ModelError(message, code=code, status=status), retryable

    def _backoff(self, attempt: int, headers: httpx.Headers | None) -> float:
        if headers is not None:
            hinted = retry_after_seconds(headers)
            if hinted is not None:
                return min(hinted, self.retry_after_cap)
        delay = min(self.retry_max_delay, self.retry_base_delay * 2.0 ** (attempt - 1))
        return delay * random.uniform(0.5, 1.0)

    def _unreachable(self, exc: Exception, attempts: int) -> ModelError:
        if isinstance(exc, httpx.ConnectTimeout):
            return ModelError(
                f"{self._where()} did not accept a connection within "
                f"{_seconds(self._http.timeout.connect)} on {_attempts(attempts)}; check the "
                f"network and the base URL{self._base_url_hint()}",
                code="MODEL_UNAVAILABLE",
            )
        return ModelError(
            f"{self._where()} is unreachable after {_attempts(attempts)} ({self._detail(exc)})",
            code="MODEL_UNAVAILABLE",
        )

    def _silent(self, attempt: int) -> ModelError:
        earlier = f" (after {_attempts(attempt - 1)} that failed)" if attempt > 1 else ""
        return ModelError(
            f"{self._where()} accepted the request but sent nothing for "
            f"{_seconds(self._http.timeout.read)}{earlier}; not retried, as it may still be "
            "working on it. For a slow model raise the read timeout: --model-timeout SECONDS "
            "or timeout in its [models.NAME] table",
            code="MODEL_TIMEOUT",
        )

    def _detail(self, exc: Exception) -> str:
        """``Type: message``, never empty: httpx's timeouts carry no message of their own."""
        text = str(exc)
        if not text and isinstance(exc, httpx.ReadTimeout):
            text = f"nothing received for {_seconds(self._http.timeout.read)}"
        elif not text and isinstance(exc, httpx.TimeoutException):
            text = "timed out"
        return f"{type(exc).__name__}: {text or 'no message'}"

    def _base_url_hint(self) -> str:
        return f" ({self.base_url_env})" if self.base_url_env else ""

    def _cut_after_200(self, exc: Exception, attempts: int) -> ModelError:
        hint = f"; {NO_STREAM_HINT}" if self.wire.stream else ""
        return ModelError(
            f"bad response from {self._where()}: the response broke off after HTTP 200, before "
            f"any output, on {_attempts(attempts)} ({self._detail(exc)})"
            f"{hint}",
            code="MODEL_BAD_RESPONSE",
        )

    def _config_error(self, exc: Exception) -> ModelError:
        fix = f" (check {self.base_url_env})" if self.base_url_env else ""
        return ModelError(
            f"invalid base URL {self.base_url!r} for {self.provider}{fix}: {exc}",
            code="MODEL_CONFIG",
        )

    def _where(self) -> str:
        return f"{self.provider} ({self.url})"


def _seconds(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g} s"


def _attempts(count: int) -> str:
    return f"{count} attempt" if count == 1 else f"{count} attempts"


@dataclass(slots=True)
class _Progress:
    yielded: bool = False


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The server's requested delay: ``retry-after-ms``, else ``Retry-After`` as seconds or
    an HTTP date. ``None`` when absent or unparseable."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def _next_line(lines: AsyncIterator[str]) -> str | None:
    try:
        return await anext(lines)
    except StopAsyncIteration:
        return None


async def _read_limited(response: httpx.Response, limit: int) -> str:
    parts: list[bytes] = []
    size = 0
    async for piece in response.aiter_bytes():
        parts.append(piece)
        size += len(piece)
        if size >= limit:
            break
    return b"".join(parts)[:limit].decode("utf-8", errors="replace")

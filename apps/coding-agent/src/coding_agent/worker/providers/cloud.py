"""Claude on Google Vertex AI and Amazon Bedrock, through the Anthropic SDK's cloud clients.

Both clouds serve the Messages API itself, so the request body and the event mapping are the
Anthropic adapter's (:mod:`.anthropic`: thinking, signatures, tools, images, prompt caching);
what differs is where a request goes and who signs it, and for Bedrock how the stream is framed:

* **Vertex** (``AsyncAnthropicVertex``): ``POST {base}/projects/{project}/locations/{region}/
  publishers/anthropic/models/{model}:streamRawPredict``, the body without ``model`` and with
  ``anthropic_version: vertex-2023-10-16``; server-sent events as from Anthropic. Auth is a
  Google OAuth access token: a static one when given (``api_key``), else the service-account
  file named by ``GOOGLE_APPLICATION_CREDENTIALS`` (read when the provider is made, since the
  worker withholds that variable from its own environment afterwards), else Application
  Default Credentials (``gcloud auth application-default login``, the metadata server),
  refreshed by ``google-auth``.
* **Bedrock** (``AsyncAnthropicBedrock``): ``POST {base}/model/{model}/invoke-with-response-stream``,
  the body without ``model`` and ``stream`` and with ``anthropic_version: bedrock-2023-05-31``,
  signed with AWS SigV4 by ``botocore`` (static keys, read when the provider is made, or the
  profile chain of ``~/.aws``), or a Bedrock API key as a bearer token. The stream is AWS
  event-stream binary framing (``application/vnd.amazon.eventstream``): each ``chunk`` frame
  carries one Messages event base64-encoded; an ``exception`` frame (throttling, a model
  error) fails the stream. :class:`EventStream` reads it with ``botocore``'s own frame parser.

Status errors are the Anthropic SDK's and are classified as the Anthropic adapter does, named
after the provider (``vertex 429 …``, ``bedrock 403 …``); ``Retry-After`` is honoured the same.
"""

from __future__ import annotations

import base64
import json
import warnings
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Unpack
from urllib.parse import quote

import msgspec

from coding_agent.worker.providers._core import ENCODER, Mapper, ProviderOptions, Sdk
from coding_agent.worker.providers._drive import SdkStream
from coding_agent.worker.providers._sse import RawResponse, add_event
from coding_agent.worker.providers.anthropic import (
    ANTHROPIC_MODELS,
    AnthropicProvider,
    decode_event,
)
from pico3.models import ModelInfo, ModelProviderError, Request

__all__ = [
    "BEDROCK_MODELS",
    "VERTEX_MODELS",
    "BedrockProvider",
    "EventStream",
    "VertexProvider",
    "google_credentials",
]

VERTEX_VERSION = "vertex-2023-10-16"
BEDROCK_VERSION = "bedrock-2023-05-31"

_CLOUD_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

VERTEX_MODELS: tuple[ModelInfo, ...] = tuple(
    msgspec.structs.replace(m, provider="vertex") for m in ANTHROPIC_MODELS
)
"""Claude on Vertex: the Anthropic ids and list prices (Vertex's regional endpoints may cost
10% more: override prices with ``[[models]]``)."""

BEDROCK_MODELS: tuple[ModelInfo, ...] = tuple(
    msgspec.structs.replace(m, id=bedrock_id, provider="bedrock", supports_web_search=False)
    for m, bedrock_id in zip(
        ANTHROPIC_MODELS,
        (
            "us.anthropic.claude-sonnet-4-6",
            "us.anthropic.claude-opus-4-7",
            "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        ),
        strict=True,
    )
)
"""Claude on Bedrock by its US cross-region inference profile ids (``eu.``/``apac.`` or a plain
``anthropic.…`` model id work too, unpriced unless configured). Bedrock does not run Anthropic's
web search tool: the agent's ``web_search`` tool (a backend) stays."""


def _named(error: ModelProviderError | None, name: str) -> ModelProviderError | None:
    """``error`` with its leading ``anthropic`` replaced by the provider's name."""
    if error is None or not error.message.startswith("anthropic"):
        return error
    return ModelProviderError(
        name + error.message.removeprefix("anthropic"),
        retryable=error.retryable,
        retry_after=error.retry_after,
        status=error.status,
    )


def _cloud_body(provider: AnthropicProvider, request: Request, info: ModelInfo, mapper: Mapper,
                version: str) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """The model id and the Messages body without it, with the cloud's ``anthropic_version``."""
    params = provider._params(request, info, mapper)  # pyright: ignore[reportPrivateUsage]
    model = params.pop("model")
    params["anthropic_version"] = version
    return model, params


def google_credentials(path: str) -> Any:
    """The ``google-auth`` credentials in the key file at ``path`` (what
    ``GOOGLE_APPLICATION_CREDENTIALS`` names), scoped for Vertex: a service account or an
    authorized user (``gcloud auth application-default login``) by their own loaders, any other
    kind (workload identity federation, impersonation) by ``google-auth``'s generic one."""
    try:
        info = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ModelProviderError(
            f"vertex: cannot read the Google credentials file {path} "
            f"(GOOGLE_APPLICATION_CREDENTIALS): {exc}",
            retryable=False,
        ) from None
    kind = info.get("type") if isinstance(info, dict) else None
    if kind == "service_account":
        from google.oauth2 import service_account  # pyright: ignore

        return service_account.Credentials.from_service_account_info(  # pyright: ignore
            info, scopes=[_CLOUD_SCOPE]
        )
    if kind == "authorized_user":
        from google.oauth2 import credentials  # pyright: ignore

        return credentials.Credentials.from_authorized_user_info(  # pyright: ignore
            info, scopes=[_CLOUD_SCOPE]
        )
    import google.auth  # pyright: ignore

    with warnings.catch_warnings():  # the generic loader warns that it is generic
        warnings.simplefilter("ignore", DeprecationWarning)
        loaded, _ = google.auth.load_credentials_from_file(path, scopes=[_CLOUD_SCOPE])  # pyright: ignore
    return loaded  # pyright: ignore


class VertexProvider(AnthropicProvider):
    """Claude on Vertex AI (keyword arguments: :class:`._core.SdkProvider`'s, and these).

    ``region`` is the Vertex location (``global``, ``us-east5``, ``europe-west1``…), ``project``
    the Google Cloud project id. ``api_key``, when not empty, is a static OAuth access token
    (``gcloud auth print-access-token``); ``credentials_file`` a service-account key file."""

    sdk = Sdk(package="anthropic", client="AsyncAnthropicVertex", path="", decode=decode_event)
    bundled = VERTEX_MODELS
    default_name = "vertex"

    def __init__(
        self,
        *,
        region: str,
        project: str,
        credentials_file: str | None = None,
        **options: Unpack[ProviderOptions],
    ) -> None:
        super().__init__(**options)
        self.region = region
        self.project = project
        self._credentials_file = credentials_file

    def _client_keywords(self) -> dict[str, Any]:
        options = self._client_options
        keywords: dict[str, Any] = {
            "region": self.region,
            "project_id": self.project,
            "base_url": options["base_url"],
            "timeout": options["timeout"],
            "max_retries": 0,
        }
        if options["api_key"]:
            keywords["access_token"] = options["api_key"]
        elif self._credentials_file:
            keywords["credentials"] = google_credentials(self._credentials_file)
        return keywords

    def path(self, model: str) -> str:
        """The path a streamed request for ``model`` is POSTed to (under the base URL)."""
        project, region = quote(self.project, safe=""), quote(self.region, safe="")
        return (
            f"/projects/{project}/locations/{region}/publishers/anthropic/models/"
            f"{quote(model, safe='@.-_')}:streamRawPredict"
        )

    async def _open(self, request: Request, info: ModelInfo, mapper: Mapper) -> SdkStream:
        model, body = _cloud_body(self, request, info, mapper, VERTEX_VERSION)
        return await self._post(ENCODER.encode(body), self.path(model))

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        return _named(super()._classify(exc), self.name)


class BedrockProvider(AnthropicProvider):
    """Claude on Amazon Bedrock (keyword arguments: :class:`._core.SdkProvider`'s, and these).

    ``region`` is the AWS region; ``aws`` the static credentials read from the environment
    (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), if any;
    ``profile`` an ``~/.aws`` profile otherwise (the default chain when neither is given).
    ``api_key``, when not empty, is a Bedrock API key sent as a bearer token instead."""

    sdk = Sdk(package="anthropic", client="AsyncAnthropicBedrock", path="", decode=decode_event)
    bundled = BEDROCK_MODELS
    default_name = "bedrock"

    def __init__(
        self,
        *,
        region: str,
        aws: Mapping[str, str] | None = None,
        profile: str | None = None,
        **options: Unpack[ProviderOptions],
    ) -> None:
        super().__init__(**options)
        self.region = region
        self._aws = dict(aws or {})
        self._profile = profile

    def _client_keywords(self) -> dict[str, Any]:
        options = self._client_options
        keywords: dict[str, Any] = {
            "aws_region": self.region,
            "base_url": options["base_url"],
            "timeout": options["timeout"],
            "max_retries": 0,
        }
        if options["api_key"]:
            keywords["api_key"] = options["api_key"]
            return keywords
        keywords["aws_access_key"] = self._aws.get("AWS_ACCESS_KEY_ID")
        keywords["aws_secret_key"] = self._aws.get("AWS_SECRET_ACCESS_KEY")
        keywords["aws_session_token"] = self._aws.get("AWS_SESSION_TOKEN")
        keywords["aws_profile"] = self._profile
        return keywords

    @staticmethod
    def path(model: str) -> str:
        """The path a streamed request for ``model`` is POSTed to (under the base URL)."""
        return f"/model/{quote(model, safe=':')}/invoke-with-response-stream"

    async def _open(self, request: Request, info: ModelInfo, mapper: Mapper) -> SdkStream:
        model, body = _cloud_body(self, request, info, mapper, BEDROCK_VERSION)
        body.pop("stream", None)
        return await self._post(ENCODER.encode(body), self.path(model))

    def _stream(self, response: Any) -> SdkStream:
        return EventStream(response, self.name)

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        return _named(super()._classify(exc), self.name)


class _Chunk(msgspec.Struct):
    bytes: str = ""


class _Exception(msgspec.Struct):
    message: str = ""


_RETRYABLE_EXCEPTIONS = frozenset(
    {
        "throttlingException",
        "serviceUnavailableException",
        "internalServerException",
        "modelStreamErrorException",
    }
)


class EventStream:
    """The Messages events of a Bedrock ``invoke-with-response-stream`` response (an
    ``SdkStream``): AWS event-stream frames parsed by ``botocore.eventstream``, each ``chunk``
    frame's base64 payload decoded as the Anthropic stream decodes an SSE event."""

    def __init__(self, response: RawResponse, name: str = "bedrock") -> None:
        self._response = response
        self._name = name

    async def close(self) -> None:
        """Close the HTTP response."""
        await self._response.aclose()

    async def batches(self) -> AsyncIterator[list[Any]]:
        """The decoded events, a list per network read (never an empty one)."""
        from botocore.eventstream import EventStreamBuffer  # pyright: ignore[reportMissingTypeStubs]

        frames: Any = EventStreamBuffer()
        chunks = self._response.aiter_bytes()
        async for data in chunks:
            frames.add_data(data)
            batch: list[Any] = []
            for frame in frames:
                decoded = self._decode(frame.headers, frame.payload)
                if await add_event(decoded, batch, chunks):
                    if batch:
                        yield batch
                    return
            if batch:
                yield batch

    def _decode(self, headers: Mapping[str, Any], payload: bytes) -> Any:
        kind = headers.get(":message-type")
        if kind == "event":
            if headers.get(":event-type") != "chunk":
                return None
            raw = base64.b64decode(msgspec.json.decode(payload, type=_Chunk).bytes)
            event = msgspec.json.decode(raw, type=dict[str, Any]).get("type")
            return decode_event(str(event or "message"), raw)
        exception = str(headers.get(":exception-type") or headers.get(":error-code") or "error")
        try:
            message = msgspec.json.decode(payload, type=_Exception).message
        except (msgspec.DecodeError, msgspec.ValidationError):
            message = payload.decode(errors="replace")
        raise ModelProviderError(
            f"{self._name} {exception}: {message}",
            retryable=exception in _RETRYABLE_EXCEPTIONS,
            status=200,
        )

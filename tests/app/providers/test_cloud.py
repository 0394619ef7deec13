"""Claude on Vertex and Bedrock: the Anthropic SDK's cloud clients talking to a local stub that
speaks each cloud's wire (Vertex: SSE under the project/location path; Bedrock: SigV4-signed
requests and the AWS event-stream binary framing), credentials from the environment."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from provider_support import BINARY, PNG, READ, Sleeps, ask, collect
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND
from coding_agent.settings.model_config import key_variables
from coding_agent.worker.providers.cloud import BedrockProvider, VertexProvider
from coding_agent.worker.providers.registry import resolve_model
from pico3.models import (
    DoneEvent,
    ErrorEvent,
    ImageContent,
    Request,
    RetryPolicy,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)


def _events(model: str) -> list[dict[str, Any]]:
    """A Messages stream: thinking (signed), text, then a tool call."""
    usage = {"input_tokens": 30, "output_tokens": 1, "cache_read_input_tokens": 10,
             "cache_creation_input_tokens": 5}  # fmt: skip
    return [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message",
         "role": "assistant", "model": model, "content": [], "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Look."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Reading."}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use",
         "id": "toolu_1", "name": "read", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta",
         "partial_json": '{"path": "a.txt"}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 40}},
        {"type": "message_stop"},
    ]  # fmt: skip


def _request(model: str) -> Request:
    content = [TextContent(text="read a.txt, see the picture"), ImageContent(PNG, "image/png")]
    return Request(
        model=model, messages=[UserMessage(content=content)], tools=[READ], thinking_level="low"
    )


def _expected_answer() -> list[Any]:
    return [
        ThinkingContent(thinking="Look.", signature="sig"),
        TextContent(text="Reading."),
        ToolCall(id="toolu_1", name="read", arguments={"path": "a.txt"}),
    ]


def _assert_messages_body(body: dict[str, Any], version: str) -> None:
    assert "model" not in body and body["anthropic_version"] == version
    assert body["tools"][0]["name"] == "read"
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body["messages"][0]["content"][1]["source"] == {
        "type": "base64", "media_type": "image/png", "data": PNG
    }  # fmt: skip


# -- Vertex ----------------------------------------------------------------------------------------
def _vertex(server: StubServer, sleeps: Sleeps | None = None, **kw: Any) -> VertexProvider:
    return VertexProvider(
        api_key=kw.pop("api_key", "ya29.static-token"),
        base_url=f"{server.url}/v1",
        region="us-east5",
        project="my-project",
        sleep=sleeps or Sleeps(),
        retry=RetryPolicy(max_retries=2, base_delay=1.0, jitter=0.0),
        **kw,
    )


@pytest.mark.anyio
async def test_vertex_streams_a_tool_call_to_the_project_path_with_the_access_token() -> None:
    model = "claude-sonnet-4-6"
    script = [sse(e, e["type"]) for e in _events(model)]
    with StubServer([Reply(events=script)]) as server:
        events = await collect(_vertex(server), _request(model))
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert done.message.content == _expected_answer()
    assert done.message.provider == "vertex" and done.message.api == "anthropic-messages"
    usage = done.message.usage
    assert usage is not None and (usage.input, usage.output, usage.cache_read) == (30, 40, 10)
    assert usage.cost.total == pytest.approx((30 * 3 + 40 * 15 + 10 * 0.3 + 5 * 3.75) / 1e6)
    sent = server.requests[0]
    assert sent.path == (
        "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4-6:streamRawPredict"
    )
    assert sent.headers["authorization"] == "Bearer ya29.static-token"
    _assert_messages_body(sent.body, "vertex-2023-10-16")


def _service_account(token_uri: str) -> dict[str, str]:
    """A service-account key file's fields, with a fresh RSA key and the stub as token URI."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return {
        "type": "service_account", "project_id": "my-project", "private_key_id": "k1",
        "private_key": pem, "client_email": "agent@my-project.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": token_uri,
    }  # fmt: skip


@pytest.mark.anyio
async def test_vertex_gets_its_token_from_google_application_credentials(tmp_path: Path) -> None:
    """The credential chain: a service-account key file, exchanged for an access token at the
    stub's token endpoint (a signed JWT grant), then sent as the bearer token."""
    model = "claude-haiku-4-5"
    token = Reply(json_body={"access_token": "ya29.exchanged", "expires_in": 3600,
                             "token_type": "Bearer"})  # fmt: skip
    script = [sse(e, e["type"]) for e in _events(model)]
    with StubServer([token, Reply(events=script)]) as server:
        key_file = tmp_path / "sa.json"
        key_file.write_text(json.dumps(_service_account(f"{server.url}/token")))
        env = {"ANTHROPIC_VERTEX_PROJECT_ID": "my-project", "CLOUD_ML_REGION": "europe-west1",
               "ANTHROPIC_VERTEX_BASE_URL": f"{server.url}/v1",
               "GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}  # fmt: skip
        selection = resolve_model(f"vertex/{model}", env=env)
        events = await collect(selection.provider, _request(model))
    assert isinstance(events[-1], DoneEvent)
    exchange, call = server.requests
    assert exchange.path == "/token"
    assert exchange.body["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    claims = exchange.body["assertion"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert claims["iss"] == "agent@my-project.iam.gserviceaccount.com"
    assert claims["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    assert call.path.endswith("/locations/europe-west1/publishers/anthropic/models/"
                              "claude-haiku-4-5:streamRawPredict")  # fmt: skip
    assert call.headers["authorization"] == "Bearer ya29.exchanged"


@pytest.mark.anyio
async def test_vertex_errors_name_the_provider_and_429_honours_retry_after() -> None:
    limited = Reply(429, {"retry-after": "4"}, {"error": {"code": 429, "status":
                    "RESOURCE_EXHAUSTED", "message": "Quota exceeded"}})  # fmt: skip
    denied = Reply(403, json_body={"error": {"code": 403, "status": "PERMISSION_DENIED",
                   "message": "Permission denied on resource project my-project."}})  # fmt: skip
    sleeps = Sleeps()
    with StubServer([limited, denied]) as server:
        events = await collect(_vertex(server, sleeps), _request("claude-sonnet-4-6"))
    assert sleeps.waits == [4.0] and len(server.requests) == 2
    error = events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    assert error.error.error_message == (
        "vertex 403 error: Permission denied on resource project my-project."
    )


def test_vertex_needs_a_project() -> None:
    with pytest.raises(ValueError) as failed:
        resolve_model("vertex/claude-sonnet-4-6", env={})
    assert str(failed.value).startswith(
        "vertex needs a Google Cloud project: set ANTHROPIC_VERTEX_PROJECT_ID or "
        "providers.vertex.project in "
    )


# -- Bedrock ---------------------------------------------------------------------------------------
def _frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (lengths, CRC), string headers, payload, CRC."""
    encoded = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
        for k, v in headers.items()
    )
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _chunk(event: dict[str, Any]) -> bytes:
    payload = json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode()})
    headers = {":event-type": "chunk", ":content-type": "application/json",
               ":message-type": "event"}  # fmt: skip
    return _frame(headers, payload.encode())


def _exception(kind: str, message: str) -> bytes:
    headers = {":exception-type": kind, ":content-type": "application/json",
               ":message-type": "exception"}  # fmt: skip
    return _frame(headers, json.dumps({"message": message}).encode())


EVENT_STREAM = {"content-type": "application/vnd.amazon.eventstream"}


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Static fake AWS credentials, and no ~/.aws files read."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    for name in ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return {
        "AWS_REGION": "us-west-2",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        "AWS_SESSION_TOKEN": "session-token",
    }


@pytest.mark.anyio
async def test_bedrock_signs_the_request_and_reads_the_event_stream(
    aws_env: dict[str, str],
) -> None:
    model = "us.anthropic.claude-sonnet-4-6"
    frames = [_chunk(e) for e in _events(model)]
    with StubServer([Reply(headers=EVENT_STREAM, events=frames)]) as server:
        env = {**aws_env, "ANTHROPIC_BEDROCK_BASE_URL": server.url}
        selection = resolve_model(f"bedrock/{model}", env=env)
        assert isinstance(selection.provider, BedrockProvider)
        events = await collect(selection.provider, _request(model))
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert done.message.content == _expected_answer()
    assert done.message.provider == "bedrock"
    assert done.message.usage is not None and done.message.usage.cost.total > 0
    sent = server.requests[0]
    assert sent.path == f"/model/{model}/invoke-with-response-stream"
    auth = sent.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-west-2/bedrock/aws4_request" in auth
    assert sent.headers["x-amz-security-token"] == "session-token"
    _assert_messages_body(sent.body, "bedrock-2023-05-31")
    assert "stream" not in sent.body


@pytest.mark.anyio
async def test_bedrock_exception_frames_and_status_errors_are_one_line(
    aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    throttled = [_chunk(_events(model)[0]), _exception("throttlingException", "Too many tokens")]
    denied = Reply(403, json_body={"message": "The security token included in the request is invalid."})  # fmt: skip
    sleeps = Sleeps()
    with StubServer([Reply(headers=EVENT_STREAM, events=throttled), denied]) as server:
        provider = BedrockProvider(
            api_key="",
            base_url=server.url,
            region="us-west-2",
            aws={k: v for k, v in aws_env.items() if k.startswith("AWS_") and k != "AWS_REGION"},
            sleep=sleeps,
            retry=RetryPolicy(max_retries=0),
        )
        try:
            throttled_events = [e async for e in provider.stream(_request(model), BACKGROUND)]
            denied_events = [e async for e in provider.stream(_request(model), BACKGROUND)]
        finally:
            await provider.aclose()
    error = throttled_events[-1]
    assert isinstance(error, ErrorEvent) and error.retryable
    assert error.error.error_message == "bedrock throttlingException: Too many tokens"
    error = denied_events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    assert error.error.error_message == (
        "bedrock 403 error: The security token included in the request is invalid."
    )


def test_bedrock_needs_a_region_and_the_cloud_secrets_are_withheld() -> None:
    with pytest.raises(ValueError, match="bedrock needs an AWS region: set AWS_REGION"):
        resolve_model("bedrock/us.anthropic.claude-sonnet-4-6", env={})
    names = key_variables()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_BEARER_TOKEN_BEDROCK", "GOOGLE_APPLICATION_CREDENTIALS"):  # fmt: skip
        assert name in names
    assert len(names) == len(set(names))


def test_a_headless_run_on_bedrock_signs_with_the_keys_the_worker_withholds(
    agent_env: dict[str, str], aws_env: dict[str, str], tmp_path: Path
) -> None:
    """The real binary: the worker reads the AWS keys when it makes the provider, withholds
    them from its own environment, and still signs the request with them."""
    model = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    answer = [
        _events(model)[0],
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]  # fmt: skip
    reply = Reply(headers=EVENT_STREAM, events=[_chunk(e) for e in answer])
    with StubServer([reply]) as server:
        env = {**agent_env, **aws_env, "XDG_CONFIG_HOME": str(tmp_path / "config"),
               "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
               "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-credentials"),
               "ANTHROPIC_BEDROCK_BASE_URL": server.url}  # fmt: skip
        done = ask(f"bedrock/{model}", tmp_path, env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hi.\n", "")
    [sent] = server.requests
    assert sent.path == f"/model/{model}/invoke-with-response-stream"
    assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")


def test_coding_agent_config_shows_the_cloud_settings(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    """The README's config lines are valid and ``coding-agent config`` shows where each came
    from (the region from the file, the project from the environment)."""
    config = tmp_path / "config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        'model = "bedrock/us.anthropic.claude-sonnet-4-6"\n\n'
        '[providers.bedrock]\nregion = "eu-west-1"\nprofile = "work"\n\n'
        '[providers.vertex]\nregion = "us-east5"\n'
    )
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "ANTHROPIC_VERTEX_PROJECT_ID": "my-gcp-project"}  # fmt: skip
    done = subprocess.run(
        [str(BINARY), "config"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [" ".join(line.split()) for line in done.stdout.splitlines()]
    assert f"model = bedrock/us.anthropic.claude-sonnet-4-6 # {config}:1" in lines
    assert f"providers.bedrock.region = eu-west-1 # {config}:4" in lines
    assert f"providers.bedrock.profile = work # {config}:5" in lines
    assert f"providers.vertex.region = us-east5 # {config}:8" in lines
    assert (
        "providers.vertex.project = my-gcp-project # environment $ANTHROPIC_VERTEX_PROJECT_ID"
        in lines
    )

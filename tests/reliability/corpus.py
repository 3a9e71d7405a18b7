"""The hostile-input corpus: malformed requests, each with the one outcome it must get.

Owns :func:`hand_written` (named cases, one per distinct way a request can be wrong) and
:func:`generated` (hypothesis-drawn cases in families whose expected outcome follows from
the family alone, drawn derandomized so the corpus is the same on every run). A case's
``expect`` is the precise profile error code of the ``response.error`` terminal; for the
wire-mapping violations that is the mapping's defined answer (``invalid_request`` naming the
``submit.*`` rule, ``request_too_large`` over the cap), never a drop or silence.

Codes come from :mod:`nnrp_conformance.contract`; nothing here restates them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnrp_conformance import contract as c
from nnrp_conformance.wire.codec import RawFrame, dump_json

__all__ = ["MODEL", "Case", "corpus", "generated", "hand_written", "valid_envelope"]

MODEL = "scripted-model"
BAD = c.ERR_INVALID_REQUEST


@dataclass(frozen=True)
class Case:
    id: str
    expect: str                                   # profile error code
    envelope: dict[str, Any] | None = None        # sent as compact JSON when payload is None
    payload: bytes | None = None                  # the exact typed-frame payload
    frames: tuple[RawFrame, ...] | None = None    # the exact typed frames (wire cases)
    generated: bool = False
    note: str = ""
    rule: str | None = None                       # the submit.* rule named in the message

    def submit_args(self) -> dict[str, Any]:
        if self.frames is not None:
            return {"frames": list(self.frames)}
        return {"envelope": self.payload if self.payload is not None else self.envelope}


def valid_body(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "metadata": {"script": "short"}, **extra}


_DEFAULT: Any = object()


def valid_envelope(body: Any = _DEFAULT, **top: Any) -> dict[str, Any]:
    env = {"schema_version": c.SCHEMA_VERSION, "operation": c.OP_CHAT_COMPLETIONS_CREATE,
           "body": valid_body() if body is _DEFAULT else body}
    env.update(top)
    return env


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def _body(**changes: Any) -> dict[str, Any]:
    """A valid envelope whose body has ``changes`` (value ``...`` removes the key)."""
    body = valid_body()
    for k, v in changes.items():
        if v is ...:
            body.pop(k, None)
        else:
            body[k] = v
    return valid_envelope(body)


def _nnrp(**hints: Any) -> dict[str, Any]:
    return valid_envelope(nnrp=hints)


# --- hand-written ------------------------------------------------------------------------

def _wire_cases() -> list[Case]:
    good = dump_json(valid_envelope())
    out: list[Case] = []
    broken_json = {
        "empty": b"", "space": b"   ", "open-brace": b"{", "trailing-comma": b'{"a":1,}',
        "single-quotes": b"{'schema_version':'openai-compatible/1'}", "unquoted-key": b"{a:1}",
        "truncated": good[: len(good) // 2], "two-objects": good + good, "garbage-after": good + b"x",
        "comment": b'{"a":1 /* c */}', "nul": b"\x00", "hex-number": b'{"a":0x10}',
        "control-char-in-string": b'{"a":"\x01"}', "lone-surrogate-escape-truncated": b'{"a":"\\ud8',
        "xml": b"<envelope/>", "sse": b"data: " + good + b"\n\n",
    }
    out += [Case(f"wire.invalid-json.{k}", BAD, payload=v, rule="submit.payload.json")
            for k, v in broken_json.items()]
    non_utf8 = {
        "latin1": "é".encode("latin-1") + good, "lone-continuation": b'{"a":"\x80"}',
        "overlong-slash": b'{"a":"\xc0\xaf"}', "surrogate": b'{"a":"\xed\xa0\x80"}',
        "truncated-multibyte": b'{"a":"\xe2\x82"}', "ff": b"\xff" * 8, "utf16": good.decode().encode("utf-16"),
        "cp1252-quote": b'{"a":"\x93x\x94"}',
    }
    out += [Case(f"wire.non-utf8.{k}", BAD, payload=v, rule="submit.payload.utf8") for k, v in non_utf8.items()]
    not_object = {"array": b"[]", "array-of-envelope": b"[" + good + b"]", "number": b"42", "string": b'"x"',
                  "null": b"null", "true": b"true", "float": b"1e400"}
    out += [Case(f"wire.not-object.{k}", BAD, payload=v, rule="submit.payload.object")
            for k, v in not_object.items()]
    depth = 20_000  # deeper than any JSON decoder's recursion limit, far below the size cap
    deep = b"[" * depth + b"]" * depth
    prefix, suffix = good[:-1], b"}"
    out += [
        Case("wire.deep-nesting.top-level-array", BAD, payload=deep, rule="submit.payload.json"),
        Case("wire.deep-nesting.top-level-object", BAD, payload=b'{"a":' * depth + b"1" + b"}" * depth,
             rule="submit.payload.json"),
        Case("wire.deep-nesting.in-body", BAD, payload=prefix.replace(b'"body":{', b'"body":{"x":' + deep + b",")
             + suffix, rule="submit.payload.json"),
        Case("wire.deep-nesting.in-nnrp", BAD, payload=prefix + b',"nnrp":{"x":' + deep + b"}" + suffix,
             rule="submit.payload.json"),
    ]
    frame_cases: dict[str, tuple[tuple[RawFrame, ...], str]] = {
        "extra-frame": ((RawFrame(good), RawFrame(good)), "submit.payload_frame_count"),
        "three-frames": ((RawFrame(good),) * 3, "submit.payload_frame_count"),
        "extra-empty-frame": ((RawFrame(good), RawFrame(b"")), "submit.payload_frame_count"),
        "second-frame-other-kind": ((RawFrame(good), RawFrame(b"x", payload_kind=64)), "submit.payload_kind_bitmap"),
        "profile-id": ((RawFrame(good, profile_id=1),), "submit.profile_id"),
        "schema-id": ((RawFrame(good, schema_id=4097),), "submit.schema_id"),
        "schema-version": ((RawFrame(good, schema_version=3),), "submit.schema_version"),
        "stream-semantics-2": ((RawFrame(good, stream_semantics=2),), "submit.stream_semantics"),
        "descriptor-flag-terminal": ((RawFrame(good, descriptor_flags=1),), "submit.descriptor_flags"),
        "descriptor-flag-partial": ((RawFrame(good, descriptor_flags=2),), "submit.descriptor_flags"),
        "descriptor-flag-override": ((RawFrame(good, descriptor_flags=4),), "submit.descriptor_flags"),
    }
    for kind_name, kind in (("token-chunk", 2), ("audio-chunk", 4), ("video-chunk", 8),
                            ("tool-delta", 32), ("opaque-bytes", 64)):
        frame_cases[f"payload-kind-{kind_name}"] = ((RawFrame(good, payload_kind=kind),), "submit.payload_kind_bitmap")
    out += [Case(f"wire.frames.{k}", BAD, frames=f, rule=rule) for k, (f, rule) in frame_cases.items()]
    cap = c.DEFAULT_MAX_ENVELOPE_BYTES
    for name, size in (("cap-plus-1k", cap + 1024), ("twice-cap", 2 * cap)):
        out.append(Case(f"size.{name}", c.ERR_REQUEST_TOO_LARGE, envelope=_body(
            messages=[{"role": "user", "content": "x" * size}]), rule="submit.too_large"))
    out.append(Case("size.padding-in-nnrp", c.ERR_REQUEST_TOO_LARGE,
                    envelope=_nnrp(pad="p" * (cap + 10)), rule="submit.too_large"))
    return out


def _envelope_cases() -> list[Case]:
    sv = c.ERR_INVALID_SCHEMA_VERSION
    unsupported = c.ERR_UNSUPPORTED_OPERATION
    out: list[Case] = []
    for name, value in {"v2": "openai-compatible/2", "v0": "openai-compatible/0", "empty": "",
                        "upper": c.SCHEMA_VERSION.upper(), "no-version": "openai-compatible",
                        "int": 1, "null": None, "list": [c.SCHEMA_VERSION], "padded": f" {c.SCHEMA_VERSION}",
                        "other-profile": "anthropic/1"}.items():
        out.append(Case(f"envelope.schema-version.{name}", sv, envelope=valid_envelope(schema_version=value)))
    out.append(Case("envelope.schema-version.missing", BAD, envelope=_without(valid_envelope(), "schema_version")))
    for name, op in {"responses": c.OP_RESPONSES_CREATE, "models-list": c.OP_MODELS_LIST,
                     "embeddings": c.OP_EMBEDDINGS_CREATE, "delete": "chat.completions.delete",
                     "http-path": "/v1/chat/completions", "upper": c.OP_CHAT_COMPLETIONS_CREATE.upper(),
                     "max-length": "x" * 256, "unicode": "chat.cömpletions.create",
                     "module-path": "os.system", "file-path": "../../etc/passwd"}.items():
        out.append(Case(f"envelope.operation.unknown.{name}", unsupported, envelope=valid_envelope(operation=op)))
    for name, op in {"int": 1, "null": None, "list": [], "object": {}, "empty": "", "too-long": "x" * 257}.items():
        out.append(Case(f"envelope.operation.bad-type.{name}", BAD, envelope=valid_envelope(operation=op)))
    out.append(Case("envelope.operation.missing", BAD, envelope=_without(valid_envelope(), "operation")))
    out.append(Case("envelope.body.missing", BAD, envelope=_without(valid_envelope(), "body")))
    for name, body in {"list": [], "string": "{}", "null": None, "number": 3}.items():
        out.append(Case(f"envelope.body.bad-type.{name}", BAD, envelope=valid_envelope(body=body)))
    for key in ("model", "stream", "messages", "extra", "timeout_ms", "Body"):
        out.append(Case(f"envelope.extra-field.{key}", BAD, envelope=valid_envelope(**{key: 1})))
    for name, rid in {"int": 7, "empty": "", "too-long": "r" * 257, "object": {"id": 1}}.items():
        out.append(Case(f"envelope.request-id.{name}", BAD, envelope=valid_envelope(request_id=rid)))
    for name, nnrp in {"list": [], "string": "timeout_ms=5", "null": None}.items():
        out.append(Case(f"envelope.nnrp.bad-type.{name}", BAD, envelope=valid_envelope(nnrp=nnrp)))
    hints = {
        "timeout-zero": {"timeout_ms": 0}, "timeout-negative": {"timeout_ms": -1},
        "timeout-string": {"timeout_ms": "100"}, "timeout-float": {"timeout_ms": 1.5},
        "timeout-over-an-hour": {"timeout_ms": 3_600_001}, "timeout-bool": {"timeout_ms": True},
        "timeout-huge": {"timeout_ms": 10**30},
        "diagnostics-string": {"diagnostics": "yes"}, "diagnostics-int": {"diagnostics": 1},
        "cancel-after-zero": {"cancel_after_events": 0}, "cancel-after-negative": {"cancel_after_events": -3},
        "cancel-after-string": {"cancel_after_events": "1"},
        "extensions-string": {"extensions": "vllm.diagnostics"}, "extensions-duplicate": {"extensions": ["a", "a"]},
        "extensions-empty-name": {"extensions": [""]}, "openai-chunk-string": {"openai_chunk": "true"},
        "hint-name-upper": {"Timeout": 1}, "hint-name-dash": {"x-vendor": 1}, "hint-name-path": {"../x": 1},
    }
    out += [Case(f"envelope.nnrp.{k}", BAD, envelope=_nnrp(**v)) for k, v in hints.items()]
    return out


def _body_cases() -> list[Case]:
    missing = c.ERR_MISSING_MESSAGES
    out = [
        Case("body.messages.missing", missing, envelope=_body(messages=...)),
        Case("body.messages.missing-empty-body", missing, envelope=valid_envelope(body={})),
        Case("body.messages.missing-with-prompt", missing, envelope=_body(messages=..., prompt="hi")),
        Case("body.messages.missing-misspelt", missing, envelope=_body(messages=..., message=[{"role": "user"}])),
    ]
    for name, value in {"null": None, "string": "hi", "object": {"role": "user"}, "empty": [],
                        "number": 0, "list-of-strings": ["hi"], "list-of-null": [None],
                        "role-missing": [{"content": "hi"}], "role-int": [{"role": 1, "content": "x"}],
                        "second-bad": [{"role": "user", "content": "x"}, 5]}.items():
        out.append(Case(f"body.messages.{name}", BAD, envelope=_body(messages=value)))
    for name, value in {"int": 3, "list": [MODEL], "null": None, "object": {"id": MODEL}}.items():
        if value is None:
            continue  # a null model means "the served model": a valid request
        out.append(Case(f"body.model.{name}", BAD, envelope=_body(model=value)))
    for name, value in {"string": "true", "int": 1, "null": None}.items():
        out.append(Case(f"body.stream.{name}", BAD, envelope=_body(stream=value)))
    for key, value in {"chat_template": "{{ open('/etc/passwd').read() }}",
                       "logits_processors": ["os.system"],
                       "mm_processor_kwargs": {"path": "/tmp/x"},
                       "kv_transfer_params": {"remote_host": "10.0.0.1"}}.items():
        out.append(Case(f"body.operator-only.{key}", BAD, envelope=_body(**{key: value}),
                        note="nothing in a request can name a file, module or template"))
    return out


def _backend_cases() -> list[Case]:
    be = c.ERR_BACKEND_ERROR
    ctx = c.ERR_CONTEXT_LENGTH_EXCEEDED
    out = [Case(f"model.unknown.{k}", be, envelope=_body(model=v)) for k, v in {
        "other": "gpt-4", "backend-error": "backend-error", "abs-path": "/etc/passwd",
        "rel-path": "../../models/secret", "hf-repo": "meta-llama/Llama-3-8B", "empty-after-trim": " ",
        "url": "file:///etc/shadow"}.items()]
    absurd = {
        "temperature-negative": {"temperature": -1}, "temperature-huge": {"temperature": 1e308},
        "temperature-string": {"temperature": "hot"}, "temperature-bool": {"temperature": True},
        "temperature-above-2": {"temperature": 2.5}, "top-p-zero": {"top_p": 0},
        "top-p-above-1": {"top_p": 1.5}, "top-p-negative": {"top_p": -0.5},
        "max-tokens-zero": {"max_tokens": 0}, "max-tokens-negative": {"max_tokens": -5},
        "max-tokens-string": {"max_tokens": "10"}, "max-tokens-float": {"max_tokens": 1.5},
        "n-zero": {"n": 0}, "n-billion": {"n": 10**9}, "presence-penalty-100": {"presence_penalty": 100},
        "frequency-penalty--100": {"frequency_penalty": -100}, "seed-2-to-70": {"seed": 2**70},
        "stop-number": {"stop": 5}, "tools-string": {"tools": "all"},
        "content-number": {"messages": [{"role": "user", "content": 5}]},
        "max-completion-tokens-negative": {"max_completion_tokens": -1},
    }
    out += [Case(f"params.absurd.{k}", BAD, envelope=_body(**v)) for k, v in absurd.items()]
    out += [Case(f"params.context.{k}", ctx, envelope=_body(**v)) for k, v in {
        "max-tokens-trillion": {"max_tokens": 10**12}, "max-tokens-over-window": {"max_tokens": 4096},
        "max-completion-tokens-huge": {"max_completion_tokens": 10**9}}.items()]
    return out


def hand_written() -> list[Case]:
    return [*_wire_cases(), *_envelope_cases(), *_body_cases(), *_backend_cases()]


# --- generated ----------------------------------------------------------------------------

_json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=12)
_json = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def _draw(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    """``n`` distinct examples of ``strategy``, derandomized: the same list on every run."""
    seen: list[Any] = []
    keys: set[str] = set()

    @settings(max_examples=n * 4, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: Any) -> None:
        key = repr(value)
        if len(seen) < n and key not in keys:
            keys.add(key)
            seen.append(value)

    collect()
    return seen


def _not_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def generated(per_family: int = 16) -> list[Case]:
    n = per_family
    good = dump_json(valid_envelope())
    families: list[tuple[str, st.SearchStrategy[Any], Callable[[Any], Case]]] = [
        ("non-utf8", st.binary(min_size=1, max_size=64).filter(_not_utf8),
         lambda v: Case("", BAD, payload=good[:20] + v + good[20:])),
        ("not-object", _json.filter(lambda v: not isinstance(v, dict)),
         lambda v: Case("", BAD, payload=json.dumps(v).encode())),
        ("truncated", st.integers(1, len(good) - 1), lambda cut: Case("", BAD, payload=good[:cut])),
        ("schema-version", _json.filter(lambda v: v != c.SCHEMA_VERSION),
         lambda v: Case("", c.ERR_INVALID_SCHEMA_VERSION, envelope=valid_envelope(schema_version=v))),
        ("operation", st.text(min_size=1, max_size=256).filter(
            lambda s: s not in (c.OP_CHAT_COMPLETIONS_CREATE, c.OP_CAPABILITIES_GET)),
         lambda v: Case("", c.ERR_UNSUPPORTED_OPERATION, envelope=valid_envelope(operation=v))),
        ("extra-field", st.tuples(st.text(min_size=1, max_size=16).filter(lambda k: k not in c.ENVELOPE_FIELDS),
                                  _json),
         lambda kv: Case("", BAD, envelope=valid_envelope(**{kv[0]: kv[1]}))),
        ("body-without-messages", st.dictionaries(st.text(max_size=10).filter(lambda k: k != "messages"),
                                                  _json, max_size=5),
         lambda body: Case("", c.ERR_MISSING_MESSAGES, envelope=valid_envelope(body=body))),
        ("messages-wrong-type", _json.filter(lambda v: not (isinstance(v, list) and v)),
         lambda v: Case("", BAD, envelope=_body(messages=v))),
        ("temperature-out-of-range", st.floats(allow_nan=False, allow_infinity=False).filter(
            lambda t: not 0 <= t <= 2), lambda t: Case("", BAD, envelope=_body(temperature=t))),
        ("timeout-not-positive-int", _json.filter(lambda v: not (
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 3_600_000)),
         lambda v: Case("", BAD, envelope=_nnrp(timeout_ms=v))),
    ]
    out: list[Case] = []
    for family, strategy, make in families:
        for i, value in enumerate(_draw(strategy, n)):
            case = make(value)
            out.append(Case(f"generated.{family}.{i:02d}", case.expect, envelope=case.envelope,
                            payload=case.payload, generated=True, note=repr(value)[:120]))
    return out


def corpus() -> list[Case]:
    return [*hand_written(), *generated()]


@dataclass
class Tally:
    """Per-category counts for the report."""

    by_category: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, cases: list[Case]) -> Tally:
        t = cls()
        for case in cases:
            cat = ".".join(case.id.split(".")[:2])
            t.by_category[cat] = t.by_category.get(cat, 0) + 1
        return t

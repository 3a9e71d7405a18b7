"""vLLM's rejections as :class:`BackendError`: a family the profile maps to an error code
(``request_validation``, ``unknown_model``, ``context_too_long``, ``engine_failure``,
``internal``), with vLLM's own status, type and message kept, classified as vLLM's HTTP
server would answer them."""

from __future__ import annotations

import re
from typing import Any

from nnrp_conformance.jsonsafe import jsonable

__all__ = ["FAMILIES", "BackendError", "BackendStartupError"]

FAMILIES = ("request_validation", "unknown_model", "context_too_long", "engine_failure", "internal")


_CONTEXT_RE = re.compile(
    r"maximum context length|context length \(|max_model_len|max_total_tokens", re.IGNORECASE
)


_CONTEXT_PARAMS = {"input_tokens", "input_text", "max_tokens", "max_completion_tokens"}


class BackendStartupError(RuntimeError):
    """The engine could not be configured or started (bad flags, model, environment)."""


class BackendError(Exception):
    """vLLM rejected or failed a request.

    ``family`` is one of :data:`FAMILIES`; ``status``/``error_type``/``message`` are what
    vLLM said (``error.code``/``error.type``/``error.message`` of its ``ErrorResponse``,
    or the mapping its HTTP server applies to a raised exception); ``original`` is the
    full error object as a dict.
    """

    def __init__(
        self,
        family: str,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        original: dict[str, Any] | None = None,
    ) -> None:
        if family not in FAMILIES:
            raise ValueError(f"unknown BackendError family {family!r}")
        super().__init__(message)
        self.family = family
        self.status = status
        self.error_type = error_type
        self.message = message
        self.original = original if original is not None else {}

    def __repr__(self) -> str:
        return (
            f"BackendError(family={self.family!r}, status={self.status!r}, "
            f"error_type={self.error_type!r}, message={self.message!r})"
        )


def _family_for(
    status: int | None, error_type: str | None, message: str, param: str | None = None
) -> str:
    if status == 404 or error_type == "NotFoundError":
        return "unknown_model"
    if (status is not None and 400 <= status < 500) or status == 501:
        if (param in _CONTEXT_PARAMS or param is None) and _CONTEXT_RE.search(message):
            return "context_too_long"
        return "request_validation"
    if status is not None and status >= 500:
        return "engine_failure"
    return "internal"


def _error_from_response(err: Any) -> BackendError:
    info = err.error
    original = err.model_dump(mode="json") if hasattr(err, "model_dump") else {"error": {}}
    status = getattr(info, "code", None)
    error_type = getattr(info, "type", None)
    message = str(getattr(info, "message", "") or "")
    family = _family_for(status, error_type, message, getattr(info, "param", None))
    return BackendError(family, message, status=status, error_type=error_type, original=original)


def _error_from_dict(payload: dict[str, Any]) -> BackendError:
    inner = payload.get("error")
    info: dict[str, Any] = inner if isinstance(inner, dict) else payload
    status = info.get("code") if isinstance(info.get("code"), int) else None
    error_type = info.get("type") if isinstance(info.get("type"), str) else None
    message = str(info.get("message", ""))
    family = _family_for(status, error_type, message, info.get("param"))
    return BackendError(family, message, status=status, error_type=error_type, original=payload)


def _validation_error(exc: Any) -> BackendError:
    """A pydantic ValidationError from building the request, shaped like vLLM's HTTP 400."""
    errors = []
    for e in exc.errors(include_url=False):
        item = {k: e[k] for k in ("type", "loc", "msg") if k in e}
        item["loc"] = ["body", *e.get("loc", ())]
        if "input" in e and e["type"] != "missing":
            item["input"] = jsonable(e["input"])
        ctx = e.get("ctx") or {}
        if "error" in ctx:
            item["ctx"] = {"error": str(ctx["error"])}
        errors.append(item)
    message = "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in errors
    ) or str(exc)
    param = None
    for e in exc.errors(include_url=False):
        ctx_err = (e.get("ctx") or {}).get("error")
        if ctx_err is not None and getattr(ctx_err, "parameter", None):
            param = ctx_err.parameter
            break
    # vLLM's HTTP validation handler answers 400 with type "Bad Request".
    original = {
        "error": {"message": message, "type": "Bad Request", "param": param, "code": 400},
        "detail": errors,
    }
    family = "context_too_long" if _CONTEXT_RE.search(message) else "request_validation"
    return BackendError(family, message, status=400, error_type="Bad Request", original=original)


def _responses_stream_failure(exc: BaseException) -> BackendError | None:
    """vLLM's Responses stream failing to build one of its own events, or None for another
    exception.

    What comes out of the stream then is pydantic's ``ValidationError``: vLLM validates an
    event it made and the event is wrong. Seen on real runs: a ``GenerationError`` payload
    validated as a stream event (0.18.1 and 0.22.1), and on 0.18.1, with function tools, its
    ``ResponseCreatedEvent`` (a ``json_schema`` text format without its schema: tool_choice
    required or named) and its ``ResponseFunctionToolCallItem`` (``arguments`` None:
    tool_choice auto), tests/fixtures/vllm-responses/0.18.1/. The request was accepted, so it
    is the backend's failure, never a request problem, whatever a 400-style mapping of a
    validation error would say.
    """
    try:
        from pydantic import ValidationError
    except ImportError:  # pragma: no cover - pydantic comes with vLLM
        return None
    if not isinstance(exc, ValidationError):
        return None
    text = str(exc)
    return BackendError(
        "engine_failure",
        f"vLLM's Responses stream failed building its own event: {text.splitlines()[0]}",
        status=500,
        error_type=type(exc).__name__,
        original={"error": {"message": text[:4000], "type": type(exc).__name__, "code": 500}},
    )

"""Checking a chat request's body before the "model" reads it: messages, tools, scalars,
choices (``n``, ``response_format``).

Each check raises ``ProfileError`` (``missing_messages`` or ``invalid_request``, or
``context_length_exceeded`` for a ``max_tokens`` above the model's output limit) with a
message naming the member at fault; a body that passes is one the chat "model"
(``chat_profile``) can answer.
"""

from __future__ import annotations

from typing import Any

from envelope import ProfileError, is_int

MAX_OUTPUT_TOKENS = 4096
MAX_CHOICES = 8
RESPONSE_FORMATS = frozenset({"text", "json_object"})
MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content)
    return ""


def check_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    if "messages" not in body:
        raise ProfileError("missing_messages", "chat body has no 'messages'")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ProfileError("invalid_request", "'messages' must be a non-empty list")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ProfileError("invalid_request", f"{where} must be an object")
        if message.get("role") not in MESSAGE_ROLES:
            raise ProfileError(
                "invalid_request", f"{where}.role must be one of {sorted(MESSAGE_ROLES)}"
            )
        if "content" not in message:
            raise ProfileError("invalid_request", f"{where} has no 'content'")
        content = message["content"]
        if content is None and message["role"] == "assistant":
            continue
        if isinstance(content, list):
            for j, part in enumerate(content):
                # OpenAI's chat text part is {"type": "text", "text": ...}; a Responses part
                # (input_text) or an image, audio or file part is not one this model reads
                if not (isinstance(part, dict) and part.get("type") == "text"
                        and isinstance(part.get("text"), str)):
                    raise ProfileError(
                        "invalid_request", f"{where}.content[{j}] must be a text part "
                        "({\"type\": \"text\", \"text\": ...}): this model reads text only"
                    )
        elif not isinstance(content, str):
            raise ProfileError("invalid_request", f"{where}.content must be a string or parts")
    return messages


def check_tools(body: dict[str, Any]) -> dict[str, Any] | None:
    """The tool the model calls, or None for a text answer."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if tools is None:
        if choice not in (None, "none", "auto"):
            raise ProfileError("invalid_request", "'tool_choice' names a tool but no 'tools'")
        return None
    if not isinstance(tools, list) or not tools:
        raise ProfileError("invalid_request", "'tools' must be a non-empty list")
    by_name: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(fn, dict):
            raise ProfileError("invalid_request", f"tools[{i}] must be a function tool")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ProfileError("invalid_request", f"tools[{i}].function.name must be a string")
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            raise ProfileError("invalid_request", f"tools[{i}].function.parameters: not an object")
        by_name[fn["name"]] = fn
    if choice == "none":
        return None
    if choice in (None, "auto", "required"):
        return next(iter(by_name.values()))
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        if name in by_name:
            return by_name[name]
        raise ProfileError("invalid_request", f"'tool_choice' names unknown tool {name!r}")
    raise ProfileError(
        "invalid_request", "'tool_choice' must be none, auto, required or a function"
    )


def check_scalars(body: dict[str, Any]) -> None:
    if "stream" in body and not isinstance(body["stream"], bool):
        raise ProfileError("invalid_request", "'stream' must be a boolean")
    for key in ("temperature", "top_p"):
        if key in body and (not isinstance(body[key], int | float) or isinstance(body[key], bool)):
            raise ProfileError("invalid_request", f"'{key}' must be a number")
    check_choices(body)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ProfileError("invalid_request", "'stream_options' must be an object")
    for key in ("max_tokens", "max_completion_tokens"):
        if key not in body or body[key] is None:
            continue
        if not is_int(body[key]) or body[key] <= 0:
            raise ProfileError("invalid_request", f"'{key}' must be a positive integer")
        if body[key] > MAX_OUTPUT_TOKENS:
            raise ProfileError(
                "context_length_exceeded",
                f"'{key}' {body[key]} exceeds this model's {MAX_OUTPUT_TOKENS} output tokens",
            )


def check_choices(body: dict[str, Any]) -> None:
    """``n`` (1 to MAX_CHOICES, and 1 with ``tools``: the profile's tool-call events name no
    choice) and ``response_format`` (``text`` or ``json_object``)."""
    n = body.get("n")
    if n is not None:
        if not is_int(n) or not 1 <= n <= MAX_CHOICES:
            raise ProfileError("invalid_request", f"'n' must be an integer from 1 to {MAX_CHOICES}")
        if n > 1 and body.get("tools"):
            raise ProfileError("invalid_request", "'n' above 1 is not served with 'tools' (the "
                               "profile's tool-call events name no choice)")
    form = body.get("response_format")
    if form is not None and not (isinstance(form, dict) and form.get("type") in RESPONSE_FORMATS):
        raise ProfileError("invalid_request", "'response_format' must be {\"type\": \"text\"} "
                           "or {\"type\": \"json_object\"}")

"""What the tiny model says and every knob of its build: the scripted replies (a plain chat's
text, repeated until ``max_tokens``; a chat with tools, one tool call then EOS), the spec
stored in each build's marker (a changed spec rebuilds) and the special tokens its tokenizer
and chat template share.
"""

from __future__ import annotations

__all__ = [
    "SCRIPTED_TEXT_REPLY",
    "SCRIPTED_TOOL_CALL",
    "SCRIPTED_TOOL_REPLY",
    "TINY_MODEL_SPEC",
]

# The script. A plain chat repeats the text reply forever (each repetition after the first
# starts with a space); a chat with tools emits the tool reply, then EOS.
SCRIPTED_TEXT_REPLY = (
    "Hello! This scripted tiny model repeats these words until its token limit ends each reply."
)
SCRIPTED_TOOL_CALL = '{"name":"lookup","arguments":{"query": "weather"}}'
SCRIPTED_TOOL_REPLY = f"<tool_call>{SCRIPTED_TOOL_CALL}</tool_call>"

# Every knob that changes the built files; stored in the marker so a changed spec rebuilds.
TINY_MODEL_SPEC: dict[str, int | str] = {
    "revision": 4,
    "kind": "scripted-bigram",
    "seed": 1234,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "bpe_vocab_size": 512,
    "dtype": "bfloat16",
    "successor_logit": 100,
    "text_reply": SCRIPTED_TEXT_REPLY,
    "tool_reply": SCRIPTED_TOOL_REPLY,
}

BOS, EOS, PAD = "<s>", "<|im_end|>", "<pad>"
IM_START = "<|im_start|>"
# Last token of every generation prompt: where the script starts.
REPLY_TEXT, REPLY_TOOLS = "<|reply|>", "<|reply_tools|>"
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"

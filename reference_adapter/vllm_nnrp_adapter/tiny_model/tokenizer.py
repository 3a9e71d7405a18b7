"""The tiny model's tokenizer and chat template: a byte-level BPE trained with ``tokenizers`` on
inline text (the script included, so its words are single tokens), saved as a
``PreTrainedTokenizerFast`` with bos/eos/pad and a ChatML-style jinja template that renders
tools, assistant tool calls and tool results and ends each generation prompt on the token
where the script starts; and the script as a successor table over its token ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .script import (
    BOS,
    EOS,
    IM_START,
    PAD,
    REPLY_TEXT,
    REPLY_TOOLS,
    SCRIPTED_TEXT_REPLY,
    SCRIPTED_TOOL_CALL,
    SCRIPTED_TOOL_REPLY,
    TINY_MODEL_SPEC,
    TOOL_CALL_END,
    TOOL_CALL_START,
)

__all__ = ["CHAT_TEMPLATE", "successors", "train_tokenizer"]

CHAT_TEMPLATE = (
    "{% set sys_msg = messages[0] if messages and messages[0].role == 'system' else none %}"
    "{% if tools %}"
    "<|im_start|>system\n"
    "{% if sys_msg %}{{ sys_msg.content }}\n{% endif %}"
    "You may call functions. Available tools:\n<tools>\n"
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    '</tools>\nTo call one reply with <tool_call>{"name": NAME, "arguments": ARGS}'
    "</tool_call>.<|im_end|>\n"
    "{% elif sys_msg %}"
    "<|im_start|>system\n{{ sys_msg.content }}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'system' and loop.first %}"
    "{% elif message.role == 'assistant' %}"
    "<|im_start|>assistant\n{% if message.content %}{{ message.content }}{% endif %}"
    "{% for tc in message.tool_calls or [] %}"
    '<tool_call>{"name": {{ tc.function.name | tojson }}, "arguments": '
    "{% if tc.function.arguments is string %}{{ tc.function.arguments }}"
    "{% else %}{{ tc.function.arguments | tojson }}{% endif %}}</tool_call>"
    "{% endfor %}"
    "<|im_end|>\n"
    "{% else %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if tools %}<|reply_tools|>{% else %}<|reply|>{% endif %}{% endif %}"
)

# Training text for the tokenizer: a mix of prose, JSON and chat markup so the vocabulary
# has merges for the shapes the tests send; the script's lines are repeated so each of its
# words and JSON pieces becomes one token.
_CORPUS = [
    "The quick brown fox jumps over the lazy dog. A tiny model writes random words.",
    "Hello! How are you today? I am fine, thank you. Please tell me a short story.",
    "Conformance tests check the serving contract: streaming chunks, usage, errors.",
    "system user assistant tool function arguments name content role message",
    '{"name": "lookup", "arguments": {"q": "weather in Paris"}}',
    '{"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}',
    '<tool_call>{"name": "lookup", "arguments": {"q": "x"}}</tool_call>',
    "0 1 2 3 4 5 6 7 8 9 10 11 12 42 100 256 512 1024 3.14 -1 true false null",
    "Once upon a time there was a server that answered every request on time.",
    "Numbers, letters, punctuation; quotes \"like this\" and 'that', brackets [ ] { } ( ).",
] + [f"{SCRIPTED_TEXT_REPLY} {SCRIPTED_TEXT_REPLY}", SCRIPTED_TOOL_CALL] * 8

def train_tokenizer(out: Path, max_position_embeddings: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=int(TINY_MODEL_SPEC["bpe_vocab_size"]),
        special_tokens=[PAD, BOS, EOS, IM_START, REPLY_TEXT, REPLY_TOOLS],
        # The full byte alphabet keeps every input encodable (no unknown token needed).
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    # Plain (non-special) added tokens: they survive detokenisation, as hermes expects.
    tok.add_tokens([TOOL_CALL_START, TOOL_CALL_END])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=[IM_START, REPLY_TEXT, REPLY_TOOLS],
        model_max_length=max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    # transformers 5 writes a config transformers 4 cannot load (class "TokenizersBackend",
    # a list "extra_special_tokens"); this portable one loads in both version lines.
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": BOS,
                "eos_token": EOS,
                "pad_token": PAD,
                "additional_special_tokens": [IM_START, REPLY_TEXT, REPLY_TOOLS],
                "model_max_length": max_position_embeddings,
                "clean_up_tokenization_spaces": False,
                "chat_template": CHAT_TEMPLATE,
            },
            indent=2,
        )
        + "\n"
    )
    (out / "chat_template.jinja").unlink(missing_ok=True)
    return PreTrainedTokenizerFast.from_pretrained(str(out))


def successors(tok: Any) -> dict[int, int]:
    """The script as a successor table over token ids; raises if a token would need two."""
    table: dict[int, int] = {}

    def link(a: int, b: int) -> None:
        if table.setdefault(a, b) != b:
            raise ValueError(
                f"scripted token {tok.convert_ids_to_tokens(a)!r} would need two successors "
                f"({tok.convert_ids_to_tokens(table[a])!r} and {tok.convert_ids_to_tokens(b)!r})"
            )

    def chain(start: int, ids: list[int]) -> None:
        for a, b in zip([start, *ids], ids, strict=False):
            link(a, b)

    def encode(text: str) -> list[int]:
        ids: list[int] = tok.encode(text, add_special_tokens=False)  # transformers' ids
        return ids

    text = encode(SCRIPTED_TEXT_REPLY)
    again = encode(" " + SCRIPTED_TEXT_REPLY)
    chain(tok.convert_tokens_to_ids(REPLY_TEXT), text)
    chain(text[-1], again)  # then " Hello! This ... reply." forever
    link(again[-1], again[0])
    tool = encode(SCRIPTED_TOOL_REPLY)
    if tool[0] != tok.convert_tokens_to_ids(TOOL_CALL_START) or tok.decode(tool) != (
        SCRIPTED_TOOL_REPLY
    ):
        raise ValueError(f"the tool reply does not round-trip: {tok.convert_ids_to_tokens(tool)}")
    chain(tok.convert_tokens_to_ids(REPLY_TOOLS), [*tool, tok.eos_token_id])
    return table

"""A tiny scripted Llama model with its own tokenizer, built locally (no model hub).

Real vLLM needs a real model folder to start; this one is small enough to build in seconds
and to run on two CPU cores. Its weights are constructed, not trained, so that it behaves
like a bigram table with a fixed script, which is what the conformance tests need: a
plain chat streams ordinary words until ``max_tokens`` (it never emits EOS), and a chat
that offers tools calls the first scripted tool (``<tool_call>{...}</tool_call>``, the form
vLLM's hermes tool parser reads) and then ends its turn.

How: a Llama config (hidden 128, 2 layers, 2 heads of head_dim 64, 1 KV head; the CPU
attention kernel rejects head_dim 16) whose attention ``o_proj`` and MLP ``down_proj`` are
zero, so the residual stream at every position is just the embedding of that token and the
logits depend on the last token only. Token embeddings are unit directions (times the RMS
norm's scale): one shared direction ``u`` plus an orthogonal direction per scripted token
(random directions in the remaining space for the others). ``lm_head`` row ``j`` is
``B``·(sum of the directions of the tokens whose successor is ``j``) + ``p_j``·``u``, so the
logit of ``j`` after token ``t`` is ``B·[next(t) = j] + p_j``: the scripted successor wins
by ``B - spread(p)`` logits (deterministic even when sampling at temperature 1). When a
grammar (a named ``tool_choice``) masks the successor, the default preferences ``p`` pick
among the allowed tokens: EOS, then closing quotes/brackets, then compact JSON structure,
with whitespace last, so forced tool calls finish with short valid JSON.

The chat template ends the generation prompt with a dedicated token, one for plain chats
and one when tools are offered, so the script's start never depends on the messages.
The tokenizer is a byte-level BPE trained with `tokenizers` on inline text (including the
script, so its words are single tokens), saved as a `PreTrainedTokenizerFast` with
bos/eos/pad and a ChatML-style jinja chat template that renders tools, assistant tool
calls and tool results. The build checks that every scripted token has exactly one
successor.

Needs `torch`, `transformers`, `tokenizers` and `safetensors` (all present in a vLLM
venv); imported lazily so the module itself imports without them.

CLI: ``python -m vllm_nnrp_adapter.tiny_model DEST [--max-position-embeddings N]``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "CHAT_TEMPLATE",
    "SCRIPTED_TEXT_REPLY",
    "SCRIPTED_TOOL_REPLY",
    "TINY_MODEL_SPEC",
    "build_tiny_model",
    "is_complete",
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
_MARKER = "nnrp-tiny-model.json"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

BOS, EOS, PAD = "<s>", "<|im_end|>", "<pad>"
IM_START = "<|im_start|>"
# Last token of every generation prompt: where the script starts.
REPLY_TEXT, REPLY_TOOLS = "<|reply|>", "<|reply_tools|>"
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"

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

# Scale of the bigram term and default preferences (logits); the margin is what matters.
_SUCCESSOR_LOGIT = float(TINY_MODEL_SPEC["successor_logit"])
_P_EOS = 20.0
_P_UNWANTED_SPECIAL = -20.0


def is_complete(dest: Path, *, max_position_embeddings: int = 512) -> bool:
    """True if ``dest`` holds a finished build of exactly this spec."""
    marker = dest / _MARKER
    if not marker.is_file() or not all((dest / f).is_file() for f in _REQUIRED_FILES):
        return False
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    # a marker of another spec, or a damaged one, compares unequal: not complete
    matches: bool = recorded == _marker_body(max_position_embeddings)
    return matches


def _marker_body(max_position_embeddings: int) -> dict[str, int | str]:
    return {**TINY_MODEL_SPEC, "max_position_embeddings": max_position_embeddings}


def _train_tokenizer(out: Path, max_position_embeddings: int) -> Any:
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


def _successors(tok: Any) -> dict[int, int]:
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


def _default_preference(text: str) -> float:
    """Logit offset of a non-special token when a grammar masks the scripted successor."""
    if not text.strip():
        return -10.0  # whitespace: a grammar that allows it must not get stuck in it
    if any(c.isspace() for c in text):
        return -5.0
    if text[0] == '"' and set(text) <= set('"}],'):
        return 15.0 - 0.5 * (len(text) - 1)  # close the string, the shortest first
    if set(text) <= set("}]"):
        return 12.0
    if text == '{"':
        return 11.0
    if text[0] in "{[":
        return 10.0 - 0.1 * len(text)
    if set(text) <= set('":,'):
        return 8.0
    if all(c.isalnum() or c == "_" for c in text):
        return 1.0 + 0.5 * min(len(text), 8)  # whole words first (property names)
    return 2.0


def _build_weights(out: Path, tok: Any, max_position_embeddings: int) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    spec = TINY_MODEL_SPEC
    vocab_size = len(tok)
    hidden = int(spec["hidden_size"])
    ids = {"bos": tok.bos_token_id, "eos": tok.eos_token_id, "pad": tok.pad_token_id}
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=int(spec["intermediate_size"]),
        num_hidden_layers=int(spec["num_hidden_layers"]),
        num_attention_heads=int(spec["num_attention_heads"]),
        num_key_value_heads=int(spec["num_key_value_heads"]),
        max_position_embeddings=max_position_embeddings,
        bos_token_id=ids["bos"],
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    successors = _successors(tok)
    scripted = sorted(successors)
    if len(scripted) + 17 > hidden:
        raise ValueError(f"{len(scripted)} scripted tokens do not fit in hidden size {hidden}")

    gen = torch.Generator().manual_seed(int(spec["seed"]))
    torch.manual_seed(int(spec["seed"]))
    model = LlamaForCausalLM(config)
    # Unit directions: 0 is the shared "default" direction u, 1..K one per scripted token,
    # the rest hold random directions for all other tokens (orthogonal to the script).
    direction = torch.zeros(vocab_size, hidden, dtype=torch.float64)
    free = hidden - 1 - len(scripted)
    direction[:, 1 + len(scripted) :] = torch.randn(
        vocab_size, free, generator=gen, dtype=torch.float64
    )
    direction[:, 1:] /= direction[:, 1:].norm(dim=1, keepdim=True)
    for k, t in enumerate(scripted):
        direction[t, 1:] = 0.0
        direction[t, 1 + k] = 1.0
    # Equal parts u and the token's own direction; RMS 1 so the final norm keeps the scale.
    half = math.sqrt(0.5)
    embed = math.sqrt(hidden) * half * direction
    embed[:, 0] = math.sqrt(hidden) * half

    # logit_j(t) = head[j] . embed[t] = B [next(t) = j] + p_j
    special = set(tok.all_special_ids)
    prefs = torch.tensor(
        [
            _P_EOS
            if j == ids["eos"]
            else _P_UNWANTED_SPECIAL
            if j in special or tok.convert_ids_to_tokens(j) in (TOOL_CALL_START, TOOL_CALL_END)
            else _default_preference(tok.decode([j]))
            for j in range(vocab_size)
        ],
        dtype=torch.float64,
    )
    unit = math.sqrt(hidden) * half
    head = torch.zeros(vocab_size, hidden, dtype=torch.float64)
    head[:, 0] = prefs / unit
    for k, t in enumerate(scripted):
        head[successors[t], 1 + k] += _SUCCESSOR_LOGIT / unit

    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(embed)
        model.lm_head.weight.copy_(head)
        for layer in model.model.layers:
            # No attention or MLP output: the last position's residual is its own embedding.
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    model = model.to(torch.bfloat16)
    _check_script(model, successors, scripted)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["pad"]
    )
    model.save_pretrained(str(out), safe_serialization=True)


def _check_script(model: Any, successors: dict[int, int], scripted: list[int]) -> None:
    """Run the built bfloat16 model once: every scripted token must lead to its successor."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([scripted])).logits[0].float()
    top2 = logits.topk(2, dim=-1)
    for row, t in enumerate(scripted):
        best, runner_up = top2.values[row].tolist()
        if top2.indices[row, 0].item() != successors[t] or best - runner_up < 50:
            raise ValueError(f"scripted token {t} does not lead to {successors[t]} clearly")


def build_tiny_model(dest: Path, *, max_position_embeddings: int = 512) -> Path:
    """Build the tiny model into ``dest`` (or reuse a complete build there); return ``dest``.

    Deterministic for a given spec: same seed, same corpus, same files. The build goes to a
    temporary sibling folder and is moved into place at the end, so an interrupted build
    never leaves a folder that looks complete.
    """
    dest = Path(dest)
    if max_position_embeddings < 64:
        raise ValueError(f"max_position_embeddings must be >= 64, got {max_position_embeddings}")
    if is_complete(dest, max_position_embeddings=max_position_embeddings):
        return dest
    if dest.exists() and any(dest.iterdir()) and not (dest / _MARKER).exists():
        raise FileExistsError(f"{dest} exists, is not empty and is not a tiny-model build")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        tok = _train_tokenizer(tmp, max_position_embeddings)
        _build_weights(tmp, tok, max_position_embeddings)
        (tmp / _MARKER).write_text(json.dumps(_marker_body(max_position_embeddings), indent=2))
        if dest.exists():
            shutil.rmtree(dest)
        tmp.chmod(0o755)
        for f in tmp.iterdir():
            f.chmod(0o644)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_nnrp_adapter.tiny_model",
        description="Build the tiny scripted Llama model folder for vLLM (no model hub).",
    )
    parser.add_argument("dest", type=Path, help="folder to create (reused if complete)")
    parser.add_argument("--max-position-embeddings", type=int, default=512)
    args = parser.parse_args(argv)
    try:
        path = build_tiny_model(args.dest, max_position_embeddings=args.max_position_embeddings)
    except ImportError as exc:
        print(f"tiny_model: missing dependency ({exc}); run inside a vLLM venv", file=sys.stderr)
        return 1
    except (ValueError, FileExistsError, OSError) as exc:
        print(f"tiny_model: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

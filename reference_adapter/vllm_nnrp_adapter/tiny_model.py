"""A tiny random-weight Llama model with its own tokenizer, built locally (no model hub).

Real vLLM needs a real model folder to start; this one is small enough to build in seconds
and to run on two CPU cores. The output is random text, which is all the conformance
tests need: they check the serving contract, not the prose.

What it is: a Llama config (hidden 128, 2 layers, 2 heads of head_dim 64, 1 KV head; the
CPU attention kernel rejects head_dim 16) with seeded random weights in bfloat16, and a
byte-level BPE tokenizer trained with `tokenizers` on inline text, saved as a
`PreTrainedTokenizerFast` with bos/eos/pad and a ChatML-style jinja chat template that
renders tools, assistant tool calls (`<tool_call>{...}</tool_call>`, the form vLLM's
hermes tool parser reads) and tool results.

Needs `torch`, `transformers`, `tokenizers` and `safetensors` (all present in a vLLM
venv); imported lazily so the module itself imports without them.

CLI: ``python -m vllm_nnrp_adapter.tiny_model DEST [--max-position-embeddings N]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "TINY_MODEL_SPEC", "build_tiny_model", "is_complete"]

# Every knob that changes the built files; stored in the marker so a changed spec rebuilds.
TINY_MODEL_SPEC: dict[str, int | str] = {
    "revision": 2,
    "seed": 1234,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "bpe_vocab_size": 512,
    "dtype": "bfloat16",
}
_MARKER = "nnrp-tiny-model.json"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

BOS, EOS, PAD = "<s>", "<|im_end|>", "<pad>"
IM_START = "<|im_start|>"
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
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Training text for the tokenizer: a mix of prose, JSON and chat markup so the vocabulary
# has merges for the shapes the tests send and the grammar-constrained tool output.
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
]


def is_complete(dest: Path, *, max_position_embeddings: int = 512) -> bool:
    """True if ``dest`` holds a finished build of exactly this spec."""
    marker = dest / _MARKER
    if not marker.is_file() or not all((dest / f).is_file() for f in _REQUIRED_FILES):
        return False
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return recorded == _marker_body(max_position_embeddings)


def _marker_body(max_position_embeddings: int) -> dict[str, int | str]:
    return {**TINY_MODEL_SPEC, "max_position_embeddings": max_position_embeddings}


def _train_tokenizer(out: Path, max_position_embeddings: int) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=int(TINY_MODEL_SPEC["bpe_vocab_size"]),
        special_tokens=[PAD, BOS, EOS, IM_START],
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
        additional_special_tokens=[IM_START],
        model_max_length=max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return len(fast)


def _build_weights(out: Path, vocab_size: int, max_position_embeddings: int, tok_ids: dict) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    spec = TINY_MODEL_SPEC
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=int(spec["hidden_size"]),
        intermediate_size=int(spec["intermediate_size"]),
        num_hidden_layers=int(spec["num_hidden_layers"]),
        num_attention_heads=int(spec["num_attention_heads"]),
        num_key_value_heads=int(spec["num_key_value_heads"]),
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tok_ids["bos"],
        eos_token_id=tok_ids["eos"],
        pad_token_id=tok_ids["pad"],
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(int(spec["seed"]))
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=tok_ids["bos"], eos_token_id=tok_ids["eos"], pad_token_id=tok_ids["pad"]
    )
    model.save_pretrained(str(out), safe_serialization=True)


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
        vocab_size = _train_tokenizer(tmp, max_position_embeddings)
        from transformers import PreTrainedTokenizerFast

        tok = PreTrainedTokenizerFast.from_pretrained(str(tmp))
        ids = {"bos": tok.bos_token_id, "eos": tok.eos_token_id, "pad": tok.pad_token_id}
        _build_weights(tmp, vocab_size, max_position_embeddings, ids)
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
        description="Build a tiny random-weight Llama model folder for vLLM (no model hub).",
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

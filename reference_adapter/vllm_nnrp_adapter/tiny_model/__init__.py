"""A tiny scripted Llama model with its own tokenizer, built locally (no model hub).
May import: no room (a vLLM venv runs it as ``python -m vllm_nnrp_adapter.tiny_model``).

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
venv); imported lazily so the package itself imports without them.

Rooms: ``script`` (the replies, the spec, the special tokens), ``tokenizer`` (tokenizer, chat
template, the script over token ids), ``weights`` (the constructed weights and their check);
this module builds the folder (atomically, reused when complete) and ``__main__`` is the CLI.

CLI: ``python -m vllm_nnrp_adapter.tiny_model DEST [--max-position-embeddings N]``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from .script import SCRIPTED_TEXT_REPLY, SCRIPTED_TOOL_REPLY, TINY_MODEL_SPEC
from .tokenizer import CHAT_TEMPLATE, train_tokenizer
from .weights import build_weights

__all__ = [
    "CHAT_TEMPLATE",
    "SCRIPTED_TEXT_REPLY",
    "SCRIPTED_TOOL_REPLY",
    "TINY_MODEL_SPEC",
    "build_tiny_model",
    "is_complete",
]

_MARKER = "nnrp-tiny-model.json"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


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
        tok = train_tokenizer(tmp, max_position_embeddings)
        build_weights(tmp, tok, max_position_embeddings)
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

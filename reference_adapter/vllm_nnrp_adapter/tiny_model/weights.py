"""The tiny model's weights, constructed rather than trained: token embeddings as unit
directions (a shared one plus one per scripted token), attention and MLP outputs zero so the
logits depend on the last token only, and ``lm_head`` rows that make each scripted token's
successor win by a wide margin, with default preferences (EOS, closing quotes and brackets,
compact JSON) for when a grammar masks it. The built bfloat16 model is run once to check the
script.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .script import TINY_MODEL_SPEC, TOOL_CALL_END, TOOL_CALL_START
from .tokenizer import successors as script_successors

__all__ = ["build_weights"]

# Scale of the bigram term and default preferences (logits); the margin is what matters.
_SUCCESSOR_LOGIT = float(TINY_MODEL_SPEC["successor_logit"])
_P_EOS = 20.0
_P_UNWANTED_SPECIAL = -20.0


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


def build_weights(out: Path, tok: Any, max_position_embeddings: int) -> None:
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
    successors = script_successors(tok)
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

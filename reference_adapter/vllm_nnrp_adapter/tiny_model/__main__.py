"""``python -m vllm_nnrp_adapter.tiny_model DEST [--max-position-embeddings N]``: build the tiny
model folder (or reuse a complete build there) and print its path."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import build_tiny_model

__all__ = ["main"]


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

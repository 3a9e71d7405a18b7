"""``nnrp-conformance init``: a starting manifest, derived from an endpoint's capability
document.

Owns the provider's first step: connect to ``--target`` and fetch the capability document
(discovery operation ``nnrp.capabilities.get``, which the profile recommends nowhere: an
endpoint without it gives its document as a file, ``--capabilities FILE``), derive an adapter capability manifest from
it and write it, together with ``<out>.review.md``, a checklist of every claim the operator
must confirm (JSON has no comments). It never overwrites an existing file unless
``--force``. The manifest is what the operator *claims*; the endpoint's self-description is
only a first draft of that claim, which is why every line needs a human "confirm".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from nnrp_conformance import contract
from nnrp_conformance.session import (
    DEFAULT_CONNECT_TIMEOUT,
    ConformanceCore,
    RunOptions,
    SetupError,
    TargetError,
    load_json_object,
)
from nnrp_conformance.validation import validate

NAME = "init"
HELP = "write a starting manifest (and a review checklist) from a running endpoint"

EXIT_OK, EXIT_USAGE, EXIT_TARGET = contract.EXIT_OK, contract.EXIT_USAGE, contract.EXIT_TARGET

__all__ = [
    "HELP",
    "NAME",
    "Claim",
    "InitError",
    "add_arguments",
    "add_parser",
    "derive_manifest",
    "main",
    "review_markdown",
    "review_path",
    "run",
]

#: the object a non-streaming answer's ``response.completed`` body is, per operation
_BODY_OBJECT = {
    contract.OP_CHAT_COMPLETIONS_CREATE: "a `chat.completion`",
    contract.OP_RESPONSES_CREATE: "a Responses `response` object",
    contract.OP_EMBEDDINGS_CREATE: "an embeddings `list`",
    contract.OP_MODELS_LIST: "a models `list`",
}
#: the level whose recipes an operation's flags select (its own; unknown operations: none)
_LEVEL_OF = {contract.OP_CHAT_COMPLETIONS_CREATE: 1, contract.OP_RESPONSES_CREATE: 2,
             contract.OP_EMBEDDINGS_CREATE: 3, contract.OP_MODELS_LIST: 3}


def _unclaimed(op: str, key: str, what: str) -> str:
    """What leaving flag ``key`` false does to ``op``'s recipes: its level's mandatory recipes
    that need it still run and fail ``capability.not-claimed``; where none needs it, nothing."""
    level = _LEVEL_OF.get(op)
    needs = {1: ("streaming", "non_streaming"), 2: ("streaming", "non_streaming"),
             3: ("non_streaming",)}.get(level or 0, ())
    if key not in needs:
        return f"{what}; no recipe of `{op}` needs it, so nothing changes"
    return f"{what}; the Level {level} mandatory recipes of `{op}` that need it still run " \
           "and fail with rule `capability.not-claimed`"


def _flag_text(op: str, key: str) -> tuple[str, str]:
    """(claimed, not claimed) wording of one operation flag for the review checklist."""
    if key == "streaming":
        return ("answers `stream: true` with its events (one `PARTIAL_RESULT` per event) and "
                "one terminal", _unclaimed(op, key, "does not stream"))
    if key == "non_streaming":
        body = _BODY_OBJECT.get(op, "the operation's OpenAI-compatible response")
        return (f"answers `stream: false` with one `response.completed` whose `body` is {body}",
                _unclaimed(op, key, "has no non-streaming answer"))
    if key == "tool_calls":
        return ("streams tool calls as `response.tool_call.started` / `.delta` / `.completed` "
                "(or `.error`) per `call_id`; the optional tool-call recipes will run",
                "does not stream tool calls; the optional tool-call recipes are skipped "
                "(not claimed)")
    return ("ends a cancelled operation with its own terminal (an NNRP drop or "
            "`response.cancelled`); the optional cancellation recipes will run (whether it also "
            "acts on upstream's in-band hint `nnrp.cancel_after_events` is not part of this "
            "claim: the suite's reading, judged non-strict)",
            "does not claim cancellation; the optional cancellation recipes are skipped")


_FLAGS = ("streaming", "non_streaming", "tool_calls", "cancellation")


class InitError(Exception):
    """A problem the user must fix; ``exit_code`` follows the CLI's convention."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Claim:
    """One line of the review checklist: where in the manifest, and what to confirm."""

    pointer: str
    text: str
    kind: str = "confirm"  # "confirm" or "fix"


def review_path(out: Path) -> Path:
    """``manifest.json`` -> ``manifest.json.review.md``."""
    return out.with_name(out.name + ".review.md")


def _flag(doc_op: Mapping[str, Any], key: str) -> tuple[bool, bool]:
    """(value, stated by the endpoint)"""
    value = doc_op.get(key)
    return (value, True) if isinstance(value, bool) else (False, False)


def derive_manifest(
    capabilities: Mapping[str, Any], *, adapter: str | None = None
) -> tuple[dict[str, Any], list[Claim]]:
    """Capability document -> (manifest, claims to review). Raises :class:`InitError`."""
    claims: list[Claim] = []
    for violation in validate("capability-document", dict(capabilities)):
        claims.append(Claim(f"capability document {violation.pointer or '/'}",
                            f"the endpoint's capability document breaks its schema: "
                            f"{violation.message}; the suite's capability-document case will "
                            "fail until the endpoint fixes it", "fix"))
    name = adapter or capabilities.get("adapter")
    if not isinstance(name, str) or not name:
        raise InitError("the capability document has no `adapter` name: pass --adapter NAME")
    manifest: dict[str, Any] = {
        "adapter": name,
        "profile": contract.PROFILE,
        "schema_version": contract.SCHEMA_VERSION,
    }
    claims.append(Claim("/adapter", f"`{name}` is the adapter name you want in the case "
                                    "results and reports"))
    if isinstance(capabilities.get("adapter_version"), str) and capabilities["adapter_version"]:
        manifest["adapter_version"] = capabilities["adapter_version"]

    levels = capabilities.get("compatibility_levels")
    if not isinstance(levels, list) or not levels or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in levels
    ):
        raise InitError("the capability document has no usable `compatibility_levels` "
                        f"(got {json.dumps(levels)})", EXIT_TARGET)
    manifest["compatibility_levels"] = sorted(set(levels))
    for level in manifest["compatibility_levels"]:
        implied = ", ".join(str(n) for n in range(1, level))
        extra = f" (it includes Level {implied})" if implied else ""
        claims.append(Claim("/compatibility_levels",
                            f"the endpoint implements Level {level}{extra}: every mandatory "
                            "recipe of a claimed level runs, whatever the operation flags say"))

    operations = capabilities.get("operations")
    if not isinstance(operations, list) or not operations:
        raise InitError("the capability document lists no `operations`", EXIT_TARGET)
    manifest["operations"] = []
    for i, op in enumerate(operations):
        if not isinstance(op, Mapping) or not isinstance(op.get("name"), str) or not op["name"]:
            raise InitError(f"the capability document's operations[{i}] has no `name`",
                            EXIT_TARGET)
        entry: dict[str, Any] = {"name": op["name"]}
        base = f"/operations/{i}"
        claims.append(Claim(f"{base}/name", f"the endpoint serves `{op['name']}`"))
        for key in _FLAGS:
            yes, no = _flag_text(op["name"], key)
            value, stated = _flag(op, key)
            entry[key] = value
            text = yes if value else no
            if not stated:
                text += " (the endpoint did not say; written as `false`)"
            claims.append(Claim(f"{base}/{key}", f"`{op['name']}` {text}"))
        manifest["operations"].append(entry)

    extensions = capabilities.get("extensions") or []
    if isinstance(extensions, list) and extensions:
        manifest["extensions"] = []
        for i, ext in enumerate(extensions):
            if not isinstance(ext, Mapping) or not isinstance(ext.get("name"), str):
                continue
            item = {"name": ext["name"], "critical": bool(ext.get("critical", False))}
            if isinstance(ext.get("description"), str):
                item["description"] = ext["description"]
            manifest["extensions"].append(item)
            if item["critical"]:
                text = (f"extension `{item['name']}` is critical: its recipes run only when "
                        f"selected explicitly (`--nnrp-extension {item['name']}`), and a client "
                        "that does not understand it must not use the endpoint")
            else:
                text = (f"extension `{item['name']}` is non-critical: clients and tests may "
                        "ignore it, and no Level 1 result depends on it")
            claims.append(Claim(f"/extensions/{i}", text))

    models = capabilities.get("models") or []
    ids = [m["id"] for m in models if isinstance(m, Mapping) and isinstance(m.get("id"), str)]
    if ids:
        manifest["models"] = [
            {k: m[k] for k in ("id", "owned_by") if isinstance(m.get(k), str)}
            for m in models
            if isinstance(m, Mapping) and isinstance(m.get("id"), str)
        ]
        claims.append(Claim("/models", f"the endpoint serves {', '.join(f'`{i}`' for i in ids)}; "
                                       f"`${{MODEL_ID}}` is filled with `{ids[0]}` unless you "
                                       "pass `--nnrp-model`"))
    else:
        claims.append(Claim("/models", "the capability document names no model: pass "
                                       "`--nnrp-model ID` when you run the suite", "fix"))

    problems = validate("manifest", manifest)
    if problems:
        detail = "; ".join(str(p) for p in problems)
        raise InitError(f"the manifest derived from the capability document is invalid: "
                        f"{detail}", EXIT_TARGET)
    return manifest, claims


def _next_command(target: str | None, out: Path, capabilities_file: Path | None) -> str:
    """The run to do next: the same target, and the same document file when one was given."""
    run = f"pytest --nnrp-target {target or 'HOST:PORT'} --manifest {out}"
    return run + (f" --nnrp-capabilities {capabilities_file}" if capabilities_file else "")


def review_markdown(out: Path, target: str | None, claims: list[Claim], *,
                    capabilities_file: Path | None = None) -> str:
    source = f"the file `{capabilities_file}`" if capabilities_file is not None \
        else f"the capability document of `{target}`"
    lines = [
        f"# Review of `{out.name}`",
        "",
        f"`nnrp-conformance init` derived `{out.name}` from {source}. The manifest is your claim, and the suite holds the endpoint to it: tick "
        "each line once you have checked it, and edit the manifest where the endpoint "
        "overstates or understates what it does.",
        "",
    ]
    fixes = [c for c in claims if c.kind == "fix"]
    if fixes:
        lines += ["## Fix first", ""]
        lines += [f"- [ ] fix ({c.pointer}): {c.text}" for c in fixes]
        lines.append("")
    lines += ["## Confirm", ""]
    lines += [f"- [ ] confirm ({c.pointer}): {c.text}" for c in claims if c.kind == "confirm"]
    lines += [
        "",
        "## Then run the suite",
        "",
        "```sh",
        _next_command(target, out, capabilities_file),
        "```",
        "",
    ]
    return "\n".join(lines)


def _from_file(path: Path) -> dict[str, Any]:
    """The capability document the provider gives as a file (errors name the file)."""
    try:
        return load_json_object(path)
    except SetupError as exc:
        raise InitError(f"--capabilities {exc}", EXIT_USAGE) from None


def _fetch(target: str, connect_timeout: float) -> dict[str, Any]:
    """The target's capability document, through the same core (and errors) as a run."""
    core = ConformanceCore(RunOptions(target=target, connect_timeout=connect_timeout,
                                      timeout=connect_timeout, idle_timeout=connect_timeout))
    try:
        return core.fetch_capabilities()
    except TargetError as exc:
        raise InitError(str(exc), EXIT_TARGET) from None
    except SetupError as exc:
        raise InitError(str(exc), EXIT_USAGE) from None
    finally:
        core.close()


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_outputs(out: Path, force: bool) -> Path:
    review = review_path(out)
    if not out.parent.is_dir():
        raise InitError(f"{out.parent}: no such directory (create it, or choose another --out)")
    if not force:
        existing = [p for p in (out, review) if p.exists()]
        if existing:
            raise InitError(f"{existing[0]} already exists; refusing to overwrite it "
                            "(pass --force to replace it)")
    return review


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", "--nnrp-target", dest="target", metavar="TARGET",
                        help="NNRP endpoint: HOST:PORT or a scheme URL (its capability "
                             "document is fetched with nnrp.capabilities.get)")
    parser.add_argument("--capabilities", "--nnrp-capabilities", dest="capabilities",
                        type=Path, metavar="FILE",
                        help="the capability document as a JSON file, for an endpoint "
                             "without the discovery operation (nothing is fetched)")
    parser.add_argument("--out", type=Path, default=Path("manifest.json"), metavar="PATH",
                        help="manifest to write (default manifest.json; the checklist goes to "
                             "PATH.review.md)")
    parser.add_argument("--adapter", metavar="NAME",
                        help="adapter name, when the capability document has none")
    parser.add_argument("--force", action="store_true",
                        help="overwrite an existing manifest and checklist")
    parser.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT,
                        metavar="SECONDS",
                        help=f"connect and discovery timeout (default {DEFAULT_CONNECT_TIMEOUT:g})")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``init`` on an ``add_subparsers()`` object (the CLI also finds it by itself)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(NAME, help=HELP, description=HELP)
    add_arguments(parser)
    parser.set_defaults(_command=sys.modules[__name__])
    return parser


def _print_checklist(console: Console, out: Path, review: Path, claims: list[Claim]) -> None:
    console.print(f"[bold]wrote[/] {escape(str(out))} and {escape(str(review))}")
    console.print("[bold]review each claim before you rely on the manifest:[/]")
    for claim in claims:
        style = "red" if claim.kind == "fix" else "yellow"
        console.print(f"  [{style}]☐ {claim.kind}[/] [dim]{escape(claim.pointer)}[/] "
                      f"{escape(claim.text)}", highlight=False)


def _error(message: str) -> None:
    # Plain print: an error line must not be re-wrapped (paths are copied from it).
    print(f"nnrp-conformance init: error: {message}", file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    console = Console(highlight=False, soft_wrap=True)
    out: Path = args.out
    try:
        if args.connect_timeout <= 0:
            raise InitError(f"--connect-timeout must be positive, got {args.connect_timeout}")
        if args.capabilities is None and not args.target:
            raise InitError("give --target HOST:PORT (the endpoint's discovery operation) or "
                            "--capabilities FILE (its capability document as a file)")
        review = _check_outputs(out, args.force)
        capabilities = _from_file(args.capabilities) if args.capabilities is not None \
            else _fetch(args.target, args.connect_timeout)
        manifest, claims = derive_manifest(capabilities, adapter=args.adapter)
        _write_atomic(out, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        _write_atomic(review, review_markdown(out, args.target, claims,
                                              capabilities_file=args.capabilities))
    except InitError as exc:
        _error(str(exc))
        return exc.exit_code
    except OSError as exc:
        _error(f"{exc.filename or out}: {exc.strerror or exc}")
        return EXIT_USAGE
    _print_checklist(console, out, review, claims)
    console.print(f"next: {_next_command(args.target, out, args.capabilities)}", markup=False)
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """The brief's name for :func:`main`."""
    return main(args)

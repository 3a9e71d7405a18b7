"""mkdocs hook: the reference pages, generated from the suite's JSON Schemas at build time.

Owns turning each schema under ``nnrp_conformance/schemas/`` into Markdown (a properties
table per object: name, type, required, constraints, description; enums; nested objects;
``$defs``; cross-schema links) and the recommended error-code table from
``nnrp_conformance.contract.ERROR_CODES``. The pages are generated into ``docs/reference/``
and checked in, so every link resolves in the repository as it is
(``python docs/hooks/schema_reference.py`` writes them); the build fails when one is missing
or stale, so the schemas stay the one source of truth. A schema file that no page covers, or
an error code without an explanation here, fails the build too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files

from nnrp_conformance import contract

SCHEMA_SUFFIX = ".schema.json"


@dataclass(frozen=True)
class Page:
    path: str
    title: str
    schemas: tuple[str, ...]
    intro: str


PAGES: tuple[Page, ...] = (
    Page(
        "reference/manifest.md",
        "Adapter capability manifest",
        ("manifest",),
        "The file a provider writes and passes with `--manifest`: what the endpoint claims. "
        "Case selection reads it (see [Selection](../selection.md)); "
        "`nnrp-conformance init` writes a first draft from a running endpoint.",
    ),
    Page(
        "reference/capability-document.md",
        "Capability document",
        ("capability-document",),
        "What a running endpoint reports about itself, as the body of the `response.completed` "
        f"terminal of the discovery operation `{contract.OP_CAPABILITIES_GET}` "
        "(see [Wire mapping](../wire-mapping.md#capability-discovery)).",
    ),
    Page(
        "reference/envelope.md",
        "Request envelope",
        ("envelope",),
        "The one JSON object that a `FRAME_SUBMIT` carries as its single typed payload frame.",
    ),
    Page(
        "reference/recipe.md",
        "Recipe",
        ("recipe",),
        "One conformance case: the request to send and what must come back. "
        "How to write one: [Writing recipes](../recipes.md).",
    ),
    Page(
        "reference/events.md",
        "Events",
        ("event", *contract.EVENT_SCHEMA_NAMES.values()),
        "Every profile event is one JSON object with a `type`. Non-terminal events travel one "
        "per `PARTIAL_RESULT`; the terminal ones (`"
        + "`, `".join(contract.TERMINAL_EVENT_TYPES)
        + "`) end the operation (see [Wire mapping](../wire-mapping.md)).",
    ),
    Page(
        "reference/rulebook.md",
        "Rulebook",
        ("rulebook", "coverage-reasons"),
        "The file `nnrp_conformance/rulebook.json`: every rule id the suite reports, tagged "
        "`profile`, `upstream` or `recommendation` with its citation. The table itself and what the tags "
        "mean for a verdict: [Verdicts](../verdicts.md#rules). Beside it, "
        "`nnrp_conformance/coverage/reasons.json`: why a normative statement no rule quotes is "
        "not tested ([Statement coverage](../coverage.md)).",
    ),
    Page(
        "reference/error-codes.md",
        "Error codes",
        ("error-body",),
        "The profile's error body `{type, code, message}` and this suite's recommended "
        "codes, each with the family it recommends. No profile document fixes a code "
        "(its §10 shows `unsupported_model` as an example); upstream's recipes expect three "
        "(`missing_messages`, `unsupported_operation`, `backend_error`: another code there is "
        "non-strict, rule `error.code`), and the whole list is a recommendation (rule "
        "`error.code-choice`, non-strict). Each code has one recommended "
        "`error.type` family.",
    ),
    Page(
        "reference/case-results.md",
        "Case results",
        ("case-results",),
        "The upstream-compatible JSON the suite writes with `--nnrp-results`: one entry per "
        "planned case. The suite's extra evidence per case lives inside `diagnostics`.",
    ),
    Page(
        "reference/execution-plan.md",
        "Execution plan",
        ("execution-plan",),
        "Which recipes run, with parameters already substituted, written beside the case "
        "results before the first case runs.",
    ),
    Page(
        "reference/benchmark-results.md",
        "Benchmark results",
        ("benchmark-results",),
        "One benchmark run's numbers (see [Benchmarks](../benchmarks.md)).",
    ),
    Page(
        "reference/release-gate-report.md",
        "Release gate report",
        ("release-gate-report",),
        "The release gate's verdict over its five conditions.",
    ),
    Page(
        "reference/baseline.md",
        "Baseline",
        ("baseline",),
        "Accepted failures (`--nnrp-baseline FILE`, YAML or JSON): one waiver per recipe and "
        "rule, with a reason and an expiry date ([Accepted failures](../pytest-plugin.md"
        "#accepted-failures-the-baseline)).",
    ),
    Page(
        "reference/release-policy.md",
        "Release policy",
        ("release-policy",),
        "What one provider's release must show the gate (`nnrp-conformance gate --policy`, by "
        "default `DIR/release-policy.json`): the serving target and its version lines, the "
        "benchmarks and the README extras. The reference adapter's is "
        "`manifests/vllm-nnrp-adapter.release-policy.json`.",
    ),
)

#: what each closed error code means; the build fails when this and the contract disagree
ERROR_CODE_MEANINGS: dict[str, str] = {
    "missing_messages": "A chat body without `messages` (upstream recipe `chat-invalid-body`).",
    "unsupported_operation": "The envelope names an operation the endpoint does not advertise "
    "(upstream recipe `chat-unsupported-operation`).",
    "backend_error": "The backend rejected or failed the request, including a model id it does "
    "not serve (upstream recipe `chat-backend-error` sends the model `backend-error`). The "
    "backend's own error type and status belong in diagnostics.",
    "unsupported_model": "The profile layer itself refuses a model before the backend sees it "
    "(upstream's example error). The reference adapter leaves this to the backend and reports "
    "`backend_error`.",
    "invalid_request": "Any other invalid envelope or body: wrong types, empty `messages`, "
    "an operator-only field the operator has not enabled, a malformed `nnrp` hint.",
    "invalid_schema_version": "The envelope's `schema_version` is not "
    f"`{contract.SCHEMA_VERSION}`.",
    "request_too_large": "The submitted envelope is larger than the endpoint's cap "
    f"(the reference adapter's default is {contract.DEFAULT_MAX_ENVELOPE_BYTES} bytes).",
    "context_length_exceeded": "Prompt plus requested output exceed the model's context.",
    "overloaded": "The endpoint refuses work it cannot schedule now, e.g. over the "
    "per-connection in-flight limit.",
    "timeout": "The operation's deadline (`nnrp.timeout_ms`) expired before it finished.",
    "internal_error": "An endpoint fault that is not the backend's (a bug); the message says "
    "what failed.",
    "tool_call_parse_error": "Carried by `response.tool_call.error`: the backend streamed a "
    "tool call the endpoint cannot turn into a valid call (e.g. arguments without a name).",
    "invalid_api_key": "The endpoint requires an API key and the session has not authenticated "
    f"with a valid one (`{contract.OP_SESSION_AUTHENTICATE}`, the key in `nnrp.api_key`): "
    "OpenAI's own code and family for a missing or wrong key. The message never repeats the "
    "key.",
}


# --- loading -------------------------------------------------------------------------------
def load_schemas() -> dict[str, dict[str, Any]]:
    """Every schema file of the installed suite, by name (file name minus the suffix)."""
    folder = resources.files("nnrp_conformance") / "schemas"
    out: dict[str, dict[str, Any]] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(SCHEMA_SUFFIX):
            out[entry.name[: -len(SCHEMA_SUFFIX)]] = json.loads(entry.read_text("utf-8"))
    return out


def _slug(*parts: str) -> str:
    return "-".join(re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in parts if p)


def _code(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    # A pipe inside a code span does not split a table cell (Python-Markdown tables).
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


# --- rendering -----------------------------------------------------------------------------
class Renderer:
    """Renders schemas into pages; knows which page and anchor each schema and $def has."""

    def __init__(self, schemas: dict[str, dict[str, Any]], pages: tuple[Page, ...]) -> None:
        self.schemas = schemas
        self.page_of: dict[str, str] = {}
        for page in pages:
            for name in page.schemas:
                if name not in schemas:
                    raise PluginError(f"schema_reference: page {page.path} names the schema "
                                      f"{name!r}, which does not exist")
                self.page_of[name] = page.path
        missing = sorted(set(schemas) - set(self.page_of))
        if missing:
            raise PluginError("schema_reference: no reference page covers the schema(s) "
                              + ", ".join(missing))

    # anchors and links
    @staticmethod
    def schema_anchor(name: str) -> str:
        return _slug("schema", name)

    @staticmethod
    def def_anchor(name: str, definition: str) -> str:
        return _slug(name, "def", definition)

    def link(self, current: str, ref: str) -> str:
        file_part, _, fragment = ref.partition("#")
        name = file_part[: -len(SCHEMA_SUFFIX)] if file_part else current
        if name not in self.schemas:
            raise PluginError(f"schema_reference: {current}: unresolvable $ref {ref!r}")
        if fragment.startswith("/$defs/"):
            definition = fragment[len("/$defs/"):]
            if definition not in self.schemas[name].get("$defs", {}):
                raise PluginError(f"schema_reference: {current}: $ref {ref!r} names no $def")
            anchor, label = self.def_anchor(name, definition), definition
            if name != current:
                label = f"{name}: {definition}"
        elif fragment in ("", "/"):
            anchor, label = self.schema_anchor(name), self.schemas[name].get("title", name)
        else:
            raise PluginError(f"schema_reference: {current}: unsupported $ref {ref!r}")
        here, there = self.page_of[current], self.page_of[name]
        target = f"#{anchor}" if here == there else f"{there.rsplit('/', 1)[-1]}#{anchor}"
        return f"[{label}]({target})"

    # one node -> (type cell, constraints)
    def type_of(self, current: str, node: Any, nested: str | None = None) -> str:
        if node is True or node == {}:
            return "any"
        if node is False:
            return "nothing (forbidden)"
        if "$ref" in node:
            return self.link(current, node["$ref"])
        if "const" in node:
            return f"const {_code(node['const'])}"
        kind = node.get("type")
        if kind is None and "enum" in node:
            kinds = sorted({type(v).__name__ for v in node["enum"]})
            kind = {"str": "string", "int": "integer", "bool": "boolean"}.get(kinds[0], "any") \
                if len(kinds) == 1 else "any"
        text = " or ".join(kind) if isinstance(kind, list) else kind or "any"
        if kind == "array" and isinstance(node.get("items"), dict):
            text = f"array of {self.type_of(current, node['items'], nested)}"
        elif kind == "object" and nested and "properties" in node:
            text = f"object ([fields](#{nested}))"
        return text

    def constraints(self, current: str, node: Any, *, top: bool = True) -> list[str]:
        if not isinstance(node, dict):
            return []
        out: list[str] = []
        if "enum" in node:
            out.append("one of " + ", ".join(_code(v) for v in node["enum"]))
        for key, label in (("minLength", "length ≥ {}"), ("maxLength", "length ≤ {}"),
                           ("minimum", "≥ {}"), ("maximum", "≤ {}"),
                           ("exclusiveMinimum", "> {}"), ("exclusiveMaximum", "< {}"),
                           ("minItems", "≥ {} items"), ("maxItems", "≤ {} items"),
                           ("minProperties", "≥ {} keys"), ("maxProperties", "≤ {} keys")):
            if key in node:
                out.append(label.format(node[key]))
        if node.get("uniqueItems"):
            out.append("unique items")
        if "pattern" in node:
            out.append(f"pattern {_code(node['pattern'])}")
        if "format" in node:
            out.append(f"format {_code(node['format'])}")
        if "default" in node:
            out.append(f"default {_code(node['default'])}")
        names = node.get("propertyNames")
        if isinstance(names, dict):
            parts = self.constraints(current, names, top=False)
            out.append("key names: " + ", ".join(parts))
        extra = node.get("additionalProperties")
        if node.get("type") == "object" or "properties" in node:
            if extra is False:
                out.append("no other keys")
            elif isinstance(extra, dict) and extra:
                detail = ", ".join([self.type_of(current, extra),
                                    *self.constraints(current, extra, top=False)])
                out.append(f"other keys: {detail}")
            elif extra is True or (extra is None and "properties" in node and top):
                out.append("other keys allowed")
        items = node.get("items")
        if isinstance(items, dict) and "$ref" not in items and "properties" not in items:
            inner = self.constraints(current, items, top=False)
            if inner:
                out.append("each item: " + ", ".join(inner))
        if any(k in node for k in ("allOf", "anyOf", "oneOf", "not", "contains", "if")):
            out.append("see the rules below")
        return out

    # sections
    def object_section(self, current: str, node: dict[str, Any], path: str, anchor: str,
                       level: int, out: list[str]) -> None:
        """A properties table for ``node``, then a section per inline nested object."""
        required = set(node.get("required", ()))
        nested: list[tuple[str, dict[str, Any], str]] = []
        props: dict[str, Any] = node.get("properties", {})
        if props:
            out += ["| field | type | required | constraints | description |",
                    "| --- | --- | --- | --- | --- |"]
            for key, sub in props.items():
                sub_path = f"{path}.{key}" if path else key
                target = sub if isinstance(sub, dict) else {}
                child = None
                if "properties" in target:
                    child = target
                elif isinstance(target.get("items"), dict) and "properties" in target["items"]:
                    child, sub_path = target["items"], sub_path + "[]"
                child_anchor = _slug(anchor, sub_path) if child is not None else None
                if child is not None:
                    nested.append((sub_path, child, child_anchor))
                cells = [
                    _code(key),
                    self.type_of(current, sub, child_anchor),
                    "yes" if key in required else "no",
                    "; ".join(self.constraints(current, sub)) or "—",
                    _cell(target.get("description", "")) or "—",
                ]
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        else:
            cons = self.constraints(current, node)
            out += [f"Type: {self.type_of(current, node)}" +
                    (f"; {'; '.join(cons)}." if cons else "."), ""]
        self.rules(current, node, out)
        for sub_path, child, child_anchor in nested:
            out += [f"{'#' * level} `{sub_path}` {{#{child_anchor}}}", ""]
            if child.get("description"):
                out += [child["description"], ""]
            self.object_section(current, child, sub_path, child_anchor, min(level + 1, 6), out)

    def rules(self, current: str, node: dict[str, Any], out: list[str]) -> None:
        """Conditional and combinator keywords, in words where the pattern is a known one."""
        lines: list[str] = []
        leftovers: dict[str, Any] = {}
        for key in ("anyOf", "oneOf", "not", "contains", "if"):
            if key in node:
                leftovers[key] = {k: node[k] for k in ("if", "then", "else") if k in node} \
                    if key == "if" else node[key]
        if "contains" in node:
            sentence = self._contains_sentence(node)
            if sentence:
                lines.append(sentence)
                leftovers.pop("contains")
        for rule in node.get("allOf", ()):
            sentence = self._rule_sentence(current, rule)
            if sentence:
                lines.append(sentence)
            else:
                leftovers.setdefault("allOf", []).append(rule)
        if "not" in node:
            sentence = self._not_sentence(node["not"])
            if sentence:
                lines.append(sentence)
                leftovers.pop("not")
        if not lines and not leftovers:
            return
        out += ["Rules:", ""]
        out += [f"- {line}" for line in lines]
        if leftovers:
            out += ["- further JSON Schema rules, verbatim:", "",
                    "    ```json",
                    *("    " + ln for ln in json.dumps(leftovers, indent=2).splitlines()),
                    "    ```"]
        out.append("")

    def _rule_sentence(self, current: str, rule: dict[str, Any]) -> str | None:
        if "contains" in rule and set(rule) <= {"contains", "minContains", "maxContains"}:
            return self._contains_sentence(rule)
        cond, then = rule.get("if"), rule.get("then")
        if not isinstance(cond, dict) or not isinstance(then, dict) or set(rule) - {"if", "then"}:
            return None
        props = cond.get("properties", {})
        if len(props) != 1:
            return None
        (key, test), = props.items()
        if set(test) != {"const"}:
            return None
        when = f"when {_code(key)} is {_code(test['const'])}"
        if set(then) == {"$ref"}:
            return f"{when}: the object must match {self.link(current, then['$ref'])}"
        then_props = then.get("properties", {})
        if set(then) == {"properties"} and all(set(v) == {"const"} for v in then_props.values()):
            musts = ", ".join(f"{_code(k)} must be {_code(v['const'])}"
                              for k, v in then_props.items())
            return f"{when}: {musts}"
        return None

    @staticmethod
    def _contains_sentence(rule: dict[str, Any]) -> str | None:
        test = rule["contains"]
        props = test.get("properties", {}) if isinstance(test, dict) else {}
        if len(props) != 1 or set(next(iter(props.values()))) != {"const"}:
            return None
        (key, value), = ((k, v["const"]) for k, v in props.items())
        low, high = rule.get("minContains", 1), rule.get("maxContains")
        if high == low:
            count = f"exactly {low}"
        elif high is None:
            count = f"at least {low}"
        else:
            count = f"between {low} and {high}"
        return f"{count} item(s) with {_code(key)} = {_code(value)}"

    @staticmethod
    def _not_sentence(test: Any) -> str | None:
        if isinstance(test, dict) and set(test) == {"required"}:
            return "not all of " + ", ".join(_code(k) for k in test["required"]) + " together"
        return None

    def schema_section(self, name: str, level: int = 2) -> list[str]:
        schema = self.schemas[name]
        anchor = self.schema_anchor(name)
        out = [f"{'#' * level} {schema.get('title', name)} {{#{anchor}}}", "",
               f"Schema file `{name}{SCHEMA_SUFFIX}`, `$id` {_code(schema.get('$id', ''))}.", ""]
        if schema.get("description"):
            out += [schema["description"], ""]
        self.object_section(name, schema, "", anchor, min(level + 1, 6), out)
        for definition, node in schema.get("$defs", {}).items():
            d_anchor = self.def_anchor(name, definition)
            out += [f"{'#' * min(level + 1, 6)} Definition `{definition}` {{#{d_anchor}}}", ""]
            if isinstance(node, dict) and node.get("description"):
                out += [node["description"], ""]
            self.object_section(name, node, definition, d_anchor, min(level + 2, 6), out)
        return out

    def page(self, page: Page) -> str:
        out = [f"# {page.title}", "", page.intro, "",
               "!!! note \"Generated\"", "    This page is generated from the schema files "
               "shipped in `nnrp_conformance/schemas/` when the documentation is built; the "
               "schemas are the source of truth.", ""]
        if page.path == "reference/error-codes.md":
            out += error_code_table()
        for name in page.schemas:
            out += self.schema_section(name)
        return "\n".join(out).rstrip() + "\n"


def error_code_table() -> list[str]:
    codes, meanings = set(contract.ERROR_CODES), set(ERROR_CODE_MEANINGS)
    if codes != meanings:
        raise PluginError(
            "schema_reference: contract.ERROR_CODES and ERROR_CODE_MEANINGS disagree: "
            f"undocumented {sorted(codes - meanings)}, stale {sorted(meanings - codes)}")
    out = ["## Recommended code list {#closed-code-list}", "",
           "From `nnrp_conformance.contract.ERROR_CODES`. No profile document fixes a code. "
           "Upstream's recipes expect `missing_messages`, `unsupported_operation` and "
           "`backend_error` (in any family) where a case maps to them: another code there is "
           "`non-strict` (`error.code`), failed only with `--strict`, upstream's runner "
           "failing it. The rest is this suite's recommendation: another code of the family the case "
           "expects, or a code in another family than this table's, is `non-strict` "
           "(`error.code-choice`, [Rules](rules.md)), a failure only with `--strict`.", "",
           "| code | `error.type` | when |", "| --- | --- | --- |"]
    for code, family in contract.ERROR_CODES.items():
        out.append(f"| {_code(code)} | {_code(family)} | {_cell(ERROR_CODE_MEANINGS[code])} |")
    out += ["", "Families: " + ", ".join(_code(t) for t in contract.ERROR_TYPES) + ".", ""]
    return out


def render_pages() -> dict[str, str]:
    """Every generated page, by its path under ``docs/`` (also used by the unit tests)."""
    renderer = Renderer(load_schemas(), PAGES)
    return {page.path: renderer.page(page) for page in PAGES}


def stale_pages(docs: Path) -> list[str]:
    """The generated pages whose checked-in copy under ``docs`` is missing or out of date."""
    return [path for path, content in render_pages().items()
            if not (docs / path).is_file() or (docs / path).read_text(encoding="utf-8") != content]


def on_files(files: Files, config: Any) -> Files:
    # The pages are checked in (links resolve in the repository as it is); the build only
    # refuses stale ones, so the schemas stay the one source of truth.
    stale = stale_pages(Path(config["docs_dir"]))
    if stale:
        raise PluginError(f"schema_reference: {', '.join('docs/' + p for p in stale)} "
                          "missing or stale: regenerate with python docs/hooks/schema_reference.py")
    return files


def main() -> int:
    """Write every generated page into docs/ (run from anywhere)."""
    docs = Path(__file__).resolve().parents[1]
    for path, content in render_pages().items():
        (docs / path).write_text(content, encoding="utf-8")
        print(f"wrote docs/{path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The docs' facts computed from the tree (issue 43 item 6: "the words made true, each by a
test where one can hold it"): counts (recipes per set and level, the cancel storm), the README's
extras, how each relation rule is judged, what the schemas call our addition or our reading.
The paths and names the docs mention are in ``test_doc_paths.py``."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _section(text: str, heading: str) -> str:
    """The Markdown from ``heading`` to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading)
    nxt = re.search(rf"^#{{1,{level}}} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + (nxt.start() if nxt else len(text))]


def _table_rows(markdown: str) -> list[dict[str, str]]:
    """Each row of every pipe table in ``markdown``, as header -> cell (code spans kept)."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if header is None:
            header = cells
        elif not set("".join(cells)) <= set("- :"):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def test_the_relations_tables_say_how_each_rule_is_judged() -> None:
    """Issue 43 item 6: the Relations tables said contradicting values "must fail" where most
    rules are recommendations; each row now says strict or non-strict, as the rulebook tags it."""
    from nnrp_conformance import rules

    text = (DOCS / "verdicts.md").read_text(encoding="utf-8")
    rows = _table_rows(_section(text, "## Relations between fields"))
    assert len(rows) >= 20
    want = {"profile": "strict (profile)", "recommendation": "non-strict (recommendation)"}
    for row in rows:
        rule = row["rule id"].strip("`")
        assert row["judged"] == want[rules.rulebook()[rule].tag], rule
        # a row that credits the profile names a rule sourced on it
        if row["comes from"].startswith("the profile"):
            assert rules.rulebook()[rule].tag == "profile", rule
    assert "must fail" not in _section(text, "## Relations between fields")


def _profile_example(section: str) -> dict:
    """The first JSON example of one numbered section of the profile design (the copy in
    ``upstream/``, which ``test_rule_sources`` keeps byte for byte upstream's)."""
    design = REPO / "upstream" / "nnrp-doc" / "docs" / "en" / "design" / "openai-compatible-profile.md"
    text = _section(design.read_text(encoding="utf-8"), f"## {section}")
    return json.loads(re.search(r"```json\n(.*?)```", text, re.S).group(1))


def test_no_member_of_the_profiles_capability_example_is_called_our_addition() -> None:
    """Issue 43 item 6: the schema (and its generated page) called `models` our addition,
    though §13's example document has it."""
    schema = json.loads((REPO / "suite" / "nnrp_conformance" / "schemas"
                         / "capability-document.schema.json").read_text(encoding="utf-8"))
    example = _profile_example("13. Capability Document")
    pairs = [(schema["properties"], example),
             (schema["$defs"]["operation"]["properties"], example["operations"][0]),
             (schema["$defs"]["model"]["properties"], example["models"][0])]
    for properties, shown in pairs:
        ours = {k for k, v in properties.items()
                if v.get("description", "").lower().startswith("our addition")}
        assert not ours & set(shown), sorted(ours & set(shown))


def test_the_in_band_cancel_hint_is_labelled_our_reading() -> None:
    """Issue 43 item 6: no profile document defines `nnrp.cancel_after_events`; what an endpoint
    does with it is this project's reading, and the schema's text (the reference page) says so."""
    schema = json.loads((REPO / "suite" / "nnrp_conformance" / "schemas"
                         / "envelope.schema.json").read_text(encoding="utf-8"))
    said = schema["$defs"]["nnrp"]["properties"]["cancel_after_events"]["description"]
    assert "no profile document defines it" in said and "Our reading" in said, said


def _prose(page: str) -> str:
    """A page's text with its line breaks and runs of spaces made one space."""
    return re.sub(r"\s+", " ", (DOCS / page).read_text(encoding="utf-8"))


_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 8: "eight"}


def test_recipe_counts_in_the_docs_are_the_trees() -> None:
    """Issue 43 item 6: recipes.md said two sets (four ship) and verdicts.md counted 31 Level 1
    recipes (33). The counts are computed here from the bundled recipes, so a recipe added or
    removed fails this test until the words follow."""
    from nnrp_conformance.recipes import load_recipes

    recipes = load_recipes([REPO / "recipes"])
    sets = Counter(r.path.parent.name for r in recipes)
    level = Counter(r.level for r in recipes)
    assert set(sets) == {p.name for p in (REPO / "recipes").iterdir() if p.is_dir()}
    page = _prose("recipes.md")
    assert f"ships {_NUMBER_WORDS[len(sets)]} sets, {len(recipes)} recipes" in page
    assert f"the {_NUMBER_WORDS[sets['upstream']]} upstream recipes" in page
    assert f"this project's {sets['level1']} Level 1 recipes" in page
    assert (f"With upstream's {_NUMBER_WORDS[sets['upstream']]}, Level 1 has {level[1]}"
            in page)
    assert f"the {sets['level2']} Level 2 recipes" in page
    assert f"the {sets['level3']} Level 3 recipes" in page
    # the upstream-names run of verdicts.md: a Level 1 manifest, every Level 1 case non-strict
    one, rest = level[1], len(recipes) - level[1]
    page = _prose("verdicts.md")
    assert f"`{one} passed, 0 failed, {rest} skipped ({one} non-strict)`" in page
    assert f"{one} of {one} cases pass as `non-strict` (the {one} Level 1 recipes" in page
    assert f"all {one} fail with `--strict`" in page
    assert f"(the {one} Level 1 recipes; 31 when" in page


def test_the_cancel_storm_is_described_as_the_test_command_runs_it() -> None:
    """Issue 43 item 6: the storm was "30 s on each line", "60 s" and "both lines" in three
    places; it runs the test's default seconds on the one version the test command runs."""
    real = REPO / "tests" / "real_vllm"
    seconds = re.search(r'"NNRP_STORM_SECONDS", "(\d+)"',
                        (real / "test_aborts_real.py").read_text(encoding="utf-8")).group(1)
    assert re.search(r"^VERSIONS = \(NEWEST_TESTED,\)$",
                     (real / "conftest.py").read_text(encoding="utf-8"), re.M)
    assert (f"The cancel storm runs {seconds} s (`NNRP_STORM_SECONDS`), on the one version the "
            "test command runs real vLLM on") in _prose("testing.md")
    assert f"the test command's storm runs {seconds} s" in _prose("operator-guide.md")
    assert f"cancel storm runs in the test command again: {seconds} s, on the one vLLM version" \
        in _prose("changelog.md")
    for page in ("testing.md", "operator-guide.md", "changelog.md"):
        for sentence in re.split(r"(?<=\.) ", _prose(page)):
            if "storm" in sentence:
                assert not re.search(r"each line|both lines|every line", sentence), sentence


def _token(name: str, text: str) -> bool:
    """``name`` appears in ``text`` as a whole package name (not inside pytest-xdist, say)."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.I) is not None


def test_the_readme_extras_table_is_the_pyprojects() -> None:
    """Issue 43 item 6: the README put hypothesis in the dev extra, though it is a dependency
    of the suite itself. Each row names what pyproject.toml gives that extra (a stub package as
    "X stubs"), and no extra's row names a dependency every install has."""
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"*(none)*": project["dependencies"],
              **{f"`{k}`": v for k, v in project["optional-dependencies"].items()}}
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = _table_rows(_section(readme, "## Optional dependencies"))
    assert [r["extra"] for r in rows] == list(groups)
    base = {Requirement(d).name for d in project["dependencies"]}
    for row in rows:
        brings = row["brings"]
        for name in (Requirement(d).name for d in groups[row["extra"]]):
            stub = name.removeprefix("types-")
            if stub != name:
                assert _token(stub, brings) and "stubs" in brings, (row["extra"], name)
            else:
                assert _token(name, brings), (row["extra"], name)
        if row["extra"] != "*(none)*":
            plain = re.sub(r"\([^)]*stubs\)", "", brings)  # "mypy (with the X stubs)"
            assert not [n for n in base if _token(n, plain)], (row["extra"], brings)


def test_the_huge_event_variant_is_named_with_the_rule_that_judges_it() -> None:
    """Issue 43 item 6: verdicts.md said the 4 MiB event is judged `event.schema`; the kill-rate
    test (which runs it) expects `event.value-limit`, a recommendation (the profile sets no
    size)."""
    from nnrp_conformance import rules

    kill_rate = (REPO / "tests" / "reliability" / "test_kill_rate.py").read_text(encoding="utf-8")
    rule = re.search(r'"huge-event": \([^()]*\([^()]*\), \("([\w.-]+)",\)\)', kill_rate).group(1)
    assert rules.rulebook()[rule].tag == "recommendation"
    assert f"`huge-event` variant sends 4 MiB and is judged `{rule}`, non-strict" \
        in _prose("verdicts.md")


#: what the docs or the suite's messages credited to the profile though no normative text says
#: it (issue 43 item 6): the extension rules are the vLLM adapter design's (§10.3, not
#: normative), no normative text names `unsupported_operation`, and the profile gives
#: diagnostics no place (its §11: unknown diagnostic fields must be ignored)
MISCREDITED = ("The profile's extension rules", "prescribes `unsupported_operation`",
               "the profile's place for diagnostics")


def test_nothing_is_credited_to_the_profile_that_it_does_not_say() -> None:
    texts = {p: re.sub(r"\s+", " ", p.read_text(encoding="utf-8"))
             for p in [REPO / "README.md", *sorted(DOCS.glob("*.md")),
                       *sorted((REPO / "suite" / "nnrp_conformance").rglob("*.py"))]}
    assert [(p.name, m) for p, text in texts.items() for m in MISCREDITED if m in text] == []
    assert "extension rules of the vLLM adapter design (vLLM adapter design §10.3" \
        in _prose("selection.md")

"""The text of generated requests: what a prompt, a message, a tool's description or an
embeddings input holds (docs/generation.md).

Owns the text strategies the request strategies (``strategies.py``) draw from: short texts of
ASCII words, of words beyond ASCII (2-, 3- and 4-byte UTF-8), of words that Unicode
normalisation changes, and of any character; long texts (``LONG_TEXT_CHARS``); and single
words (a stop sequence, a tool's name part). No text holds a lone surrogate (it cannot be sent
as UTF-8) or a ``$`` (a recipe reads ``${NAME}`` as a parameter).
"""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["LONG_TEXT", "LONG_TEXT_CHARS", "SHORT_TEXT", "TEXT", "WORD"]

LONG_TEXT_CHARS = (2_000, 12_000)

# text: every plane of Unicode but no surrogate (Cs), no unassigned code point (Cn) and no
# "$" (a recipe reads "${NAME}" as a parameter)
_CHARS = st.characters(exclude_categories=("Cs", "Cn"), exclude_characters="$")
WORD = st.text(st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")),
               min_size=1, max_size=8)
#: words beyond ASCII: 2- and 3-byte UTF-8 (accents, CJK), and 4-byte (emoji, the planes
#: above the BMP: one character, two UTF-16 code units)
_NON_ASCII_WORD = st.text(st.characters(min_codepoint=0x80, max_codepoint=0xFFFF,
                                        exclude_categories=("Cs", "Cn", "Cc", "Z")),
                          min_size=1, max_size=6)
_ASTRAL_WORD = st.text(st.characters(min_codepoint=0x10000, exclude_categories=("Cs", "Cn")),
                       min_size=1, max_size=3)


#: words that Unicode normalisation changes: a decomposed accent (NFC composes it), its
#: composed form (NFD decomposes it), a ligature and compatibility letters (NFKC folds them),
#: decomposed Hangul, stacked combining marks in a canonical order NFC reorders, the Angstrom
#: and Kelvin signs (NFC maps them to letters). An endpoint that normalises on one path and
#: not the other answers the same request two ways (the twin compares them).
_NORMALISATION_WORD = st.sampled_from((
    "cafe\u0301", "caf\u00e9", "\ufb01le", "\uff21\uff22\uff23", "\u1100\u1161\u11a8",
    "q\u0307\u0323", "\u212b", "\u212a", "x\u00b2", "\u2460"))


def _short_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(WORD, min_size=1, max_size=8).map(" ".join),
        st.lists(st.one_of(WORD, _NON_ASCII_WORD, _ASTRAL_WORD, _NORMALISATION_WORD),
                 min_size=1, max_size=8).map(" ".join),
        st.text(_CHARS, min_size=1, max_size=40).filter(lambda s: s.strip() != ""),
    )


def _long_text() -> st.SearchStrategy[str]:
    return st.builds(lambda word, n: " ".join([word] * n), WORD,
                     st.integers(LONG_TEXT_CHARS[0] // 6, LONG_TEXT_CHARS[1] // 6))


# Strategies are built once: hypothesis validates every new strategy object, which costs
# far more than drawing from one.
SHORT_TEXT = _short_text()
LONG_TEXT = _long_text()
TEXT = st.one_of(SHORT_TEXT, SHORT_TEXT, SHORT_TEXT, LONG_TEXT)

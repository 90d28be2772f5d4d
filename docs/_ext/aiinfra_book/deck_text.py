"""Text for speaker notes: maths a lecturer can read aloud, citations, sentences.

Speaker notes are shown in reveal.js's speaker view, where no MathJax runs: a formula
is written in Unicode (:func:`tex_to_text`: ``2\\frac{p-1}{p}n\\beta`` becomes
``2(p−1)/p·nβ``-style text), a citation as author-year text from the book's
bibliography (:class:`Bibliography`), and each paragraph's first sentence
(:func:`first_sentence`) is the cue a lecturer glances at.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterable

from .languages import label

GREEK = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ε",
    "varepsilon": "ε",
    "zeta": "ζ",
    "eta": "η",
    "theta": "θ",
    "iota": "ι",
    "kappa": "κ",
    "lambda": "λ",
    "mu": "μ",
    "nu": "ν",
    "xi": "ξ",
    "pi": "π",
    "rho": "ρ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "φ",
    "varphi": "φ",
    "chi": "χ",
    "psi": "ψ",
    "omega": "ω",
    "Gamma": "Γ",
    "Delta": "Δ",
    "Theta": "Θ",
    "Lambda": "Λ",
    "Xi": "Ξ",
    "Pi": "Π",
    "Sigma": "Σ",
    "Phi": "Φ",
    "Psi": "Ψ",
    "Omega": "Ω",
}
SYMBOLS = {
    "times": "×",
    "cdot": "·",
    "approx": "≈",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "neq": "≠",
    "infty": "∞",
    "sum": "Σ",
    "prod": "Π",
    "odot": "⊙",
    "circ": "∘",
    "top": "ᵀ",
    "ast": "*",
    "in": "∈",
    "to": "→",
    "rightarrow": "→",
    "leftarrow": "←",
    "lceil": "⌈",
    "rceil": "⌉",
    "lfloor": "⌊",
    "rfloor": "⌋",
    "bmod": " mod ",
    "pmod": " mod ",
    "mid": "|",
    "ldots": "…",
    "cdots": "⋯",
    "dots": "…",
    "pm": "±",
    "propto": "∝",
    "nabla": "∇",
    "partial": "∂",
    "ell": "ℓ",
    "log": "log",
    "lg": "lg",
    "ln": "ln",
    "exp": "exp",
    "max": "max",
    "min": "min",
    "sin": "sin",
    "cos": "cos",
    "softmax": "softmax",
    "quad": "  ",
    "qquad": "   ",
    "left": "",
    "right": "",
    "big": "",
    "Big": "",
    "bigl": "",
    "bigr": "",
    "displaystyle": "",
    "textstyle": "",
    "{": "{",
    "}": "}",
    "%": "%",
    "lbrace": "{",
    "rbrace": "}",
    "colon": ":",
    "|": "‖",
    "prime": "′",
}
SPACES = {",": " ", ";": " ", ":": " ", "!": "", " ": " "}
SUPERSCRIPT = str.maketrans("0123456789+-=()nij", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱʲ")
SUBSCRIPT = str.maketrans(
    "0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"
)


_TAKES_ARGUMENT = ("text", "mathrm", "mathit", "mathbf", "operatorname", "mbox")


def _group(tex: str, i: int) -> tuple[str, int]:
    """The argument starting at ``tex[i]``: a ``{...}`` group, a command or a char."""
    while i < len(tex) and tex[i] == " ":
        i += 1
    if i >= len(tex):
        return "", i
    if tex[i] == "{":
        depth, j = 0, i
        while j < len(tex):
            depth += {"{": 1, "}": -1}.get(tex[j], 0)
            if depth == 0:
                return tex[i + 1 : j], j + 1
            j += 1
        return tex[i + 1 :], len(tex)
    if tex[i] == "\\":
        m = re.match(r"\\([A-Za-z]+|.)", tex[i:])
        return m.group(0), i + m.end()
    return tex[i], i + 1


def _script(text: str, table: dict[int, int], mark: str) -> str:
    """Text as Unicode super/subscript when every character has one, else ``^(...)``."""
    if text and all(ord(c) in table for c in text):
        return text.translate(table)
    return f"{mark}{text}" if len(text) == 1 else f"{mark}({text})"


def _atom(text: str) -> str:
    """Parenthesise a fraction's part unless it is one symbol or number."""
    return text if re.fullmatch(r"[\w.′ᵀ]+", text) else f"({text})"


def tex_to_text(tex: str) -> str:
    """TeX maths as plain Unicode a speaker can read; no backslash command survives.

    Args:
        tex: the body of a ``:math:`` role or ``math`` directive.

    Returns:
        e.g. ``"T = 2(p−1)α + 2(p−1)/p nβ"`` for the ring's cost formula.
    """
    out, i = [], 0
    while i < len(tex):
        c = tex[i]
        if c == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", tex[i:])
            name, i = m.group(1), i + m.end()
            if name in ("frac", "dfrac", "tfrac"):
                num, i = _group(tex, i)
                den, i = _group(tex, i)
                out.append(f"{_atom(tex_to_text(num))}/{_atom(tex_to_text(den))}")
                if re.match(r"\s*[\\A-Za-z]", tex[i:]):
                    out.append(" ")
            elif name == "sqrt":
                arg, i = _group(tex, i)
                out.append(f"√{_atom(tex_to_text(arg))}")
            elif name in _TAKES_ARGUMENT:
                arg, i = _group(tex, i)
                out.append(tex_to_text(arg) if name != "text" else arg)
            elif name in ("begin", "end"):
                _, i = _group(tex, i)  # environment name: matrices read row by row
                out.append(" ")
            elif name in GREEK:
                out.append(GREEK[name])
            elif name in SYMBOLS:
                out.append(SYMBOLS[name])
            elif name in SPACES:
                out.append(SPACES[name])
            elif name == "\\":
                out.append("; ")
            else:
                out.append(name)  # an unknown command: its name, without backslash
        elif c in "^_":
            arg, i = _group(tex, i + 1)
            if arg.startswith("\\") and arg[1:] in _TAKES_ARGUMENT:
                inner, i = _group(tex, i)
                arg = f"{arg}{{{inner}}}"
            text = tex_to_text(arg)
            if c == "^":
                out.append(_script(text, SUPERSCRIPT, "^"))
            else:
                out.append(_script(text, SUBSCRIPT, "_"))
        elif c in "{}":
            i += 1
        elif c == "&":
            out.append(" ")
            i += 1
        elif c == "-":
            out.append("−")
            i += 1
        else:
            out.append(c)
            i += 1
    return re.sub(r"[ \t]{2,}", " ", "".join(out)).strip()


_ABBREV = ("e.g.", "i.e.", "et al.", "vs.", "cf.", "Fig.", "Eq.", "approx.")


def first_sentence(text: str) -> str:
    """The first sentence of a paragraph (English or Chinese)."""
    text = " ".join(text.split())
    m = re.search(r"[。！？]", text)
    zh_end = m.end() if m else None
    for m in re.finditer(r"[.!?:](?=\s+[A-Z(\"“`])", text):
        if any(text[: m.end()].endswith(a) for a in _ABBREV):
            continue
        if zh_end is None or m.end() < zh_end:
            return text[: m.end()]
        break
    return text[:zh_end] if zh_end else text


def cue(text: str, words: int = 16, chars: int = 40) -> str:
    """A paragraph's cue: its first sentence, cut at a clause if it is long.

    At most ``words`` English words (``chars`` Chinese characters); the cut falls on
    the last comma, colon or dash before the limit, else at the limit, with "…".
    """
    sentence = first_sentence(text)
    han = len(re.findall(r"[\u4e00-\u9fff]", sentence))
    if han:
        if len(sentence) <= chars:
            return sentence
        head = sentence[:chars]
        cut = max(head.rfind(c) for c in "，：；—")
        return (head[:cut] if cut > chars // 3 else head) + "…"
    tokens = sentence.split()
    if len(tokens) <= words:
        return sentence
    head = " ".join(tokens[:words])
    cut = max(head.rfind(c) for c in ",:;—")
    return (head[:cut] if cut > len(head) // 3 else head).rstrip(" ,:;—") + " …"


class Bibliography:
    """The book's ``.bib`` files, formatted as author-year citations and entries."""

    def __init__(self, files: Iterable[pathlib.Path]) -> None:
        from pybtex.database import parse_file

        self.entries = {}
        for f in files:
            self.entries.update(parse_file(str(f), "bibtex").entries)

    @staticmethod
    def _plain(text: str) -> str:
        text = re.sub(r"\\L\b\s*", "Ł", text)
        text = re.sub(r"\\[A-Za-z]+\s*|[{}]", "", text)
        return text.replace("--", "–").strip()

    def _surnames(self, key: str) -> list[str]:
        people = self.entries[key].persons.get("author", [])
        return [self._plain(" ".join(p.prelast_names + p.last_names)) for p in people]

    def cite(self, key: str, lang: str = "en") -> str:
        """``"Patarasuk and Yuan, 2009"``; ``"Thakur et al., 2005"`` (the words
        "and" and "et al." in the edition's language: :func:`.languages.label`)."""
        if key not in self.entries:
            raise KeyError(f"citation {key!r} is not in the book's bibliography")
        names = self._surnames(key)
        year = self.entries[key].fields.get("year", "n.d.")
        if len(names) >= 3:
            who = label("et_al", lang, first=names[0])
        elif len(names) == 2:
            who = label("two_authors", lang, first=names[0], second=names[1])
        else:
            who = names[0] if names else key
        return f"{who}, {year}"

    def entry(self, key: str) -> str:
        """One reference-list line: authors, year, title, venue."""
        e = self.entries[key]
        names = self._surnames(key)
        authors = ", ".join(names[:3]) + (" et al." if len(names) > 3 else "")
        venue = next(
            (
                e.fields[f]
                for f in ("journal", "booktitle", "publisher", "howpublished", "url")
                if f in e.fields
            ),
            "",
        )
        parts = [f"{authors} ({e.fields.get('year', 'n.d.')})", e.fields.get("title")]
        parts.append(venue)
        return ". ".join(self._plain(p) for p in parts if p) + "."

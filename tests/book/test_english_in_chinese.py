"""A Chinese reader of the built chapters meets no English outside code, logs and names.

Every paragraph, table cell, heading and glossary term of the built Chinese chapter
pages, and every word label of their figures, is read as a reader reads it: code
(``code``, ``pre``, ``kbd``), formulas, citations and links to the API reference
removed, and the columns of a table that print a program's log verbatim
(:data:`LOG_COLUMNS`) skipped. A figure label set in monospace is code (the model's
module names on the tensor-parallel plan). In what is left, the names the Chinese
edition writes as they are leave the text: the English terms the glossary keeps
(AllReduce, rank, token, kernel, prompt) and its abbreviations, identifiers and
acronyms (``ring_all_reduce``, ``fp16``, ``H100``, ``InfiniBand``, ``NCCL``), and the
explicit list :data:`NAMES`. A text is then *English* when it has a word of three or
more Latin letters and no Chinese character, or four such words in a row (an English
sentence inside a Chinese paragraph).

By this rule the site built before issue 31's items 4 and 7-10 had 40 such elements
(32 table cells, 7 figure labels, a heading; stamps not counted); it has none now.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from babel.messages.pofile import read_po
from bs4 import BeautifulSoup

from .conftest import CHAPTERS, DOCS
from .test_glossary import GLOSSARY, read_glossary

# What the Chinese edition writes as it is, beyond the glossary and identifiers.
NAMES = frozenset(
    # products, companies and hardware
    "NVIDIA Google Microsoft Meta Huawei Instinct Infinity Fabric NVSwitch torus Ascend"
    " scale-up scale-out socket"
    # libraries, tools and the packages a figure lists
    " Kubernetes PCIe"
    " PyTorch torch torchrun agent Megatron DeepSpeed Triton vLLM SGLang TensorRT"
    " transformers nanoGPT SciPy NumPy numpy matplotlib mpmath setuptools pip"
    " networkx sympy aiinfra gloo cuda rocm-smi ROCm"
    # HCCL's algorithms as its documentation names them
    " Mesh"
    # the book's three hangs, as aiinfra bench hangs names them
    " mismatch stall die"
    # commands named as typed: aiinfra serve, transformers serve
    " serve"
    # models, methods and schedules named by their papers
    " Llama Mistral Qwen DeepSeek Gemma Chinchilla Gopher PaLM GPipe Orca Sarathi"
    " DistServe Splitwise Medusa EAGLE Switch Transformer Adam AdamW LayerNorm"
    " RMSNorm SwiGLU GELU Ulysses Rabenseifner zig-zag top-k top-p min-p"
    # people named outside a citation
    " Kaplan Hoffmann Besiroglu Korthikanti Leviathan Dubey Young Daly"
    # Kubernetes: resources, their fields and the controllers aiinfra k8s renders
    " Pod Service Job JobSet PodGroup job jobset pytorchjob volcano kueue requests"
    " limits kind schema true team-a Eviction"
    # the cloud chapter's monitors and Kueue's objects: a namespace's name, a kind
    " namespace default Topology dcgm-exporter gpu-tas gpu-cluster-queue"
    # Linux namespaces (namespaces(7)), Prometheus types, severities and fields
    " inode cgroup ipc mnt net pid time user uts gauge counter histogram critical"
    " warning for"
    # values a program prints: benchmark keys, STREAM kernels, autocast's ops,
    # NCCL's protocols
    " ring hierarchical rabenseifner read copy triad linear matmul softmax sum exp"
    " relu Simple dtype"
    # symbols spelled as the code and the papers spell them, and units
    " alpha beta gamma Psi Tbh eps inf amax max min logit logits nat bootstrap"
    # nccl-tests' columns
    " algbw busbw"
    # kept as Chinese engineers write them: ZeRO's stage, a batch
    " stage batch".split()
)
# Columns that print a log or an exception verbatim (their English headers).
LOG_COLUMNS = (
    "HCCL reports",
    "torchrun's agent",
    "what torch raised",
    "log line (prefix host:pid:tid [GPU] removed)",
    "torch's flight recorder: last collective",
)
# Not counted yet: the stamps under tables. Most are translated templates now
# (issue 31, item 1); four are still English sentences (the engine's and the KV
# cache's runs, the MoE benchmark): remove this once they are templates too.
SKIPPED_CLASSES = ("aiinfra-table-stamp",)

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
# A Latin word, a hyphenated compound one word (all-reduce, zig-zag, top-k).
TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
# Code and names whatever their letters: an XML element, a command-line flag, an
# identifier with a digit, an underscore, a dot, a slash or an inner capital
# (ring_all_reduce, fp16, H100, torch.compile, InfiniBand, GB/s), a column key
# (#wrong), an acronym.
CODE = re.compile(
    r"<[^<>]*>|(?<![\w-])--?[A-Za-z][\w-]*|#\w+"
    r"|\S*(?:\w_\w|[A-Za-z]\d|\d[A-Za-z]|[a-z][A-Z]|[A-Za-z]\.[A-Za-z]|/)\S*"
    r"|\b[A-Z]{2,}s?\b"
)
# What may stand between two words of one English sentence.
GAP = re.compile(r"[ ,;:()'\"]+")
REMOVED = ("code", "pre", "kbd", "script", "style", "img", "svg")
HEADINGS = ("h1", "h2", "h3", "h4")


@dataclass(frozen=True)
class English:
    """One element of a built Chinese page that a reader meets in English."""

    where: str  # the page (or figure) it is on
    kind: str  # paragraph, cell, heading, term, label
    text: str

    def __str__(self) -> str:
        return f"{self.where}: {self.kind}: {self.text[:100]!r}"


def kept_terms(glossary: Path = GLOSSARY) -> set[str]:
    """The English the Chinese edition writes: the glossary's kept terms with their
    other names, and every entry's abbreviations (GQA, TTFT)."""
    words = set()
    for entry in read_glossary(glossary):
        names = (entry.rendering,) if entry.kept else ()
        names += tuple(n for n in entry.names if entry.kept or n.isupper())
        for name in names:
            words.update(TOKEN.findall(name))
    return words


def names_removed(text: str, names: set[str]) -> str:
    """``text`` without code, identifiers, acronyms and ``names`` (any case; a
    hyphenated word goes if one of its parts is a name)."""
    lower = {n.lower() for n in names}

    def name(word: str) -> bool:
        parts = {word, word.rstrip("s"), *word.split("-")}
        return any(p.lower() in lower for p in parts if p)

    text = CODE.sub(" ", text)
    return TOKEN.sub(lambda m: " " if name(m.group()) else m.group(), text)


def is_english(text: str, names: set[str]) -> bool:
    """Whether a reader meets ``text`` as English (module docstring)."""
    rest = names_removed(text, names)
    run, end = 0, 0
    for m in TOKEN.finditer(rest):
        if len(m.group()) < 3:
            run = 0
            continue
        run = run + 1 if run and GAP.fullmatch(rest[end : m.start()]) else 1
        end = m.end()
        if run >= 4:
            return True  # an English sentence, whatever surrounds it
    return bool(end) and not HAN.search(text)


def translations() -> dict[str, str]:
    """Every message of the Chinese catalogues and its translation."""
    out = {}
    for po in (DOCS / "locale" / "zh_CN" / "LC_MESSAGES").glob("*.po"):
        with po.open("rb") as f:
            out |= {m.id: m.string for m in read_po(f) if m.id and m.string}
    return out


def _text(node) -> str:
    return " ".join(node.get_text(" ").split())


def page_texts(html: str, logs: set[str]) -> Iterator[tuple[str, str]]:
    """(kind, text) of every paragraph, table cell, heading and term of a page's
    article, without code, formulas, citations, links to the API and the cells of
    the columns headed by one of ``logs``."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.find("article") or soup
    removed = [*REMOVED, ".math", ".bibtex-citation", ".headerlink", "a[href*='api/']"]
    for node in article.select(", ".join(removed + [f".{c}" for c in SKIPPED_CLASSES])):
        node.decompose()
    for table in article.find_all("table"):
        heads = [_text(th) for th in table.select("thead th")]
        for row in table.select("tbody tr"):
            for i, cell in enumerate(row.find_all(["td", "th"])):
                if i < len(heads) and heads[i] in logs:
                    cell.decompose()
    for node in article.find_all(["p", "td", "th", "dt", *HEADINGS]):
        if node.name in ("td", "th") and node.find("p"):
            continue  # its paragraphs are counted, as cells
        text = _text(node)
        if not text:
            continue
        if node.name == "p":
            kind = "cell" if node.find_parent(["td", "th"]) else "paragraph"
        else:
            kind = "cell" if node.name in ("td", "th") else node.name
            kind = "heading" if node.name in HEADINGS else kind.replace("dt", "term")
        yield kind, text


def figure_labels(svg: str) -> Iterator[tuple[str, bool]]:
    """(text, in monospace) of each text a figure draws (matplotlib writes the text
    as an SVG comment, then its glyphs, named after their font)."""
    parts = re.split(r"<!-- (.*?) -->", svg)
    for text, glyphs in zip(parts[1::2], parts[2::2], strict=True):
        yield text, "Mono" in glyphs


def chinese_pages(site: Path) -> list[Path]:
    """The built Chinese pages of the chapters."""
    root = site / "zh_CN"
    return sorted(p for c in CHAPTERS for p in (root / c).glob("*.html"))


def count_english(site: Path, names: set[str]) -> list[English]:
    """Every English paragraph, cell, heading, term and figure word label of the
    built Chinese chapters."""
    from aiinfra_book.compute import is_words

    zh = translations()
    logs = {zh.get(c, c) for c in LOG_COLUMNS} | set(LOG_COLUMNS)
    found, figures = [], set()
    for page in chinese_pages(site):
        html = page.read_text(encoding="utf-8")
        where = str(page.relative_to(site))
        figures |= set(re.findall(r'src="\.\./_images/([0-9a-f]+\.svg)"', html))
        found += [
            English(where, kind, text)
            for kind, text in page_texts(html, logs)
            if is_english(text, names)
        ]
    for name in sorted(figures):
        svg = (site / "zh_CN" / "_images" / name).read_text(encoding="utf-8")
        found += [
            English(f"figure {name}", "label", text)
            for text, code in dict.fromkeys(figure_labels(svg))
            if not code and is_words(text) and is_english(text, names)
        ]
    return found


def test_the_rule_tells_english_from_chinese():
    names = NAMES | kept_terms()
    english = [
        "tensor parallel",
        "Measured on 2 gloo ranks",
        "注意：the loader delivered more than it needed",
        "4 all-gather, 4 reduce-scatter",
        "none",
        "decode GEMV",
    ]
    chinese = [
        "每个 rank 做一次 AllReduce",
        "Llama 3 8B 在 H100 上的 token/s",
        "NVLink (200 GB/s)",
        "ring_all_reduce 的 bucket",
        "PyTorch、DeepSpeed 与 Megatron-LM",
        "attn_norm",
        "H100 SXM",
        "top-k，k = 50",
        "随后是训练命令：-m aiinfra.cli bench --backend nccl。",
        "<gpu dev sm rank gdr>",
    ]
    assert [t for t in english if not is_english(t, names)] == []
    assert [t for t in chinese if is_english(t, names)] == []


def test_a_figure_label_in_monospace_is_code():
    svg = (
        "<!-- embed -->\n<g><use xlink:href='#DejaVuSansMono-65'/></g>\n"
        "<!-- none -->\n<g><use xlink:href='#DejaVuSans-6e'/></g>"
    )
    assert list(figure_labels(svg)) == [("embed", True), ("none", False)]


def test_a_chinese_reader_meets_no_english_outside_code_logs_and_names(site):
    found = count_english(site, NAMES | kept_terms())
    assert len(chinese_pages(site)) > 30
    assert not found, f"{len(found)} English elements:\n" + "\n".join(
        map(str, found[:60])
    )

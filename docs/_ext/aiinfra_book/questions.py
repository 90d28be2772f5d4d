"""Check-your-understanding questions, in the book and in the decks.

::

    .. aiinfra-question::

       How many bytes does each rank send in a ring all-reduce?

       .. aiinfra-answer::

          :calc:`...` bytes: ...

In the book a question is numbered and its answer is folded (``<details>``); in a
deck each question gets a slide whose answer appears on the next key press (a
reveal.js fragment) and is also in the speaker notes (:mod:`.slide_layout`).
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from .languages import label


class aiinfra_question(nodes.General, nodes.Element):  # noqa: N801 - docutils style
    """A question: its paragraphs, then one :class:`aiinfra_answer`."""


class aiinfra_answer(nodes.General, nodes.Element):  # noqa: N801
    """The answer to the enclosing question."""


class QuestionDirective(SphinxDirective):
    """``.. aiinfra-question::``: the question's text and an ``aiinfra-answer``."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        counts = self.env.temp_data.setdefault("aiinfra_questions", 0) + 1
        self.env.temp_data["aiinfra_questions"] = counts
        node = aiinfra_question("", number=counts, classes=["aiinfra-question"])
        self.set_source_info(node)
        self.state.nested_parse(self.content, self.content_offset, node)
        answers = [c for c in node.children if isinstance(c, aiinfra_answer)]
        if len(answers) != 1 or not isinstance(node.children[-1], aiinfra_answer):
            return [
                self.state_machine.reporter.error(
                    "aiinfra-question needs exactly one aiinfra-answer, as its last "
                    f"block (found {len(answers)})",
                    line=self.lineno,
                )
            ]
        if len(node.children) < 2:
            return [
                self.state_machine.reporter.error(
                    "aiinfra-question has no question text before its answer",
                    line=self.lineno,
                )
            ]
        return [node]


class AnswerDirective(SphinxDirective):
    """``.. aiinfra-answer::`` inside a question."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        if not self.content:
            return [
                self.state_machine.reporter.error(
                    "aiinfra-answer is empty", line=self.lineno
                )
            ]
        node = aiinfra_answer("", classes=["aiinfra-answer"])
        self.set_source_info(node)
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


def _lang(self: nodes.NodeVisitor) -> str:
    return self.builder.config.language or "en"


def visit_question(self: nodes.NodeVisitor, node: aiinfra_question) -> None:
    text = label("question", _lang(self), n=node["number"])
    self.body.append(
        f'<div class="aiinfra-question"><p class="question-label">{text}</p>\n'
    )


def depart_question(self: nodes.NodeVisitor, node: aiinfra_question) -> None:
    self.body.append("</div>\n")


def visit_answer(self: nodes.NodeVisitor, node: aiinfra_answer) -> None:
    text = label("answer", _lang(self))
    if self.builder.name == "revealjs":  # shown on the next key press
        self.body.append(
            f'<div class="aiinfra-answer fragment"><p class="answer-label">{text}</p>\n'
        )
    else:
        self.body.append(f'<details class="aiinfra-answer"><summary>{text}</summary>\n')


def depart_answer(self: nodes.NodeVisitor, node: aiinfra_answer) -> None:
    self.body.append("</div>\n" if self.builder.name == "revealjs" else "</details>\n")


def _skip(self: nodes.NodeVisitor, node: nodes.Node) -> None:
    raise nodes.SkipNode


def setup(app: Sphinx) -> None:
    visitors = {"html": (visit_question, depart_question)}
    answers = {"html": (visit_answer, depart_answer)}
    for fmt in ("latex", "text", "man", "texinfo"):
        visitors[fmt] = answers[fmt] = (_skip, None)
    app.add_node(aiinfra_question, **visitors)
    app.add_node(aiinfra_answer, **answers)
    app.add_directive("aiinfra-question", QuestionDirective)
    app.add_directive("aiinfra-answer", AnswerDirective)

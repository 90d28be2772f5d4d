"""A chat workload: shared system prompts and conversations that grow turn by turn.

Each session opens with one of a few system prompts; each turn sends the whole
conversation so far (system prompt, earlier questions and answers) plus a new user
message, and its answer joins the history of the next turn. Two requests can thus
share a prefix in two ways: the same system prompt (across sessions) and the same
history (across turns of one session). Token ids are drawn at random from a large
vocabulary, so that prefixes are shared only where the workload says so.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from aiinfra import checks


@dataclass(frozen=True)
class RoutedRequest:
    """One request: its prompt, the answer it will generate, how long it runs.

    Args:
        tokens: the prompt's token ids.
        output: the answer's token ids, cached once the request finishes.
        hold: arrivals during which it occupies its replica (its decode).
        session: the conversation it belongs to.
    """

    tokens: tuple[int, ...]
    output: tuple[int, ...]
    hold: int
    session: int = 0


@dataclass(frozen=True)
class ChatWorkload:
    """The shape of the chat workload; defaults: the book's.

    Args:
        n_system: distinct system prompts.
        sessions: conversations, session ``i`` using system prompt ``i % n_system``.
        turns: requests per conversation.
        system_len: tokens of a system prompt.
        user_len: tokens of a user message.
        output_len: tokens of an answer.
        hold: arrivals a request keeps its replica busy.
        seed: seed of the token ids and of the order of the sessions in a turn.
    """

    n_system: int = 4
    sessions: int = 32
    turns: int = 4
    system_len: int = 512
    user_len: int = 64
    output_len: int = 128
    hold: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        checks.positive_ints(
            n_system=self.n_system,
            sessions=self.sessions,
            turns=self.turns,
            system_len=self.system_len,
            user_len=self.user_len,
            output_len=self.output_len,
            hold=self.hold,
        )


VOCAB = 1 << 30  # token ids: random ids collide with probability ~ 1e-9


def chat_requests(w: ChatWorkload) -> list[RoutedRequest]:
    """The requests of ``w`` in arrival order: turn by turn, sessions shuffled.

    Turn ``j`` of every session arrives before turn ``j + 1`` of any, so a
    conversation's previous answer is cached before its next question (when
    ``hold <= sessions``).
    """
    rng = random.Random(w.seed)

    def draw(n: int) -> list[int]:
        return [rng.randrange(VOCAB) for _ in range(n)]

    systems = [draw(w.system_len) for _ in range(w.n_system)]
    history = [list(systems[s % w.n_system]) for s in range(w.sessions)]
    out: list[RoutedRequest] = []
    for _ in range(w.turns):
        order = list(range(w.sessions))
        rng.shuffle(order)
        for s in order:
            prompt = history[s] + draw(w.user_len)
            answer = draw(w.output_len)
            out.append(RoutedRequest(tuple(prompt), tuple(answer), w.hold, s))
            history[s] = prompt + answer
    return out

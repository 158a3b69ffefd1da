"""The InsuranceQA-zh pool and judgements, and the baselines' ranking (`evaluation`); pure.

Made-up records shaped like `insuranceqa_data.load_valid()` / `load_answers()`; no figure is
asserted (docs/evaluation.md, Rules).
"""

from __future__ import annotations

import numpy as np

from evaluation.insuranceqa import build_pool
from evaluation.metrics import ChunkSet, cosine_method
from memory_app.search.hybrid import SearchOptions


def question(text: str, answers: list[str], negatives: list[str]) -> dict[str, object]:
    return {"zh": text, "answers": answers, "negatives": negatives}


ANSWERS = {str(i): {"zh": f"答案{i}"} for i in range(1, 10)}


def test_the_pool_holds_every_correct_answer_before_any_negative() -> None:
    valid = {
        "0": question("第一个问题？", ["1", "2"], ["5", "6", "7"]),
        "1": question("第二个问题？", ["3"], ["8", "9"]),
    }
    pool = build_pool(valid, ANSWERS, questions=2, pool=4)
    assert set(pool.answers) == {"1", "2", "3", "5"}
    assert pool.questions == [("第一个问题？", ("1", "2")), ("第二个问题？", ("3",))]


def test_a_question_asked_twice_in_the_same_words_has_both_correct_answers() -> None:
    valid = {
        "0": question("租金保险涵盖什么？", ["1"], ["5"]),
        "1": question("租金保险涵盖什么？", ["2"], ["6"]),
    }
    pool = build_pool(valid, ANSWERS, questions=2, pool=4)
    assert pool.questions == [("租金保险涵盖什么？", ("1", "2"))] * 2


def chunk_set(paths: list[str], vectors: list[list[float]]) -> ChunkSet:
    return ChunkSet(
        paths=paths,
        starts=[1] * len(paths),
        ends=[1] * len(paths),
        line_numbers=[[1]] * len(paths),
        texts=[f"piece {i}" for i in range(len(paths))],
        vectors=np.asarray(vectors, dtype=np.float32),
    )


def test_exact_cosine_shows_each_line_once_like_the_search() -> None:
    # Two pieces of one long answer (both line 1 of a.md) are nearest; the second repeats the
    # line the first shows, so the next answer takes its place, as in the search's results.
    chunks = chunk_set(["a.md", "a.md", "b.md", "c.md"], [[1, 0], [0.99, 0.1], [0.9, 0.4], [0, 1]])
    method = cosine_method(chunks, options=SearchOptions(max_results=2))
    assert [hit.path for hit in method.run("q", [1.0, 0.0])] == ["a.md", "b.md"]

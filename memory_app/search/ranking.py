"""Ranking of memory search candidates: fusion, temporal decay, MMR, minScore, FTS-only boost.

Pure module: no Django, no database. It reproduces OpenClaw's `hybrid.ts`, `temporal-decay.ts`,
`mmr.ts`, the minScore step of `manager.ts` and `query-expansion.ts` (docs/openclaw-behaviour.md §4.7-4.9), with our differences (docs/design.md §D6-D10): session chunks decay by their message time
(item 10) and every result carries its component scores, decay and MMR position (item 7).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

from memory_app.utf16 import utf16_head, utf16_len

# docs/openclaw-behaviour.md §4.1: hybrid weights and the fallback when both clamp to 0.
DEFAULT_VECTOR_WEIGHT = 0.7
DEFAULT_TEXT_WEIGHT = 0.3
# manager.ts `SNIPPET_MAX_CHARS`.
SNIPPET_MAX_CHARS = 700
DAY_MS = 24 * 60 * 60 * 1000

# temporal-decay.ts `DATED_MEMORY_PATH_RE`.
_DATED_MEMORY_PATH_RE = re.compile(r"(?:^|/)memory/(\d{4})-(\d{2})-(\d{2})\.md$")
# mmr.ts `CJK_RE`: CJK ideographs (+Ext A), hiragana, katakana, Hangul syllables and jamo.
_MMR_CJK_RE = re.compile("[\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u1100-\u11ff]")
_MMR_ASCII_RE = re.compile(r"[a-z0-9_]+")
# manager-search.ts `FTS_QUERY_TOKEN_RE` = /[\p{L}\p{N}_]+/gu; Python's \w is letters, numbers, _.
_SEARCH_TOKEN_RE = re.compile(r"\w+")


@dataclass(frozen=True)
class Candidate:
    """One chunk found by the vector side, the keyword side, or both."""

    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    snippet: str
    vector_score: float | None
    text_score: float | None
    timestamp_ms: int | None  # message time for session chunks (docs/design.md §D10)


@dataclass(frozen=True)
class Ranked:
    """A candidate with its fused score and how it got there (docs/design.md §D7)."""

    candidate: Candidate
    score: float
    vector_score: float
    text_score: float
    decay_multiplier: float = 1.0
    mmr_position: int | None = None  # 1-based place in the MMR order, None when MMR is off


# --- weights and fusion (hybrid.ts) ---------------------------------------------------------


def normalize_weights(vector_weight: float, text_weight: float) -> tuple[float, float]:
    """Clamp both weights to [0, 1] and scale them to sum 1 (0.7/0.3 when both are 0)."""
    vector = _clamp_unit(vector_weight)
    text = _clamp_unit(text_weight)
    total = vector + text
    if total <= 0:
        return DEFAULT_VECTOR_WEIGHT, DEFAULT_TEXT_WEIGHT
    return vector / total, text / total


def query_weights(
    vector_weight: float, text_weight: float, *, cjk_share: float, cjk_text_weight_scale: float
) -> tuple[float, float]:
    """Return one query's fusion weights: the text weight scaled for its CJK terms, normalised.

    CJK text is matched by character bigrams, a weaker keyword signal than stemmed words (BM25
    over bigrams trails exact cosine on InsuranceQA-zh, BM25 over words beats it on LoCoMo:
    README, Evaluation), so the text weight is multiplied by ``cjk_text_weight_scale`` in
    proportion to the share of the query's terms that are CJK (`textsearch.cjk_term_share`): a
    Latin-script query keeps the configured weights, a Chinese one gets the scaled text weight.
    """
    share = _clamp_unit(cjk_share)
    scale = 1 - share * (1 - _clamp_unit(cjk_text_weight_scale))
    return normalize_weights(vector_weight, _clamp_unit(text_weight) * scale)


def _clamp_unit(value: float) -> float:
    """Clamp `value` to [0, 1], reading NaN as 0."""
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def fuse_scores(candidates: Iterable[Candidate], *, vector_weight: float, text_weight: float) -> list[Ranked]:
    """Score each candidate as w_v*vector + w_t*text, the weights normalised to sum 1.

    hybrid.ts `mergeHybridResults` (docs/openclaw-behaviour.md §4.7 step 6) unions the two sides' lists by chunk id
    and scores a side that did not see the chunk 0; our candidates carry both sides' scores
    (`candidates`), so a missing score (None) means the side could not measure it. Raw side
    scores are not normalised, as in OpenClaw.
    """
    w_vector, w_text = normalize_weights(vector_weight, text_weight)
    ranked = []
    for item in candidates:
        vector_score, text_score = item.vector_score or 0.0, item.text_score or 0.0
        ranked.append(Ranked(item, w_vector * vector_score + w_text * text_score, vector_score, text_score))
    return ranked


def sort_by_score(results: Iterable[Ranked]) -> list[Ranked]:
    """Sort by score, highest first; equal scores by the better keyword, then vector match.

    Results tied on the fused score (text alone often ties: same terms, same coverage) come out
    in the order of their match, not of their paths; what is still tied goes to the shorter chunk
    (the same terms in fewer words), then by path and line, so the order never depends on the
    order the database returned the rows in.
    """
    return sorted(
        results,
        key=lambda ranked: (
            -ranked.score,
            -ranked.text_score,
            -ranked.vector_score,
            len(ranked.candidate.text),
            ranked.candidate.path,
            ranked.candidate.start_line,
        ),
    )


# --- temporal decay (temporal-decay.ts) -----------------------------------------------------


def decay_multiplier(age_days: float, half_life_days: float) -> float:
    """Return exp(-ln2/half_life * max(0, age)): 0.5 at the half-life, 1 for future dates."""
    if not math.isfinite(half_life_days) or half_life_days <= 0:
        return 1.0
    age = max(0.0, age_days)
    if not math.isfinite(age):
        return 1.0
    return math.exp(-(math.log(2) / half_life_days) * age)


def date_from_memory_path(path: str) -> date | None:
    """Return the date of a `memory/YYYY-MM-DD.md` path, or None if it is not a real date."""
    match = _DATED_MEMORY_PATH_RE.search(_normalize_path(path))
    if match is None:
        return None
    year, month, day = (int(group) for group in match.groups())
    # JavaScript's Date.UTC reads years 0-99 as 1900-1999, so OpenClaw's round-trip check
    # rejects them; Python's date() rejects day 31 of a 30-day month and the like.
    if year < 100:
        return None
    try:
        return date(year, month, day)
    except ValueError:
        return None


def is_evergreen(path: str, source: str) -> bool:
    """Tell whether a memory file never decays: MEMORY.md, memory.md, undated memory/**."""
    # temporal-decay.ts `isEvergreenMemoryPath`; `memory/2026-02-16-notes.md` is not dated
    # by the regex, so it counts as evergreen (docs/openclaw-behaviour.md §4.8).
    if source != "memory":
        return False
    normalized = _normalize_path(path)
    if normalized in ("MEMORY.md", "memory.md"):
        return True
    return normalized.startswith("memory/") and date_from_memory_path(normalized) is None


def _normalize_path(path: str) -> str:
    """Use `/` separators and drop a leading `./` (temporal-decay.ts)."""
    normalized = path.replace("\\", "/")
    return normalized[2:] if normalized.startswith("./") else normalized


def apply_temporal_decay(results: Sequence[Ranked], *, half_life_days: float, now_ms: int) -> list[Ranked]:
    """Multiply each score by its age decay, then sort by score, highest first."""
    decayed = []
    for ranked in results:
        timestamp = _decay_timestamp_ms(ranked.candidate)
        if timestamp is None:
            decayed.append(ranked)
            continue
        multiplier = decay_multiplier((now_ms - timestamp) / DAY_MS, half_life_days)
        decayed.append(
            replace(
                ranked,
                score=ranked.score * multiplier,
                decay_multiplier=ranked.decay_multiplier * multiplier,
            )
        )
    return sort_by_score(decayed)


def _decay_timestamp_ms(candidate: Candidate) -> int | None:
    """Return the time a candidate's age counts from, or None when it does not decay."""
    # Order of temporal-decay.ts `extractTimestamp`: a dated path first, then evergreen memory.
    # OpenClaw then stats the file; we use the candidate's own timestamp instead, which for
    # session chunks is the message time (docs/design.md §D10). No timestamp: no decay.
    dated = date_from_memory_path(candidate.path)
    if dated is not None:
        midnight = datetime(dated.year, dated.month, dated.day, tzinfo=UTC)
        return int(midnight.timestamp() * 1000)
    if is_evergreen(candidate.path, candidate.source):
        return None
    return candidate.timestamp_ms


# --- MMR (mmr.ts; Carbonell & Goldstein 1998) -----------------------------------------------


def mmr_tokens(text: str) -> frozenset[str]:
    """Return the token set MMR compares: ascii words, CJK unigrams and adjacent CJK bigrams."""
    lower = text.lower()
    cjk = [(index, char) for index, char in enumerate(lower) if _MMR_CJK_RE.match(char)]
    # Bigrams only from chars adjacent in the text, so Latin between two CJK chars breaks them.
    bigrams = [
        first + second
        for (first_index, first), (second_index, second) in itertools.pairwise(cjk)
        if second_index == first_index + 1
    ]
    return frozenset([*_MMR_ASCII_RE.findall(lower), *bigrams, *(char for _, char in cjk)])


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Return |a ∩ b| / |a ∪ b|; 1 when both are empty, 0 when only one is."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    intersection = len(a & b)
    return intersection / (len(a) + len(b) - intersection)


def mmr_rerank(results: Sequence[Ranked], *, lambda_: float) -> list[Ranked]:
    """Reorder by Maximal Marginal Relevance over snippets; scores stay, positions are set."""
    # mmr.ts `mmrRerank`: greedy argmax of λ·rel − (1−λ)·maxSim, rel min-max normalised,
    # ties to the higher raw score; every item is returned.
    lam = max(0.0, min(1.0, lambda_))
    if lam == 1.0:
        return _with_positions(sort_by_score(results))
    if len(results) <= 1:
        return _with_positions(results)
    tokens = [mmr_tokens(ranked.candidate.snippet) for ranked in results]
    relevance = _min_max(ranked.score for ranked in results)
    remaining = list(range(len(results)))
    max_sim = [0.0] * len(results)
    order: list[int] = []
    while remaining:
        best = _mmr_pick(remaining, results, relevance=relevance, max_sim=max_sim, lam=lam)
        order.append(best)
        remaining.remove(best)
        # Similarity to the selected set only grows, so keep a running max per candidate
        # instead of recomputing it over all selected items (same result as mmr.ts, O(n²)).
        for index in remaining:
            max_sim[index] = max(max_sim[index], jaccard(tokens[index], tokens[best]))
    return _with_positions([results[index] for index in order])


def _mmr_pick(
    remaining: Sequence[int],
    results: Sequence[Ranked],
    *,
    relevance: Sequence[float],
    max_sim: Sequence[float],
    lam: float,
) -> int:
    """Return the remaining index with the best MMR score, ties to the higher raw score."""
    best = remaining[0]
    best_mmr = -math.inf
    for index in remaining:
        mmr = lam * relevance[index] - (1 - lam) * max_sim[index]
        if mmr > best_mmr or (mmr == best_mmr and results[index].score > results[best].score):
            best, best_mmr = index, mmr
    return best


def _min_max(scores: Iterable[float]) -> list[float]:
    """Scale scores to [0, 1]; all equal scores become 1."""
    values = list(scores)
    low, high = min(values), max(values)
    if high == low:
        return [1.0] * len(values)
    return [(value - low) / (high - low) for value in values]


def _with_positions(results: Sequence[Ranked]) -> list[Ranked]:
    """Record each result's 1-based place in the MMR order."""
    return [replace(ranked, mmr_position=place) for place, ranked in enumerate(results, start=1)]


# --- minScore and the FTS-only path (manager.ts, manager-search.ts) ------------------------


def apply_min_score(
    results: Sequence[Ranked],
    *,
    min_score: float,
    keyword_ids: set[str],
    max_results: int,
) -> list[Ranked]:
    """Keep results scoring at least `min_score`; keyword-backed ones below it fill the slots left.

    Reference 4.7 step 8 keeps keyword hits (score >= min(minScore, textWeight)) only when
    nothing passes (OpenClaw bug reports, docs/openclaw-behaviour.md §4.7), and upstream later let them fill spare slots (OpenClaw bug reports, docs/openclaw-behaviour.md §4.7). Here every
    result that shares a query term with its chunk may fill a spare slot, after all the results
    that passed, in rank order: a keyword match is evidence of relevance whatever the embedder's
    similarity scale (MiniLM rates related conversation turns 0.3-0.5, so 0.35 hides half of
    them: README, LoCoMo). A result with neither keyword nor score is still dropped, so a query
    that matches nothing returns nothing.
    """
    limit = max(0, max_results)
    strict = [ranked for ranked in results if ranked.score >= min_score]
    spare = [ranked for ranked in results if ranked.score < min_score and ranked.candidate.id in keyword_ids]
    return (strict + spare)[:limit]


def fts_only_boost(text_score: float, *, query: str, text: str, path: str) -> float:
    """Return the FTS-only score: text score plus query coverage, density, path, length boosts."""
    # manager-search.ts `scoreFallbackKeywordResult` (docs/openclaw-behaviour.md §4.7 step 9).
    query_tokens = list(dict.fromkeys(_search_tokens(query)))
    if not query_tokens:
        return text_score
    text_tokens = set(_search_tokens(text))
    path_lower = path.lower()
    overlap = sum(1 for token in query_tokens if token in text_tokens)
    unique_query_overlap = overlap / len(query_tokens)
    density = overlap / max(len(text_tokens), 1)
    path_boost = sum(0.18 for token in query_tokens if token in path_lower)
    length_boost = min(utf16_len(text) / 160, 0.18)
    boost = unique_query_overlap * 0.45 + density * 0.2 + path_boost + length_boost
    return min(1.0, text_score + boost)


def _search_tokens(text: str) -> list[str]:
    """Return the lowercased `[\\p{L}\\p{N}_]+` tokens of `text`."""
    return [token.lower() for token in _SEARCH_TOKEN_RE.findall(text)]


def truncate_snippet(text: str, max_chars: int = SNIPPET_MAX_CHARS) -> str:
    """Cut `text` to at most `max_chars` UTF-16 units without splitting a surrogate pair."""
    return utf16_head(text, max_chars)


# --- stop words (query-expansion.ts) -------------------------------

_STOP_WORDS_EN = frozenset(
    "a an the this that these those i me my we our you your he she it they them is are was were "
    "be been being have has had do does did will would could should can may might in on at to "
    "for of with by from about into through during before after above below between under over "
    "and or but if then because as while when where what which who how why yesterday today "
    "tomorrow earlier later recently ago just now thing things stuff something anything "
    "everything nothing please help find show get tell give".split()
)
_STOP_WORDS_ES = frozenset(
    "el la los las un una unos unas este esta ese esa yo me mi nosotros nosotras tu tus usted "
    "ustedes ellos ellas de del a en con por para sobre entre y o pero si porque como es son fue "
    "fueron ser estar haber tener hacer ayer hoy mañana antes despues después ahora "
    "recientemente que qué cómo cuando cuándo donde dónde porqué favor ayuda".split()
)
_STOP_WORDS_PT = frozenset(
    "o a os as um uma uns umas este esta esse essa eu me meu minha nos nós você vocês ele ela "
    "eles elas de do da em com por para sobre entre e ou mas se porque como é são foi foram ser "
    "estar ter fazer ontem hoje amanhã antes depois agora recentemente que quê quando onde "
    "porquê favor ajuda".split()
)
_STOP_WORDS_AR = frozenset(
    "ال و أو لكن ثم بل أنا نحن هو هي هم هذا هذه ذلك تلك هنا هناك من إلى الى في على عن مع بين ل ب ك "
    "كان كانت يكون تكون صار أصبح يمكن ممكن بالأمس امس اليوم غدا الآن قبل بعد مؤخرا لماذا كيف ماذا "
    "متى أين هل فضلا ساعد".split()
) | {"من فضلك"}
_STOP_WORDS_KO = frozenset(
    "은 는 이 가 을 를 의 에 에서 로 으로 와 과 도 만 까지 부터 한테 에게 께 처럼 같이 보다 마다 "
    "밖에 대로 나 나는 내가 나를 너 우리 저 저희 그 그녀 그들 이것 저것 그것 여기 저기 거기 있다 없다 "
    "하다 되다 이다 아니다 주다 오다 가다 것 거 등 수 때 곳 중 분 잘 더 또 매우 정말 아주 많이 너무 "
    "좀 그리고 하지만 그래서 그런데 그러나 또는 그러면 왜 어떻게 뭐 언제 어디 누구 무엇 어떤 어제 오늘 "
    "내일 최근 지금 아까 나중 전에 제발 부탁".split()
)
_STOP_WORDS_JA = frozenset(
    "これ それ あれ この その あの ここ そこ あそこ する した して です ます いる ある なる できる "
    "の こと もの ため そして しかし また でも から まで より だけ なぜ どう 何 いつ どこ 誰 どれ "
    "昨日 今日 明日 最近 今 さっき 前 後".split()
)
_STOP_WORDS_ZH = frozenset(
    "我 我们 你 你们 他 她 它 他们 这 那 这个 那个 这些 那些 的 了 着 过 得 地 吗 呢 吧 啊 呀 嘛 啦 "
    "是 有 在 被 把 给 让 用 到 去 来 做 说 看 找 想 要 能 会 可以 和 与 或 但 但是 因为 所以 如果 "
    "虽然 而 也 都 就 还 又 再 才 只 之前 以前 之后 以后 刚才 现在 昨天 今天 明天 最近 东西 事情 "
    "事 什么 哪个 哪些 怎么 为什么 多少 请 帮 帮忙 告诉".split()
)
STOP_WORDS = (
    _STOP_WORDS_EN
    | _STOP_WORDS_ES
    | _STOP_WORDS_PT
    | _STOP_WORDS_AR
    | _STOP_WORDS_KO
    | _STOP_WORDS_JA
    | _STOP_WORDS_ZH
)


def is_stop_word(token: str) -> bool:
    """Tell whether a lowercased token is in OpenClaw's EN/ES/PT/AR/KO/JA/ZH stop lists."""
    return token in STOP_WORDS

"""Can a feature of the score list beat the top-1 answer gate? Grouped cross-validation on data/.

The top-1 gate empties a question when its best candidate is below the gate. This
script tries four features of the same search, each as a second never-lose rule
beside the top-1 gate (no learned model): a question is emptied when the top-1 gate
*or* the feature's rule empties it.

- ``gap``: the best score minus the second best;
- ``spread``: the best score minus the last of the fetched candidates (12);
- ``count``: how many fetched candidates reach the floor;
- ``words``: the question's length in words.

Each rule is set like the gate, on the training folds only: its direction is the
side where the training unrelated questions lie beyond every answerable one, and
its threshold is the lowest (or highest) answerable value, minus (plus) a margin
(0.02 for cosine features, none for counts). Folds are grouped by article, as in
``thresholded calibrate``. A feature would be adopted only where it empties more
unrelated questions at the same cross-validated loss.

    .venv/bin/python benchmarks/gate_features.py --cache /tmp/gate-features
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from thresholded.calibration import (
    PairScores,
    assign_folds,
    calibrate,
    load_corpus,
    load_questions,
    suggest,
    suggest_gate,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gate_features.json"
# (model, passages a search may return, question language): one pair each
RUNS = [
    ("minilm", "en", "en"),
    ("use-multilingual", "en", "en"),
    ("use-multilingual", "en", "de"),
    ("use-multilingual", "de", "de"),
    ("use-multilingual", "de", "en"),
]
COSINE_MARGIN = 0.02
GATE_MARGINS = (0.02, 0.01, 0.0)
"""The top-1 gate at several margins: a feature must beat the gate at the same loss."""

Feature = Callable[[PairScores, float], np.ndarray]
FEATURES: dict[str, Feature] = {
    "gap": lambda s, floor: s.candidates[:, 0] - s.candidates[:, 1],
    "spread": lambda s, floor: s.candidates[:, 0] - s.candidates[:, -1],
    "count": lambda s, floor: (s.candidates >= floor).sum(axis=1).astype(float),
    "words": lambda s, floor: s.words.astype(float),
}
MARGIN = {"gap": COSINE_MARGIN, "spread": COSINE_MARGIN, "count": 0.0, "words": 0.0}


@dataclass(frozen=True)
class Rule:
    """Empty a question when its feature lies beyond ``threshold`` on the unrelated side."""

    low: bool
    threshold: float

    def empties(self, values: np.ndarray) -> np.ndarray:
        return values < self.threshold if self.low else values > self.threshold


def _never_lose_rule(values: np.ndarray, answerable: np.ndarray, margin: float) -> Rule:
    """The direction that empties more training unrelated questions, at no training loss."""
    good, junk = values[answerable], values[~answerable]
    rules = (Rule(True, float(good.min()) - margin), Rule(False, float(good.max()) + margin))
    return max(rules, key=lambda r: int(r.empties(junk).sum()))


def _cross_validate(
    scores: PairScores, folds: int, gate_margin: float
) -> dict[str, dict[str, float]]:
    """Held-out loss and emptied shares of floor + gate, alone and with each feature."""
    fold_of = assign_folds([scores], folds)
    fold = np.array([fold_of[a] for a in scores.articles])
    ans = scores.answerable
    gold = np.where(ans, scores.gold, np.inf)
    variants = ["floor + gate", *(f"floor + gate + {name}" for name in FEATURES)]
    emptied = {v: np.zeros(ans.size, dtype=bool) for v in variants}
    lost = {v: np.zeros(ans.size, dtype=bool) for v in variants}
    for f in range(min(folds, len(set(fold.tolist())))):
        train, held = fold != f, fold == f
        part = scores.subset(train)
        good, junk, top = {"p": part.good}, {"p": part.junk}, {"p": part.good_top}
        floor = suggest("never-lose", good, junk).threshold
        gate = suggest_gate("never-lose", top, junk, margin=gate_margin).threshold
        assert floor is not None and gate is not None
        rules = {
            name: _never_lose_rule(fn(part, floor), part.answerable, MARGIN[name])
            for name, fn in FEATURES.items()
        }
        for variant in variants:
            name = variant.rpartition(" + ")[2]
            empty = scores.top < max(floor, gate)
            if name in rules:
                empty = empty | rules[name].empties(FEATURES[name](scores, floor))
            lost[variant] |= held & ans & (empty | (gold < floor))
            emptied[variant] |= held & ~ans & empty
    origins = np.asarray(scores.origins, dtype=object)
    rows = {}
    for variant in variants:
        row = {"lost": int(lost[variant].sum()), "answerable": int(ans.sum())}
        for origin in sorted(set(origins[~ans].tolist())):
            row[origin] = float(emptied[variant][~ans & (origins == origin)].mean())
        rows[f"{variant} (gate margin {gate_margin:.2f})"] = row
    return rows


class CachingEmbedder:
    """A model's embeddings, kept on disk by text, so a second run embeds nothing."""

    def __init__(self, name: str, cache: Path | None) -> None:
        from thresholded.embedders import load_embedder

        self._model = load_embedder(name)
        self.model_id = self._model.model_id
        self._path = None if cache is None else cache / f"{name}.npz"
        self._known: dict[str, np.ndarray] = {}
        if self._path is not None and self._path.exists():
            stored = np.load(self._path, allow_pickle=False)
            self._known = dict(zip(stored["texts"].tolist(), stored["vectors"], strict=True))

    def _embed(self, texts: Sequence[str], fn: Callable) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._known]
        if missing:
            self._known.update(zip(missing, fn(missing), strict=True))
            if self._path is not None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                keys = list(self._known)
                np.savez(
                    self._path, texts=np.array(keys), vectors=np.array(list(self._known.values()))
                )
        return np.array([self._known[t] for t in texts])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, self._model.embed_documents)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, self._model.embed_queries)


def _table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = [
        "| model, pair | rule | lost (CV) | CLINC emptied | near-miss emptied |",
        "|---|---|---|---|---|",
    ]
    for run, rows in results.items():
        for variant, row in rows.items():
            clinc = row.get("clinc-oos")
            lines.append(
                f"| {run} | {variant} | {row['lost']} / {row['answerable']} | "
                f"{'–' if clinc is None else f'{clinc:.1%}'} | {row['xquad-bench']:.1%} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="keep embeddings here between runs")
    parser.add_argument("--folds", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    corpus = load_corpus(ROOT / "data/xquad-bench/corpus.jsonl")
    questions = [
        *load_questions(ROOT / "data/xquad-bench/queries_dev.jsonl"),
        *load_questions(ROOT / "data/clinc-oos/queries_dev.jsonl"),
    ]
    embedders: dict[str, CachingEmbedder] = {}
    results: dict[str, dict[str, dict[str, float]]] = {}
    for model, passages, lang in RUNS:
        embedder = embedders.setdefault(model, CachingEmbedder(model, args.cache))
        run = calibrate(embedder, corpus, questions, passages=passages, question_langs=[lang])
        (scores,) = run.pairs
        results[f"{model} {scores.pair}"] = {
            variant: row
            for margin in GATE_MARGINS
            for variant, row in _cross_validate(scores, args.folds, margin).items()
        }
    print(_table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

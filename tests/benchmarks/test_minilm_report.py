"""The MiniLM benchmark's report computes its targets from the rates it was given: HTTP at
concurrency 64 against the best raw batch (80%) and against sentence-transformers' best."""

from __future__ import annotations

from benchmarks.minilm import report

RATES = {
    **{f"raw|onnxruntime|short|{b}": r for b, r in ((1, 50.0), (16, 200.0), (64, 100.0))},
    **{f"raw|onnxruntime|long|{b}": 10.0 for b in (1, 16, 64)},
    **{f"http|onnxruntime|short|{c}": 170.0 for c in (1, 16, 64)},
    **{f"http|onnxruntime|long|{c}": 7.0 for c in (1, 16, 64)},
    **{f"in-process|onnxruntime|{n}|{c}": 1.0 for n in ("short", "long") for c in (1, 16, 64)},
    **{f"st|torch|short|{b}": r for b, r in ((1, 20.0), (16, 100.0), (64, 85.0))},
    **{f"st|torch|long|{b}": 14.0 for b in (1, 16, 64)},
    **{
        f"mixed|{label}|{c}{field}": 1.0
        for label in ("ragged", "unbatched")
        for c in (16, 64)
        for field in ("", "|average batch", "|padding waste")
    },
}
TOKENS: dict[str, object] = {"short": 12, "long": 127, "mixed": "4 to 127"}


def target_rows(text: str) -> dict[tuple[str, str], list[str]]:
    rows = {}
    section = text.split("Targets")[1].split("Mixed lengths")[0]
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] in ("onnxruntime", "openvino"):
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_targets_are_taken_against_the_best_raw_batch_and_sentence_transformers() -> None:
    rows = target_rows(report(RATES, "torch test", TOKENS))
    # short: 170 / best raw 200 = 85% (met); 170 / best ST 100 = 170% (ahead)
    assert rows[("onnxruntime", "short")] == ["85%", "yes", "170%", "yes", "1%"]
    # long: 7 / 10 = 70% (missed); 7 / 14 = 50% (behind)
    assert rows[("onnxruntime", "long")] == ["70%", "no", "50%", "no", "7%"]
    assert ("openvino", "short") not in rows  # not measured: no row


def test_without_sentence_transformers_its_ratios_are_dashes() -> None:
    rates = {k: v for k, v in RATES.items() if not k.startswith("st|")}
    rows = target_rows(report(rates, "skipped: no --st-python given", TOKENS))
    assert rows[("onnxruntime", "short")] == ["85%", "yes", "-", "-", "-"]

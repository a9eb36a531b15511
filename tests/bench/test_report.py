"""Report files, plots and the command line, on short in-process runs."""

import json
import sys

import pytest

from conveyor.bench import BenchSpec, Point, TargetSpec, read_json, run_bench, write_json
from conveyor.bench.plot import plot_reports
from conveyor.bench.report import format_table
from conveyor.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report():
    return run_bench(
        BenchSpec(TargetSpec("inprocess", "mlp"), label="mlp in-process"),
        [Point(concurrency=c, warmup_s=0.1, duration_s=0.3) for c in (1, 4)],
        progress=False,
        command="test",
    )


def test_report_json_round_trips(report, tmp_path):
    path = write_json(report, tmp_path / "r" / "report.json")
    raw = json.loads(path.read_text())
    assert raw["format"] == "conveyor-bench/1" and raw["model"] == "mlp"
    assert [p["concurrency"] for p in raw["points"]] == [1, 4]
    assert set(raw["points"][0]["latency_ms"]) == {"count", "mean", "p50", "p90", "p99", "max"}
    assert raw["machine"]["cpus"] >= 1
    again = read_json(path)
    assert again == report


def test_read_json_rejects_other_files(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a conveyor bench report"):
        read_json(path)


def test_table_lists_every_point(report):
    table = format_table(report)
    assert "c=1" in table and "c=4" in table and "infer/s" in table


def test_plot_is_a_non_empty_png(report, tmp_path):
    path = plot_reports([report, report], tmp_path / "p.png", title="two")
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_cli_run_writes_json_and_plot_then_plot_merges(tmp_path, capsys):
    json_path, png_path = tmp_path / "a.json", tmp_path / "a.png"
    code = main(
        [
            "bench",
            "tiny",
            "--url",
            "inprocess",
            "-c",
            "1,2",
            "-d",
            "0.3",
            "--warmup",
            "0.1",
            "-q",
            "--json",
            str(json_path),
            "--plot",
            str(png_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "tiny via inprocess" in out and "c=2" in out
    assert read_json(json_path).command.startswith("conveyor bench tiny")
    assert png_path.read_bytes().startswith(PNG_MAGIC)
    merged = tmp_path / "merged.png"
    assert main(["bench", "plot", str(json_path), str(json_path), "-o", str(merged)]) == 0
    assert merged.read_bytes().startswith(PNG_MAGIC) and merged.stat().st_size > 10_000


def test_cli_open_loop_and_bad_arguments(tmp_path, capsys):
    assert (
        main(
            [
                "bench",
                "tiny",
                "--url",
                "inprocess",
                "-r",
                "200",
                "--distribution",
                "poisson",
                "-d",
                "0.3",
                "--warmup",
                "0",
                "-q",
            ]
        )
        == 0
    )
    assert "r=200" in capsys.readouterr().out
    assert main(["bench", "tiny", "--url", "ftp://x", "-q"]) == 2
    assert main(["bench", "tiny", "--url", "inprocess", "--shape", "bad", "-q"]) == 2
    with pytest.raises(SystemExit):
        main(["bench", "tiny", "-c", "0"])
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--help"])
    assert exc.value.code == 0
    assert "--request-rate" in capsys.readouterr().out


def test_plot_labels_milliseconds_plainly_and_keeps_the_p90_dashes(report):
    import matplotlib.pyplot as plt

    from conveyor.bench.plot import default_title, draw

    assert default_title([report]) == "mlp via inprocess, concurrency 1-4"
    fig = draw([report])
    try:
        fig.canvas.draw()
        (ax,) = fig.axes
        labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert labels and all("10^" not in x and "\\times" not in x for x in labels), labels
        assert all(float(x) > 0 for x in labels)  # plain numbers: "0.5", "1", "2", "5"
        assert ax.get_title() == "mlp via inprocess, concurrency 1-4"
        handles = {h.get_label(): h for h in ax.get_legend().legend_handles}
        assert handles["p90"].get_linestyle() == "--" and handles["p90"].get_marker() in (
            "None",
            "",
            None,
        )
        assert "mlp in-process" in handles
    finally:
        plt.close(fig)


def test_plot_without_matplotlib_says_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code = main(["bench", "tiny", "--url", "inprocess", "-q", "--plot", str(tmp_path / "p.png")])
    assert code == 2
    assert "pip install '.[bench]'" in capsys.readouterr().err

"""The timeline as an image (spec §6.3): ``run.to_svg()``, ``run.save("run.svg" |
"run.png")`` and ``%woml save RUN_ID FILE``, the notebook's drawing, light or dark.

Runs are real (the local engine on the simulated clock); the PNGs are rasterized by the
real resvg (the ``png`` extra, which the ``test`` extra brings) and read back with
Pillow (matplotlib's dependency, in the ``test`` extra through ``lab``). The docs'
example images are written by these tests: into the test's temporary folder, or over
docs/images/saved-timeline*.png when WOML_UPDATE_SCREENSHOT=1 (as tests/test_browser.py
does for its screenshots).
"""

from __future__ import annotations

import inspect
import io
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from lxml import etree
from PIL import Image

import woml_magic as wm
from woml_magic.errors import WomlError, WomlExtraMissing, WomlImageError
from woml_magic.model import Run
from woml_magic.timeline import image, render_html
from woml_magic.timeline.geometry import LABEL_W
from woml_magic.timeline.outcome_styles import BAR_TEXT, OUTCOME_STYLES
from woml_magic.timeline.theme import GRID, PALETTES, TEXT, TEXT_MUTED, ThemeName

ROOT = Path(__file__).resolve().parents[1]
DOCS_IMAGES = ROOT / "docs" / "images"
SVG_NS = "http://www.w3.org/2000/svg"
NS = {"s": SVG_NS}

#: Three outcomes on one axis: two retried throws then a success, and a timeout that
#: fails closed (spec §3.2) with its retry unused.
CHECKOUT = """<workflow id="checkout">
  <step id="charge" retry="4" retry-backoff="exponential" retry-delay="1s">
    <script>
      if (attempt.number < 3) throw new Error("card network down");
      return {charged: true};
    </script>
  </step>
  <step id="receipt" retry="2" retry-delay="2s" timeout="5s">
    <script>await services.sleep("1m"); return 1;</script>
  </step>
</workflow>"""


@pytest.fixture(scope="module")
def run() -> Run:
    return wm.run(CHECKOUT, clock="simulated", run_id="slides")


def parsed(svg: str) -> Any:
    return etree.fromstring(svg.encode("utf-8"))


def size_of(svg: str) -> tuple[float, float]:
    root = parsed(svg)
    return float(root.get("width")), float(root.get("height"))


def png_of(data: bytes) -> Image.Image:
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    picture = Image.open(io.BytesIO(data))
    picture.load()
    return picture.convert("RGB")


def rgb(colour: str) -> tuple[int, int, int]:
    value = colour.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def distance(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How far apart two RGB pixels are (the sum of the channels' differences)."""
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def luminance(colour: str) -> float:
    """WCAG 2's relative luminance of a #rrggbb colour."""

    def linear(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


# -- the SVG document ---------------------------------------------------------------------


@pytest.mark.parametrize("theme", list(PALETTES))
def test_the_svg_is_a_standalone_document_with_its_size_and_literal_fonts(
    run: Run, theme: ThemeName
) -> None:
    svg = run.to_svg(theme=theme)
    root = parsed(svg)  # well-formed XML, for any SVG reader
    assert root.tag == f"{{{SVG_NS}}}svg"
    width, height = size_of(svg)
    assert width > LABEL_W
    assert height > 0
    assert root.get("viewBox") == f"0 0 {width:.0f} {height:.0f}"
    # Nothing only a notebook page defines: no CSS variables, no browser-only font
    # keyword, no stylesheet or script to strip.
    assert "var(--" not in svg
    assert "system-ui" not in svg
    assert "<style" not in svg
    assert "<script" not in svg
    assert root.get("font-family") == image.FONT_FAMILY
    assert root.get("font-family").endswith("sans-serif")
    # Its title comes first, then its own background covering the whole picture.
    assert etree.QName(root[0]).localname == "title"
    background = root.find("s:rect[@class='woml-picture-bg']", NS)
    assert background is not None
    assert background.get("fill") == PALETTES[theme].background
    assert (background.get("width"), background.get("height")) == (
        f"{width:.0f}",
        f"{height:.0f}",
    )


def test_the_svg_shows_the_step_ids_and_the_outcome_words(run: Run) -> None:
    root = parsed(run.to_svg())
    steps = [
        t.xpath("string(text())") for t in root.iterfind(".//s:text[@class='woml-step-id']", NS)
    ]
    assert steps == ["charge", "receipt"]
    words = " ".join(root.itertext())
    for word in ("#1 threw", "#2 threw", "#3 succeeded", "#1 timeout", "wait 1s", "wait 2s"):
        assert word in words
    legend = {e.get("data-kind") for e in root.iterfind(".//s:g[@class='woml-legend-entry']", NS)}
    assert {"succeeded", "threw", "timeout"} <= legend


def test_the_header_line_is_the_notebooks_and_header_false_leaves_it_out(run: Run) -> None:
    with_header = run.to_svg()
    header = parsed(with_header).find("s:text[@class='woml-header']", NS)
    assert header is not None
    line = "".join(header.itertext())
    assert line == (
        f"workflow checkout · run slides · simulated clock · failed · t = "
        f"{re.search(r't = ([^<]+)</div>', render_html(run)).group(1)}"
    )
    bold = [s.text for s in header if s.get("font-weight") == "bold"]
    assert bold == ["checkout", "failed"]
    bare = run.to_svg(header=False)
    assert parsed(bare).find("s:text[@class='woml-header']", NS) is None
    assert size_of(with_header)[1] == size_of(bare)[1] + image.HEADER_H
    # The lanes moved down, not over the header.
    lanes = parsed(with_header).find("s:g[@transform]", NS)
    assert lanes.get("transform") == f"translate(0 {image.HEADER_H:g})"


def test_long_ids_are_quoted_as_a_window_and_the_picture_widens_for_its_header() -> None:
    doc = f'<workflow id="{"W" * 64}"><step id="s"><script>return 1;</script></step></workflow>'
    made = wm.run(doc, clock="simulated", run_id="r" * 128)
    line = "".join(parsed(made.to_svg()).find("s:text[@class='woml-header']", NS).itertext())
    assert "r" * image.HEADER_ID_CHARS not in line
    assert "r" * (image.HEADER_ID_CHARS - 1) + "…" in line
    assert "W" * (image.HEADER_ID_CHARS - 1) + "…" in line
    # The lanes alone are narrower than that header: the picture widens, not cuts it.
    assert size_of(made.to_svg())[0] > size_of(made.to_svg(header=False))[0]


def test_the_lanes_are_the_notebooks_drawing(run: Run) -> None:
    # The same layout as the notebook's static timeline: every segment at the same place.
    def segments(root: Any) -> list[tuple[str | None, ...]]:
        return [
            (
                g.get("class"),
                g.get("data-step"),
                g.get("data-n"),
                g.get("data-x0"),
                g.get("data-x1"),
            )
            for g in root.iterfind(".//s:g[@data-x0]", NS)
        ]

    drawing = re.search(r"<svg .*?</svg>", render_html(run), flags=re.DOTALL)
    assert drawing is not None
    notebook = parsed(drawing.group(0))
    assert segments(parsed(run.to_svg())) == segments(notebook)
    assert segments(notebook)


@pytest.mark.parametrize("theme", list(PALETTES))
def test_every_colour_is_the_themes_or_an_outcomes(run: Run, theme: ThemeName) -> None:
    colours = PALETTES[theme]
    allowed = {
        colours.background,
        colours.text,
        colours.muted,
        colours.grid,
        BAR_TEXT,
        *(style.color for style in OUTCOME_STYLES.values()),
        "none",
        "transparent",
    }
    root = parsed(run.to_svg(theme=theme))
    used = {el.get(a) for el in root.iter() for a in ("fill", "stroke") if el.get(a)}
    assert {c for c in used if not c.startswith("url(#")} <= allowed
    texts = {t.get("fill") for t in root.iter(f"{{{SVG_NS}}}text")}
    assert colours.text in texts
    if theme == "dark":
        # Not one of the light drawing's colours is left behind on the dark background.
        assert not used & {TEXT, TEXT_MUTED, GRID}


@pytest.mark.parametrize("theme", list(PALETTES))
def test_text_outside_bars_meets_wcag_aa_on_the_themes_background(theme: ThemeName) -> None:
    colours = PALETTES[theme]
    assert contrast(colours.text, colours.background) >= 4.5
    assert contrast(colours.muted, colours.background) >= 4.5


def test_the_image_has_no_buttons(run: Run) -> None:
    svg = run.to_svg()
    assert "tabindex" not in svg
    assert 'role="button"' not in svg
    assert parsed(svg).get("role") == "img"
    assert 'tabindex="0"' in render_html(run)  # the notebook's drawing has them


def test_the_theme_names_are_declared_once() -> None:
    assert get_args(ThemeName) == tuple(PALETTES)


def test_the_run_methods_have_the_image_modules_defaults() -> None:
    # Run's signature spells the defaults out (the timeline loads lazily); they are these.
    for method, function in ((Run.save, image.save), (Run.to_svg, image.to_svg)):
        mine = inspect.signature(method).parameters
        theirs = inspect.signature(function).parameters
        for name in ("theme", "scale", "header"):
            if name in theirs:
                assert mine[name].default == theirs[name].default, (method, name)
    assert inspect.signature(Run.save).parameters["scale"].default == image.DEFAULT_SCALE


def test_one_run_gives_the_same_svg_every_time(run: Run) -> None:
    assert run.to_svg() == run.to_svg()


# -- PNG ----------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1, 1.5, 2])
def test_the_png_is_the_svgs_size_times_the_scale(run: Run, scale: float) -> None:
    width, height = size_of(run.to_svg())
    picture = png_of(image.to_png(run, scale=scale))
    assert abs(picture.width - width * scale) < 1
    assert abs(picture.height - height * scale) < 1


@pytest.mark.parametrize("theme", list(PALETTES))
def test_the_pngs_text_renders_in_the_step_column(
    run: Run, theme: ThemeName, tmp_path: Path
) -> None:
    # Fonts: a rasterizer that found none would leave the step column blank.
    path = run.save(tmp_path / "run.png", theme=theme)
    picture = png_of(path.read_bytes())
    scale = image.DEFAULT_SCALE
    assert picture.width == pytest.approx(size_of(run.to_svg())[0] * scale, abs=1)
    colours = PALETTES[theme]
    background, ink = rgb(colours.background), rgb(colours.text)
    root = parsed(run.to_svg(theme=theme))
    labels = root.findall(".//s:text[@class='woml-step-id']", NS)
    assert len(labels) == 2
    for label in labels:
        baseline = (float(label.get("y")) + image.HEADER_H) * scale
        box = (0, int(baseline - 12 * scale), int(LABEL_W * scale), int(baseline + 3 * scale))
        raw = picture.crop(box).tobytes()  # RGB, 3 bytes a pixel
        pixels = [tuple(raw[i : i + 3]) for i in range(0, len(raw), 3)]
        inked = [p for p in pixels if distance(p, background) > 200]
        assert len(inked) > 40, (label.text, len(inked))
        # ... and it is the theme's text colour, not noise.
        assert any(distance(p, ink) < 60 for p in inked)
    # The corner is the theme's background.
    assert picture.getpixel((1, picture.height - 2)) == background


@pytest.mark.parametrize(
    ("theme", "name"), [("light", "saved-timeline.png"), ("dark", "saved-timeline-dark.png")]
)
def test_the_docs_example_images(run: Run, theme: ThemeName, name: str, tmp_path: Path) -> None:
    update = os.environ.get("WOML_UPDATE_SCREENSHOT") == "1"
    target = (DOCS_IMAGES if update else tmp_path) / name
    written = run.save(target, theme=theme)
    assert written == target.absolute()
    assert png_of(written.read_bytes()).size == png_of(image.to_png(run, theme=theme)).size
    assert (DOCS_IMAGES / name).is_file()  # docs/python-api.md and docs/magic.md show it


def test_without_the_png_extra_the_error_says_what_to_install(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "resvg_py", None)  # `import resvg_py` fails
    with pytest.raises(WomlExtraMissing, match=r'pip install "woml-magic\[png\]"') as info:
        run.save(tmp_path / "run.png")
    assert info.value.extra == "png"
    assert isinstance(info.value, ImportError)
    assert not (tmp_path / "run.png").exists()
    run.save(tmp_path / "run.svg")  # an SVG needs nothing
    assert (tmp_path / "run.svg").is_file()


def test_the_extra_the_message_names_is_pyprojects_and_the_tests_install_it() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the claim is the same on 3.10
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    optional = extras["project"]["optional-dependencies"]
    assert [r.split(">")[0] for r in optional["png"]] == ["resvg-py"]
    assert "woml-magic[png]" in optional["test"]


def test_svg_export_never_loads_the_rasterizer() -> None:
    code = (
        "import sys, woml_magic as wm\n"
        "r = wm.run('<step id=\"s\"><script>return 1;</script></step>', clock='simulated')\n"
        "r.to_svg()\n"
        "print('resvg_py' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"


# -- save ----------------------------------------------------------------------------------


def test_save_svg_writes_to_svgs_document_and_returns_the_absolute_path(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    written = run.save("run.svg", theme="dark")
    assert written == tmp_path / "run.svg"
    assert written.is_absolute()
    assert written.read_text(encoding="utf-8") == run.to_svg(theme="dark")


def test_the_suffix_is_read_without_case(run: Run, tmp_path: Path) -> None:
    png_of(run.save(tmp_path / "SLIDE.PNG").read_bytes())
    parsed((run.save(tmp_path / "slide.Svg")).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("run.jpg", "has the suffix '.jpg'; it must end in .svg or .png (e.g. run.svg)"),
        ("run.svg.gz", "has the suffix '.gz'"),
        ("timeline", "has no suffix; it must end in .svg or .png (e.g. timeline.svg)"),
    ],
)
def test_another_file_type_is_refused_naming_its_suffix(
    run: Run, tmp_path: Path, name: str, words: str
) -> None:
    with pytest.raises(WomlImageError, match=re.escape(words)) as info:
        run.save(tmp_path / name)
    assert isinstance(info.value, ValueError)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_named(run: Run, tmp_path: Path) -> None:
    missing = tmp_path / "slides" / "run.png"
    with pytest.raises(WomlImageError, match=r"'.*slides' does not exist; create it first$"):
        run.save(missing)
    assert not missing.parent.exists()


def test_a_folder_is_not_a_file(run: Run, tmp_path: Path) -> None:
    folder = tmp_path / "pics.svg"
    folder.mkdir()
    with pytest.raises(WomlImageError, match=r"it is a folder; name a file in it"):
        run.save(folder)


def test_a_file_that_cannot_be_written_is_one_sentence_quoting_a_window(
    run: Run, tmp_path: Path
) -> None:
    # A name longer than any file system allows (255 bytes): refused for root too.
    name = "x" * 300 + ".svg"
    with pytest.raises(
        WomlImageError, match=r"cannot save a timeline as '.*…x+\.svg': File name too long$"
    ) as info:
        run.save(tmp_path / name)
    assert len(str(info.value)) < 250  # the path is quoted as a window, not in full
    assert list(tmp_path.iterdir()) == []


def test_a_file_where_the_folder_should_be_is_named(run: Run, tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("x", encoding="utf-8")
    with pytest.raises(WomlImageError, match=r"'.*notes' is not a folder$"):
        run.save(tmp_path / "notes" / "run.svg")


@pytest.mark.parametrize("theme", ["blue", "Dark", "", None])
def test_an_unknown_theme_is_named_with_the_allowed_ones(run: Run, theme: Any) -> None:
    with pytest.raises(
        WomlImageError, match=r"unknown theme .*: an image's theme is 'light' or 'dark'"
    ):
        run.to_svg(theme=theme)


@pytest.mark.parametrize("scale", [0, -1, 8.5, 100, math.nan, math.inf, True, "2"])
def test_a_scale_out_of_range_is_named(run: Run, tmp_path: Path, scale: Any) -> None:
    for name in ("run.png", "run.svg"):
        with pytest.raises(WomlImageError, match=r"scale .* is not allowed: .* at most 8"):
            run.save(tmp_path / name, scale=scale)
    assert list(tmp_path.iterdir()) == []


def test_a_tiny_or_largest_scale_is_allowed(run: Run) -> None:
    width, _ = size_of(run.to_svg())
    assert png_of(image.to_png(run, scale=0.5)).width == pytest.approx(width / 2, abs=1)
    assert image.MAX_SCALE == 8


def test_errors_are_womls_and_render_as_one_line(run: Run) -> None:
    with pytest.raises(WomlError) as info:
        run.save("run.gif")
    assert info.value._render_traceback_() == [f"WomlImageError: {info.value}"]


# -- %woml save ------------------------------------------------------------------------------


@pytest.fixture
def ip(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(tmp_path)
    shell.run_line_magic("load_ext", "woml_magic")
    shell.run_cell_magic("woml", "--simulate --run-id slides", CHECKOUT)
    yield shell
    shell.run_line_magic("unload_ext", "woml_magic")
    shell.config.pop("Woml", None)


def test_woml_save_writes_the_journaled_run_as_png_and_says_where(
    ip: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    capsys.readouterr()
    assert ip.run_line_magic("woml", "save slides out/run.png --theme dark --scale 1") is None
    said = capsys.readouterr().out
    path = tmp_path / "out" / "run.png"
    assert said == f"saved the timeline of run slides (failed) to {path}\n"
    picture = png_of(path.read_bytes())
    assert picture.getpixel((1, 1)) == rgb(PALETTES["dark"].background)
    journaled = ip.run_line_magic("woml", "show slides")
    assert abs(picture.width - size_of(journaled.to_svg(theme="dark"))[0]) < 1


def test_woml_save_svg_is_the_runs_to_svg(ip: InteractiveShell, tmp_path: Path) -> None:
    ip.run_line_magic("woml", "save slides 'my slide.svg'")
    shown = ip.run_line_magic("woml", "show slides")
    assert (tmp_path / "my slide.svg").read_text(encoding="utf-8") == shown.to_svg()


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("save", "%woml save needs a run id: %woml save RUN_ID"),
        ("save slides", "%woml save slides needs a file: %woml save slides FILE.svg (or FILE.png)"),
        ("save nope run.svg", "%woml save nope: no run 'nope' in the journal"),
        ("save slides run.jpg", "%woml save slides: cannot save a timeline as 'run.jpg'"),
        ("save slides run.png --scale 0", "%woml save slides: scale 0.0 is not allowed"),
        ("save slides gone/run.svg", "gone' does not exist; create it first"),
        ("show slides run.svg", "%woml show takes no file (got 'run.svg')"),
        ("save slides run.svg --theme blue", "argument --theme: invalid choice: 'blue'"),
    ],
)
def test_woml_save_misuse_is_one_usage_error_line(
    ip: InteractiveShell, tmp_path: Path, line: str, words: str
) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("woml", line)
    assert type(info.value) is UsageError  # IPython prints a subclass with a traceback
    assert words in str(info.value)
    assert "\n" not in str(info.value).strip()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_woml_save_without_the_extra_is_one_line_naming_the_install(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "resvg_py", None)
    with pytest.raises(UsageError, match=r'pip install "woml-magic\[png\]"'):
        ip.run_line_magic("woml", "save slides run.png")


def test_the_unknown_subcommand_error_lists_save(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match=r"save RUN_ID FILE \[--theme light\|dark\] \[--scale N\]"):
        ip.run_line_magic("woml", "export slides")

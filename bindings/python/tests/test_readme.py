"""The READMEs' Python examples run as written (their paths moved into a temporary folder)."""

import contextlib
import io
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]


def run_example(readme, after, path, tmp_path):
    """Runs the first ```python block of `readme` after the text `after`, with the string
    literal `path` replaced by a folder in `tmp_path`; returns the lines it printed."""
    text = (ROOT / readme).read_text()
    section = text[text.index(after):]
    code = section[section.index("```python\n") + len("```python\n"):]
    code = code[: code.index("```")]
    assert repr(path).replace("'", '"') in code
    code = code.replace(repr(path).replace("'", '"'), repr(str(tmp_path / "db")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, readme, "exec"), {})
    return out.getvalue().splitlines()


def test_the_readme_example_runs(tmp_path):
    assert run_example("README.md", "## From Python", "/tmp/fruit", tmp_path) == [
        "b'apple' b'ripe'",
        "b'banana' b'ripe'",
        "b'cherry' b'ripe'",
        "b'ripe'",
    ]


def test_the_package_readme_example_runs(tmp_path):
    lines = run_example("bindings/python/README.md", "# larch for Python", "/tmp/example", tmp_path)
    assert lines == ["b'apple' b'red'", "b'banana' b'yellow'", "b'red'"]


def test_the_package_readme_typed_example_runs(tmp_path):
    lines = run_example("bindings/python/README.md", "## Typed tables", "/tmp/scores", tmp_path)
    assert lines == ["ada 2026 10", "ada 2025 None"]

"""The README's Python example runs as written (its path moved into a temporary folder)."""

import contextlib
import io
import pathlib

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_example_runs(tmp_path):
    text = README.read_text()
    section = text[text.index("## From Python"):]
    code = section[section.index("```python\n") + len("```python\n"):]
    code = code[: code.index("```")]
    assert '"/tmp/fruit"' in code
    code = code.replace('"/tmp/fruit"', repr(str(tmp_path / "fruit")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == [
        "b'apple' b'ripe'",
        "b'banana' b'ripe'",
        "b'cherry' b'ripe'",
        "b'ripe'",
    ]


def test_the_package_readme_example_runs(tmp_path):
    text = (README.parent / "bindings" / "python" / "README.md").read_text()
    code = text[text.index("```python\n") + len("```python\n"):]
    code = code[: code.index("```")]
    assert '"/tmp/example"' in code
    code = code.replace('"/tmp/example"', repr(str(tmp_path / "example")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "bindings/python/README.md", "exec"), {})
    assert out.getvalue().splitlines() == ["b'apple' b'red'", "b'banana' b'yellow'", "b'red'"]

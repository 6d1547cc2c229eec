"""LaTeX tables escape the names they print."""

import pytest

from figures._io import tex_escape


@pytest.mark.parametrize(
    "name, escaped",
    [
        ("lambda_s=1e-6", r"lambda\_s=1e-6"),
        ("init_sigma=0.05", r"init\_sigma=0.05"),
        ("a&b", r"a\&b"),
        ("50%", r"50\%"),
        ("$x$", r"\$x\$"),
        ("#1", r"\#1"),
        ("{w}", r"\{w\}"),
        ("a~b", r"a\textasciitilde{}b"),
        ("x^2", r"x\textasciicircum{}2"),
        ("a\\b", r"a\textbackslash{}b"),
        ("Dense-BNN", "Dense-BNN"),
        (3, "3"),
    ],
)
def test_every_latex_special_is_escaped(name, escaped):
    assert tex_escape(name) == escaped

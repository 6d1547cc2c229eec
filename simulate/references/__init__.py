"""What ASVI is measured against: the classical class-matched estimator and the
piecewise-polynomial oracle (``classical``), plain ReLU networks trained by Adam
(``plain``), and constructive starts (``constructive``: the linear spline and the teacher
encoded exactly as networks)."""

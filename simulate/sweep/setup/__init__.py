"""What a sweep is, before anything runs: its configuration (``config``, composed of the
``parts`` whose settings are declared once, ``settings``; their flags, ``flags``), the
estimator kinds (``kinds``), the tiers and recipes (``tiers``, ``recipes``), the truths
(``truth_spec``), the candidate widths (``widths``) and a named regressor's parameters and
class (``param_values``, ``regressor_class``)."""

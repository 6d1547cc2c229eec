"""Ground truths and data: Hoelder functions and teacher networks with their regression
data (``functions``), real datasets that packages ship or generate (``data``)."""

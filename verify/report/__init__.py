"""The report: the terminal's and the Markdown's tables (``render``, ``tables``), the
figures' panels (``panels``), the findings in words (``findings``), the exit status
(``status``) and the typed JSON reader (``typedjson``)."""

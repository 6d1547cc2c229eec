"""The toolkit's plumbing: what every layer's command lines and files share, and no
mathematics.

* ``theory.plumbing.cli`` -- argparse with one-line errors, Ctrl-C and SIGTERM as one line
  (``Parser``, ``run_main``, ``interrupted``);
* ``theory.plumbing.paths`` -- the rules for the paths a command reads and writes
  (checked before any work, no output over an input, whole-or-absent writes, bounded
  reads);
* ``theory.plumbing.jsonl`` -- JSON-lines record files: strict reading, whole appends, one
  writer per file (the lock every reader probes).

It lives inside ``theory`` because ``theory`` is the one package every layer imports (the
data flow theory -> simulate -> verify -> figures is one-way), and it imports nothing of
the project but itself and the standard library.  What a *sweep's* records mean (their
fingerprint, the code digest, the resumable store) is ``simulate.sweep.store.records``'.
"""

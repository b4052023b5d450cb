"""Measures password guessing against the app: 16 AppTest sessions in parallel threads (one
process, so they share the server's module state as real sessions do) each submit wrong
passwords for SECONDS; prints the guesses the app checked per second. Not a test (no ``test_``).

    .venv/bin/python tests/security/guess_rate.py estimator_workbench/ui/app.py /tmp/ws 30

Measured on 2 loaded cores (issue 24.10): before the server-wide throttle 12.98 guesses/s (445 in
34.3 s; the issue's attack measured 18.5/s over websockets), after it 0.27 guesses/s (9 in 33.9 s,
the rest refused unchecked).
"""

import os
import sys
import threading
import time

os.environ["WORKBENCH_PASSWORD"] = "right-one"
os.environ["WORKBENCH_HOME"] = sys.argv[2]
os.environ["WORKBENCH_WARM_SPARES"] = "0"

from streamlit.testing.v1 import AppTest

APP, SECONDS = sys.argv[1], float(sys.argv[3])
checked, refused = [], []


def session(i: int) -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    end, n = time.monotonic() + SECONDS, 0
    while time.monotonic() < end:
        try:
            at.text_input(key="_password").input(f"guess-{i}-{n}")
            at.button[0].click().run()
        except KeyError:  # a run that did not finish drawing the form: try again
            at.run()
            continue
        n += 1
        (checked if [e.value for e in at.error] == ["Wrong password."] else refused).append(n)


start = time.monotonic()
threads = [threading.Thread(target=session, args=(i,)) for i in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.monotonic() - start
print(f"checked {len(checked)} wrong guesses in {elapsed:.1f} s = {len(checked) / elapsed:.2f} "
      f"guesses/s; refused unchecked: {len(refused)}")

"""Issue 24.10: password guessing ran at 18.5 guesses/s over 16 parallel sessions (each session
slept 1 s on its own). The throttle is one per server: 16 sessions together get the rate of one."""

from __future__ import annotations

import threading

from estimator_workbench.ui.login_throttle import LoginThrottle


def guesses_checked(throttle: LoginThrottle, clock: list[float], sessions: int, seconds: float,
                    poll: float = 0.125) -> list[float]:
    """Every ``poll`` seconds of fake time (a binary fraction: exact sums) each of ``sessions``
    tries a wrong password; returns the times at which one was checked."""
    checked = []
    while clock[0] < seconds:
        for _ in range(sessions):
            if throttle.acquire() == 0.0:
                checked.append(clock[0])
                throttle.failed()
        clock[0] += poll
    return checked


def test_sixteen_sessions_get_one_servers_rate_with_exponential_backoff():
    clock = [0.0]
    throttle = LoginThrottle(min_interval=1.0, free_failures=5, max_wait=300.0, clock=lambda: clock[0])
    checked = guesses_checked(throttle, clock, sessions=16, seconds=60.0)
    # 1 s apart for the first five, then waits of 2, 4, 8, 16 s (by hand): 10 in the first minute.
    assert checked == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 11.0, 19.0, 35.0]


def test_the_wait_is_capped_and_a_right_password_resets_it():
    clock = [0.0]
    throttle = LoginThrottle(min_interval=1.0, free_failures=5, max_wait=300.0, clock=lambda: clock[0])
    for _ in range(20):
        wait = throttle.acquire()
        if wait:
            clock[0] += wait
            assert throttle.acquire() == 0.0
        throttle.failed()
    assert throttle.acquire() == 300.0  # 2**15 s capped
    clock[0] += 300.0
    assert throttle.acquire() == 0.0
    throttle.succeeded()
    clock[0] += 1.0
    assert throttle.acquire() == 0.0
    throttle.failed()
    assert throttle.acquire() == 1.0  # back to one second


def test_threads_racing_for_a_slot_get_one():
    """16 threads at once on the real clock: exactly one attempt is let through."""
    throttle = LoginThrottle(min_interval=60.0)
    start = threading.Barrier(16)
    results = []

    def session() -> None:
        start.wait()
        results.append(throttle.acquire())

    threads = [threading.Thread(target=session) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results)[0] == 0.0 and sum(r == 0.0 for r in results) == 1
    assert all(0 < r <= 60.0 for r in results if r)

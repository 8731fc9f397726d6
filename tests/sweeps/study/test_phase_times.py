"""Where a study's time went, printed after its closing lines: each phase that ran, in run order,
with the install that scripts/main.sh measured."""

from __future__ import annotations

import time

from sweeps.study.phase_times import INSTALL_SECONDS_ENV, PhaseClock, install_seconds, phase_line


def test_each_phase_is_timed_until_the_next_begins():
    clock = PhaseClock()
    clock.begin("trials")
    time.sleep(0.05)
    clock.begin("fits")
    time.sleep(0.02)
    clock.end()
    clock.end()  # ending twice counts nothing more
    assert set(clock.seconds) == {"trials", "fits"}
    assert 0.05 <= clock.seconds["trials"] < 0.5 and 0.02 <= clock.seconds["fits"] < 0.5


def test_the_line_lists_the_phases_in_run_order_with_the_install(monkeypatch):
    seconds = {"fits": 48.0, "trials": 762.0, "start-up": 12.0, "baselines": 258.0, "defaults": 102.0}
    monkeypatch.setenv(INSTALL_SECONDS_ENV, "204")
    assert phase_line(seconds, install_seconds()) == (
        "time: install 3.4 min, start-up 0.2 min, defaults 1.7 min, baselines 4.3 min, trials 12.7 min, "
        "fits 0.8 min; total 23.1 min"
    )
    monkeypatch.delenv(INSTALL_SECONDS_ENV)
    assert install_seconds() is None  # started without scripts/main.sh: no install to report
    assert phase_line({"trials": 60.0, "fits": 6.0}) == "time: trials 1.0 min, fits 0.1 min; total 1.1 min"


def test_baselines_run_beside_the_trials_are_shown_but_not_added_to_the_total():
    clock = PhaseClock()
    clock.begin("trials")
    clock.end()
    clock.record_beside("baselines", 234.0, beside="trials")
    clock.seconds["trials"] = 540.0
    assert clock.beside == {"baselines": "trials"}
    assert phase_line({"start-up": 6.0, **clock.seconds, "fits": 36.0}, 204.0, clock.beside) == (
        "time: install 3.4 min, start-up 0.1 min, baselines 3.9 min beside the trials, trials 9.0 min, "
        "fits 0.6 min; total 13.1 min"
    )


def test_laws_fitted_while_the_baselines_end_are_shown_beside_them_and_the_report_after():
    clock = PhaseClock()
    clock.record_beside("baselines", 300.0, beside="trials")
    clock.record_beside("fits", 30.0, beside="baselines")
    seconds = {"start-up": 6.0, "defaults": 60.0, "trials": 660.0, **clock.seconds, "report": 12.0}
    assert phase_line(seconds, 54.0, clock.beside) == (
        "time: install 0.9 min, start-up 0.1 min, defaults 1.0 min, baselines 5.0 min beside the trials, "
        "trials 11.0 min, fits 0.5 min beside the baselines, report 0.2 min; total 13.2 min"
    )

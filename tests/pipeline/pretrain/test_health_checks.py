"""The Ray Train poll interval the product sets, and that Ray Train forwards it to the controller."""

from __future__ import annotations

from ray.train.v2._internal.constants import DEFAULT_HEALTH_CHECK_INTERVAL_S, get_env_vars_to_propagate

from pipeline.pretrain.health_checks import HEALTH_CHECK_ENV, HEALTH_CHECK_INTERVAL_S, poll_workers_often


def test_an_unset_interval_becomes_half_a_second_and_reaches_what_ray_train_forwards(monkeypatch):
    monkeypatch.delenv(HEALTH_CHECK_ENV, raising=False)
    assert HEALTH_CHECK_ENV not in get_env_vars_to_propagate()

    assert poll_workers_often() == "0.5"

    # The variables Ray Train 2.60 hands its controller at fit(): the interval must be among them.
    assert get_env_vars_to_propagate()[HEALTH_CHECK_ENV] == "0.5"
    assert HEALTH_CHECK_INTERVAL_S < DEFAULT_HEALTH_CHECK_INTERVAL_S


def test_an_interval_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv(HEALTH_CHECK_ENV, "3")

    assert poll_workers_often() == "3"
    assert get_env_vars_to_propagate()[HEALTH_CHECK_ENV] == "3"

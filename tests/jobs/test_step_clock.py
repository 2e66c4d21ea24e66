"""prompt_job.StepClock: a sampler's time left from its step rate, for the progress line."""

from comfyui_courier.jobs.prompt_job import StepClock


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_comes_from_the_rate_since_the_first_step_to_the_nearest_second():
    clock = Clock()
    steps = StepClock(clock)
    assert steps.seconds_left(None, 1, 20) is None  # one frame: no rate yet, whatever its node
    steps = StepClock(clock)
    assert steps.seconds_left("5", 1, 20) is None
    clock.now += 4.0
    assert steps.seconds_left("5", 5, 20) == 15  # 4 steps in 4 s, 15 to go
    clock.now += 3.5
    assert steps.seconds_left("5", 9, 20) == 10  # 8 steps in 7.5 s: 10.3 s, said as 10
    assert steps.seconds_left("5", 20, 20) == 0


def test_a_rate_a_hair_slower_than_its_steps_does_not_add_a_second():
    """Rounded up, 1.0001 s read "about 2 s left": a second too many at every step's end (issue 31:
    left_error_p90_pct 103 % in benchmarks/estimates.py, most of it that second)."""
    clock = Clock()
    steps = StepClock(clock)
    steps.seconds_left("3", 1, 4)
    clock.now += 0.5001
    assert steps.seconds_left("3", 2, 4) == 1
    clock.now += 0.2  # 0.35 s a step: 0.35 s left, said as 1 until the last step
    assert steps.seconds_left("3", 3, 4) == 1


def test_another_node_or_a_restarted_count_starts_the_clock_again():
    clock = Clock()
    steps = StepClock(clock)
    steps.seconds_left("5", 1, 10)
    clock.now += 60.0  # the sampler ended; a slow decoder reports its tiles
    assert steps.seconds_left("8", 1, 4) is None
    clock.now += 1.0
    assert steps.seconds_left("8", 2, 4) == 2
    assert steps.seconds_left("8", 1, 4) is None  # a second pass of the same node

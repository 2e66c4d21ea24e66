"""prompt_job.StepClock: a sampler's time left from its step rate, for the progress line."""

from comfyui_courier.jobs.prompt_job import StepClock


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_comes_from_the_rate_since_the_first_step_and_rounds_up():
    clock = Clock()
    steps = StepClock(clock)
    assert steps.seconds_left(None, 1, 20) is None  # one frame: no rate yet, whatever its node
    steps = StepClock(clock)
    assert steps.seconds_left("5", 1, 20) is None
    clock.now += 4.0
    assert steps.seconds_left("5", 5, 20) == 15  # 4 steps in 4 s, 15 to go
    clock.now += 3.5
    assert steps.seconds_left("5", 9, 20) == 11  # 8 steps in 7.5 s: 10.3 s, said as 11
    assert steps.seconds_left("5", 20, 20) == 0


def test_another_node_or_a_restarted_count_starts_the_clock_again():
    clock = Clock()
    steps = StepClock(clock)
    steps.seconds_left("5", 1, 10)
    clock.now += 60.0  # the sampler ended; a slow decoder reports its tiles
    assert steps.seconds_left("8", 1, 4) is None
    clock.now += 1.0
    assert steps.seconds_left("8", 2, 4) == 2
    assert steps.seconds_left("8", 1, 4) is None  # a second pass of the same node

"""The in-process handoff: only a prompt a job follows takes files, and only while it follows it."""

import threading

from comfyui_courier.jobs.handoff import Handoff


def test_files_reach_the_job_that_follows_the_prompt_and_no_other():
    handoff = Handoff()
    assert not handoff.expects("p1") and not handoff.hand_over("p1", "3", [b"early"])
    with handoff.expect("p1") as handed, handoff.expect("p2") as other:
        assert handoff.expects("p1")
        assert handoff.hand_over("p1", "3", [b"png"])
        assert not handoff.hand_over("p3", "3", [b"stray"])
    assert handed == {"3": [b"png"]} and other == {}
    assert not handoff.expects("p1") and not handoff.hand_over("p1", "3", [b"late"])
    assert handed == {"3": [b"png"]}  # a late node does not change what the job took


def test_a_node_on_another_thread_hands_over():
    """Nodes run on ComfyUI's worker thread, jobs on the server's loop."""
    handoff = Handoff()
    with handoff.expect("p") as handed:
        worker = threading.Thread(target=handoff.hand_over, args=("p", "7", [b"a", b"b"]))
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive()
    assert handed == {"7": [b"a", b"b"]}

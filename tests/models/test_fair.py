"""Processes sharing the engine: each runs at most as many calls as the others, a process that
arrives takes back the youngest slots of one running more, and a process alone has every slot.

The admission tests drive `fair.Admission` from threads; the last test runs a real daemon serving
the two-slot fake engine of tests/engine_fakes.py, with the other process a real client process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from debatekit.models.local import fair
from debatekit.models.local import shared as shared_engine
from tests.models.test_engine_waiting import no_assembly  # noqa: F401 - the fixture
from tests.models.test_shared_engine import home, until  # noqa: F401 - home: the fixture

BIG, SMALL = 1, 2


def _in_thread(call, results: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.append(call()), daemon=True)
    thread.start()
    return thread


def test_a_process_alone_gets_every_slot_and_the_rest_wait_in_arrival_order():
    seats = fair.Admission(4)
    gone = threading.Event()
    running = [seats.enter(BIG, t, gone) for t in range(4)]
    assert all(s.admitted for s in running) and seats.limit() == 4
    later = []
    threads = [_in_thread(lambda t=t: seats.enter(BIG, t, gone), later) for t in (4, 5)]
    until(lambda: seats.counts() == {BIG: (4, 2)})
    seats.leave(running[0])
    until(lambda: len(later) == 1)
    assert later[0].ticket == 4 and seats.counts() == {BIG: (4, 1)}
    seats.leave(running[1])
    for thread in threads:
        thread.join(5)
    assert [s.ticket for s in later] == [4, 5]


def test_a_process_that_arrives_takes_back_the_youngest_slots_of_one_running_more():
    seats = fair.Admission(10, settle=0)
    gone = threading.Event()
    big = [seats.enter(BIG, t, gone) for t in range(8)]
    first = seats.enter(SMALL, 100, gone)  # a free slot: it runs at once
    assert first.admitted
    # the limit is the smaller demand (1): the seven youngest of the big process give their slots back
    assert [s.preempted.is_set() for s in big] == [False] + [True] * 7
    assert all(s.is_set() for s in big[1:]) and not big[0].is_set()  # their generations are told to stop
    back = []
    threads = [_in_thread(lambda s=s: seats.requeue(s), back) for s in big[1:]]
    until(lambda: seats.counts() == {BIG: (1, 7), SMALL: (1, 0)})
    second = seats.enter(SMALL, 101, gone)  # two calls of the small process: each may run two
    assert second.admitted and seats.limit() == 2
    until(lambda: seats.counts() == {BIG: (2, 6), SMALL: (2, 0)})
    assert not any(s.preempted.is_set() for s in big)  # a rise in demand takes nothing back
    seats.leave(first)
    assert seats.counts() == {BIG: (2, 6), SMALL: (1, 0)}  # nor does a fall give the big process more
    seats.leave(second)  # alone again: every slot it asks for
    for thread in threads:
        thread.join(5)
    assert seats.counts() == {BIG: (8, 0)} and len(back) == 7 and all(s.admitted for s in back)


def test_a_burst_of_calls_counts_whole_before_slots_are_taken_back_and_the_slots_split_evenly():
    seats = fair.Admission(6, settle=0.2)
    gone = threading.Event()
    a = [seats.enter(1, t, gone) for t in range(6)]
    admitted = []
    threads = [_in_thread(lambda t=t: seats.enter(2, 10 + t, gone), admitted) for t in range(6)]
    # the six calls sent together count as one demand of 6: the limit is min(6, 6 // 2), not 1
    until(lambda: sum(s.preempted.is_set() for s in a) == 3)
    time.sleep(0.3)
    assert sum(s.preempted.is_set() for s in a) == 3 and [s.preempted.is_set() for s in a[:3]] == [False] * 3
    threads += [_in_thread(lambda s=s: seats.requeue(s), admitted) for s in a if s.preempted.is_set()]
    until(lambda: seats.counts() == {1: (3, 3), 2: (3, 3)})  # demands of 6 and 6: three slots each
    gone.set()  # every caller goes away: the waiting ones give up their places
    for thread in threads:
        thread.join(5)
    until(lambda: seats.counts() == {1: (3, 0), 2: (3, 0)})
    for seat in [*a[:3], *admitted]:
        seats.leave(seat)
    assert seats.counts() == {}


def test_a_call_is_taken_back_at_most_once_and_a_process_between_calls_is_not_arriving():
    now = [0.0]
    seats = fair.Admission(2, settle=0, rest=2.0, clock=lambda: now[0])
    gone = threading.Event()
    big = seats.enter(BIG, 0, gone)
    first = seats.enter(SMALL, 1, gone)  # an arrival: nothing over the limit of 1, nothing taken back
    assert not big.preempted.is_set()
    seats.leave(first)
    second = seats.enter(SMALL, 2, gone)  # its next call at once: the same process going on, no arrival
    seats.leave(second)
    assert seats._last[SMALL] == 0.0
    extra = seats.enter(BIG, 3, gone)  # the big process alone again: both slots
    assert extra.admitted and not big.preempted.is_set()
    now[0] = 5.0
    got = []
    thread = _in_thread(lambda: seats.enter(SMALL, 4, gone), got)  # back after a rest: an arrival
    until(lambda: extra.preempted.is_set())  # the youngest slot, asked back once
    assert not big.preempted.is_set()
    requeued = []
    again = _in_thread(lambda: seats.requeue(extra), requeued)
    thread.join(5)
    seats.leave(got[0])
    again.join(5)
    assert requeued == [extra] and extra.taken_back == 1 and seats.counts() == {BIG: (2, 0)}
    now[0] = 10.0
    later = []
    thread = _in_thread(lambda: seats.enter(SMALL, 5, gone), later)  # another arrival
    until(lambda: big.preempted.is_set())  # the youngest is `extra` again, but it was asked back once already
    assert not extra.preempted.is_set()
    gone.set()
    thread.join(5)
    assert later == [None]


def test_waiting_calls_sleep_until_a_slot_frees_instead_of_waking_each_other():
    class Counted(fair.Admission):
        passes = 0

        def _admit(self):
            Counted.passes += 1
            super()._admit()

    seats = Counted(1, settle=0)
    gone = threading.Event()
    holder = seats.enter(BIG, 0, gone)
    threads = [_in_thread(lambda t=t: seats.enter(BIG, t, gone), []) for t in (1, 2, 3)]
    until(lambda: seats.counts() == {BIG: (1, 3)})
    before = Counted.passes
    time.sleep(0.5)
    assert Counted.passes - before < 60  # each waiter looks every `poll` (0.1 s); a spin made 100,000 a second
    gone.set()
    for thread in threads:
        thread.join(5)
    seats.leave(holder)


def test_a_reply_complete_before_its_slot_was_asked_back_is_kept_and_a_cut_one_is_run_again():
    from debatekit.models.local.daemon import Daemon

    class Engine:
        slots = 1
        calls = 0

        def chat(self, request, cancelled=None, started=None):
            Engine.calls += 1
            finish = "stop"
            if request["late"] or Engine.calls == 1:
                cancelled.preempted.set()  # asked back; a late ask comes after the last token
                finish = "stop" if request["late"] else None
            return {"choices": [{"message": {"content": f"try {Engine.calls}"}, "finish_reason": finish}],
                    "usage": {"completion_tokens": 3}}

    daemon = Daemon(make_engine=lambda model: Engine())
    requeues = []
    late = daemon._chat("m", {"late": True}, threading.Event(), lambda: None, lambda: requeues.append(1), 7, 1)
    assert late["reply"]["choices"][0]["message"]["content"] == "try 1" and requeues == [] and daemon.preempted == 0
    Engine.calls = 0
    cut = daemon._chat("m", {"late": False}, threading.Event(), lambda: None, lambda: requeues.append(1), 7, 2)
    assert cut["reply"]["choices"][0]["message"]["content"] == "try 2" and requeues == [1] and daemon.preempted == 1
    assert daemon.served == 2 and daemon.completion_tokens == 6 and daemon.admissions["m"].counts() == {}


def test_without_fairness_calls_run_in_arrival_order_and_nothing_is_taken_back(monkeypatch):
    monkeypatch.setenv("DEBATEKIT_ENGINE_FAIR", "off")
    assert not fair.enabled()
    seats = fair.Admission(3, fair=fair.enabled(), settle=0)
    gone = threading.Event()
    big = [seats.enter(BIG, t, gone) for t in range(2)]
    small = seats.enter(SMALL, 5, gone)
    assert small.admitted and not any(s.preempted.is_set() for s in big)
    later = []
    thread = _in_thread(lambda: seats.enter(BIG, 6, gone), later)
    until(lambda: seats.counts()[BIG] == (2, 1))
    seats.leave(small)  # the slot goes to the next in line, whoever it is
    thread.join(5)
    assert later[0].admitted and seats.limit() == 3


def test_a_waiting_call_whose_caller_leaves_gives_up_its_place():
    seats = fair.Admission(1)
    gone, left = threading.Event(), threading.Event()
    holder = seats.enter(BIG, 0, gone)
    got = []
    thread = _in_thread(lambda: seats.enter(BIG, 1, left), got)
    until(lambda: seats.counts() == {BIG: (1, 1)})
    left.set()
    thread.join(5)
    assert got == [None] and seats.counts() == {BIG: (1, 0)}
    seats.leave(holder)
    assert seats.counts() == {}


BUSY = """
import asyncio
from debatekit.models.local import shared as shared_engine
async def main():
    ask = lambda: shared_engine.achat("m", {"messages": [{"role": "user", "content": "slow 3"}]})
    replies = await asyncio.gather(ask(), ask())
    assert all("heard: slow 3" in r["choices"][0]["message"]["content"] for r in replies), replies
asyncio.run(main())
"""


@pytest.mark.parametrize("fairness", ["on", "off"])
def test_a_second_process_gets_a_slot_taken_back_from_one_holding_them_all(home, no_assembly, monkeypatch, fairness):
    monkeypatch.setenv("DEBATEKIT_ENGINE_FAIR", fairness)  # the daemon this test starts reads it
    other = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        until(lambda: (shared_engine.status() or {}).get("in_flight") == 2, 60)
        reply = asyncio.run(shared_engine.achat("m", {"messages": [{"role": "user", "content": "quick"}]}))
        other_still_running = other.poll() is None  # its second call takes 3 s from when it got a slot back
        assert other.wait(timeout=60) == 0  # both its calls answered in full, one of them generated twice
    finally:
        other.kill()
    status = shared_engine.status()
    assert "heard: quick" in reply["choices"][0]["message"]["content"]
    if fairness == "on":
        assert other_still_running  # it did not wait for the other process's calls to end
        assert status["preempted"] == 1 and Path(home.parent.parent / "cancelled").read_text() == "slow 3"
    else:  # it waited in line: nothing was stopped
        assert status["preempted"] == 0 and not Path(home.parent.parent / "cancelled").exists()

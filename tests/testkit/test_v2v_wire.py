import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from testkit.baresip import Caller
from testkit.botproc import ROOT
from testkit.calllog_reader import LoggedCall, LogTurn
from testkit.question_script import (
    CACHE_QUESTIONS,
    OPEN_QUESTIONS,
    build_script,
    plan_questions,
)
from testkit.rtp_capture import Packet
from testkit.turn_join import filler_turns, heard_texts, join_turns
from testkit.v2v_report import (
    bench_command,
    report,
    write_docs,
)
from testkit.v2v_results import (
    Results,
    evaluate,
    run_bench,
)
from testkit.v2v_run import CaptureDenied, Collected
from testkit.wire import is_voiced, voiced_frames
from testkit.wire_calls import Media, WireTurn, calls_on_wire, greeting_ms, measure_turns

RATE = 8000
BOT_SIP = ("127.0.0.1", 5070)
CALLER_SIP = ("127.0.0.1", 40000)
WORKER_SIP = ("127.0.0.1", 33000)
CALLER_RTP = ("127.0.0.1", 11000)
BOT_RTP = ("127.0.0.1", 21000)
LOUD = bytes([0x00, 0x80] * 80)  # PCMU full-scale square wave
QUIET = b"\xff" * 160  # PCMU digital silence


def tone(seconds: float) -> bytes:
    n = int(seconds * RATE)
    return (8000 * np.sin(2 * np.pi * 300 * np.arange(n) / RATE)).astype("<i2").tobytes()


def quiet(seconds: float) -> bytes:
    return bytes(int(seconds * RATE) * 2)


def fake_say(text: str, voice: str) -> bytes:
    # a question with a short pause inside it, as flite makes at a comma
    return quiet(0.2) + tone(0.5) + quiet(0.3) + tone(0.4) + quiet(0.2)


def sdp(addr: tuple[str, int]) -> str:
    return f"v=0\r\nc=IN IP4 {addr[0]}\r\nt=0 0\r\nm=audio {addr[1]} RTP/AVP 0\r\n"


Addr = tuple[str, int]


def sip(t: float, route: tuple[Addr, Addr], start: str, cseq: str, body: str = "") -> Packet:
    text = f"{start}\r\nCall-ID: call-1\r\nCSeq: {cseq}\r\n\r\n{body}"
    return Packet(t, route[0], route[1], text.encode())


def rtp(t: float, src: Addr, dst: Addr, seq: int, payload: bytes) -> Packet:
    head = struct.pack("!BBHII", 0x80, 0, seq & 0xFFFF, (1000 + 160 * seq) & 0xFFFFFFFF, 42)
    return Packet(t, src, dst, head + payload)


class FakeCall:
    """A call on the wire built packet by packet: script in, bot answers at chosen delays."""

    answered = 100.0
    t0 = 100.05  # first RTP packet, both directions, on one 20 ms grid

    def __init__(self, answers_after_packets: list[int], *, bye_by_bot: bool = False) -> None:
        self.script = build_script(
            [("first question", "cache"), ("second question", "llm")],
            "slt",
            lead_s=2.0,
            answer_window_s=3.0,
            say=fake_say,
        )
        voiced = voiced_frames(np.frombuffer(self.script.pcm, "<i2"))
        n = len(voiced)
        self.caller_voiced = voiced
        # bot audio: a greeting from packet 5 to 60, then each answer 50 packets long
        bot = np.zeros(n, dtype=bool)
        bot[5:60] = True
        self.last_caller_packet = []
        for turn, delay in zip(self.script.turns, answers_after_packets, strict=True):
            last = round(turn.end_s * 1000 / 20) - 1
            assert voiced[last] and not voiced[last + 1]
            self.last_caller_packet.append(last)
            bot[last + delay : last + delay + 50] = True
        self.bot_voiced = bot
        times = self.t0 + np.arange(n) * 0.02
        bot_times = times.copy()
        bot_times[200:203] = bot_times[203]  # three packets held back: one late arrival
        end = float(times[-1]) + 0.05
        invite = "INVITE sip:bot@127.0.0.1 SIP/2.0"
        self.packets = [
            sip(99.9, (CALLER_SIP, BOT_SIP), invite, "1 INVITE", sdp(CALLER_RTP)),
            sip(99.95, (BOT_SIP, CALLER_SIP), "SIP/2.0 100 Trying", "1 INVITE"),
            sip(self.answered, (BOT_SIP, CALLER_SIP), "SIP/2.0 200 OK", "1 INVITE", sdp(BOT_RTP)),
            sip(100.01, (CALLER_SIP, WORKER_SIP), "ACK sip:bot@127.0.0.1 SIP/2.0", "1 ACK"),
        ]
        for i in range(n):
            up = LOUD if voiced[i] else QUIET
            down = LOUD if bot[i] else QUIET
            self.packets.append(rtp(times[i], CALLER_RTP, BOT_RTP, i, up))
            self.packets.append(rtp(bot_times[i], BOT_RTP, CALLER_RTP, 60000 + i, down))
        bye = (WORKER_SIP, CALLER_SIP) if bye_by_bot else (CALLER_SIP, WORKER_SIP)
        self.packets.append(sip(end, bye, "BYE sip:x@127.0.0.1 SIP/2.0", "2 BYE"))
        self.packets.sort(key=lambda p: p.t)
        self.times = times


def test_build_script_places_each_question() -> None:
    call = FakeCall([35, 55])
    first, second = call.script.turns
    assert (first.start_s, first.end_s) == pytest.approx((2.2, 3.4))
    utterance = len(fake_say("", "")) / 2 / RATE
    assert second.start_s == pytest.approx(2.0 + utterance + 3.0 + 0.2)
    assert call.script.seconds == pytest.approx(2.0 + 2 * (utterance + 3.0))


def test_calls_on_wire_ties_rtp_to_the_call() -> None:
    fake = FakeCall([35, 55])
    calls = calls_on_wire(fake.packets, BOT_SIP[1])
    assert list(calls) == ["call-1"]
    call = calls["call-1"]
    assert call.status == 200 and call.answered_at == fake.answered
    assert (call.caller_audio, call.bot_audio) == (CALLER_RTP, BOT_RTP)
    assert call.caller_sip == CALLER_SIP
    assert not call.bye_by_bot and call.bye_at is not None
    assert len(call.up) == len(call.down) == len(fake.times)
    assert call.up.voiced.tolist() == fake.caller_voiced.tolist()
    assert call.down.voiced.tolist() == fake.bot_voiced.tolist()
    assert call.down.seq[0] == 60000 and call.down.seq[-1] == 60000 + len(fake.times) - 1
    assert call.late_packets() == 1
    assert call.lost_packets() == 0


def test_greeting_and_voice_to_voice_per_scripted_question() -> None:
    fake = FakeCall([35, 55])
    call = calls_on_wire(fake.packets, BOT_SIP[1])["call-1"]
    assert greeting_ms(call) == pytest.approx((fake.t0 + 5 * 0.02 - fake.answered) * 1000)
    turns = measure_turns(call, fake.script.turns)
    assert [t.v2v_ms for t in turns] == pytest.approx([700.0, 1100.0])
    # each answer is one unbroken stretch: the only silence is the wait for it
    assert [t.silence_s for t in turns] == pytest.approx([0.7, 1.1])
    for turn, last in zip(turns, fake.last_caller_packet, strict=True):
        # the pause inside the question did not end it early
        assert turn.caller_end == pytest.approx(fake.times[last])
        assert not turn.overlapped


def test_longest_silence_is_broken_by_a_filler_and_ends_with_the_answer() -> None:
    t = np.arange(0, 8.0, 0.02)
    # a filler from 1.0 to 1.5 s, the answer from 4.0 to 5.0 s with a 0.3 s pause in it
    voiced = ((t >= 1.0) & (t < 1.5)) | ((t >= 4.0) & (t < 5.0) & ~((t >= 4.4) & (t < 4.7)))
    pairs = enumerate(zip(t, voiced, strict=True))
    rows = [(float(x), i, 160 * i, bool(v), 0) for i, (x, v) in pairs]
    media = Media.build(rows)
    # from the last filler packet (1.48 s) to the answer's first (4.0 s)
    assert media.longest_silence(0.0) == pytest.approx(2.52)
    assert media.longest_silence(0.0, before=3.0) == pytest.approx(1.0)
    assert media.longest_silence(5.5) is None


def test_bot_talking_when_the_question_ends_is_overlapped() -> None:
    fake = FakeCall([-3, 55])  # the first answer starts before the question is over
    call = calls_on_wire(fake.packets, BOT_SIP[1])["call-1"]
    first, second = measure_turns(call, fake.script.turns)
    assert first.overlapped and first.v2v_ms is None
    assert second.v2v_ms == pytest.approx(1100.0)


def test_unanswered_question_and_bot_hangup() -> None:
    fake = FakeCall([35, 10_000], bye_by_bot=True)  # no second answer
    call = calls_on_wire(fake.packets, BOT_SIP[1])["call-1"]
    assert call.bye_by_bot
    first, second = measure_turns(call, fake.script.turns)
    assert first.v2v_ms == pytest.approx(700.0)
    assert second.bot_start is None and second.v2v_ms is None


def log_turn(
    seq: int, route: str, speech_end: float, first_audio_after: float, transcript: str = ""
) -> LogTurn:
    return LogTurn(
        seq=seq,
        route=route,
        intent="order_status" if route in ("exact", "semantic") else None,
        barged_in=False,
        stages={
            "speech_end": speech_end,
            "eot_decided": speech_end + 0.5,
            "transcript_ready": speech_end + 0.6,
            "route_decided": speech_end + 0.62,
            **({"first_token": speech_end + 0.8} if route == "llm" else {}),
            "first_audio_out": speech_end + first_audio_after,
        },
        model_ms={},
        transcript=transcript or None,
    )


def test_heard_texts_joins_a_question_split_into_turns() -> None:
    wire = [
        WireTurn(0, 10.0, 11.0, 11.7, False),
        WireTurn(1, 20.0, 21.0, 22.1, False),
        WireTurn(2, None, None, None, False),  # not found on the wire
    ]
    a = log_turn(1, "semantic", 11.2, 0.5, "Where is my order?")
    b1 = log_turn(2, "llm", 20.6, 0.9, "I placed it")
    b2 = log_turn(3, "llm", 21.2, 0.9, "last week.")
    silent = log_turn(4, "none", 21.5, 0.1)  # no transcript: nothing heard
    heard = heard_texts(wire, [a, b1, b2, silent], lambda t: t)
    assert heard == ["Where is my order?", "I placed it last week.", None]
    assert heard_texts(wire[:1], [], lambda t: t) == [""]


def test_join_by_order_and_by_time() -> None:
    wire = [
        WireTurn(0, 10.0, 11.0, 11.7, False),
        WireTurn(1, 20.0, 21.0, 22.1, False),
    ]
    a = log_turn(1, "semantic", 11.2, 0.5)
    b = log_turn(2, "llm", 21.2, 0.9)
    assert join_turns(wire, [a, b], lambda t: t) == [a, b]
    # a pause inside the second question made the bot take it as two turns
    b1, b2 = log_turn(2, "llm", 20.6, 0.9), log_turn(3, "llm", 21.2, 0.9)
    assert join_turns(wire, [a, b1, b2], lambda t: t) == [a, b2]
    # noise the bot ignored does not count; a turn outside every window joins nothing
    noise = log_turn(3, "none", 5.0, 0.1)
    assert join_turns(wire, [a, noise, b], lambda t: t) == [a, b]
    assert join_turns(wire, [log_turn(1, "llm", 2.0, 1.0)], lambda t: t) == [None, None]
    # the clock conversion is applied to the call log's times
    shifted = [log_turn(1, "semantic", 1011.2, 0.5), log_turn(2, "llm", 1021.2, 0.9)]
    assert join_turns(wire, shifted, lambda t: t - 1000) == shifted


def test_log_turn_durations() -> None:
    d = log_turn(1, "llm", 100.0, 1.25).durations_ms()
    assert d == pytest.approx(
        {"eot_wait": 500, "asr": 100, "lookup": 20, "first_token": 180, "first_audio": 1250}
    )
    assert "first_token" not in log_turn(1, "exact", 100.0, 0.6).durations_ms()
    assert log_turn(1, "exact", 0, 1).route_class == "cache"
    assert log_turn(1, "fallback", 0, 1).route_class == "fallback"


def collected(fake: FakeCall, logged: LoggedCall) -> Collected:
    caller = Caller(concurrency=1, index=0, sip_port=CALLER_SIP[1], script=fake.script)
    return Collected(
        levels=[1],
        callers=[caller],
        bot_sip_port=BOT_SIP[1],
        packets=fake.packets,
        log={"call-1": logged},
        wall_offset=1000.0,  # the call log's clock is 1000 s ahead of the capture's
    )


def test_a_filler_counts_for_a_turn_only_once_its_question_has_ended() -> None:
    turns = [
        WireTurn(0, caller_start=10.0, caller_end=12.0, bot_start=13.5, overlapped=False),
        WireTurn(1, caller_start=20.0, caller_end=22.0, bot_start=22.2, overlapped=False),
    ]
    # 13.0: after question 0 ended; 20.1: the caller had just begun question 1
    assert filler_turns(turns, [13.0, 20.1]) == [True, False]
    assert filler_turns(turns, [22.1]) == [False, True]


def test_evaluate_joins_routes_fillers_and_overhead() -> None:
    fake = FakeCall([35, 55])
    ends = [fake.times[i] for i in fake.last_caller_packet]
    logged = LoggedCall(
        turns=[
            log_turn(1, "semantic", 1000 + ends[0] + 0.15, 0.45, "First question."),
            log_turn(2, "llm", 1000 + ends[1] + 0.15, 2.5, "Second quest on"),
        ],
        fillers=[1000 + ends[1] + 1.1],
    )
    res = evaluate(collected(fake, logged))
    [call] = res.calls
    assert call.status == 200 and not call.dropped and call.late_packets == 1
    assert call.greeting_ms == pytest.approx(150.0)
    first, second = res.turns
    assert (first.route, first.planned, first.intent) == ("cache", "cache", "order_status")
    assert (second.route, second.planned) == ("llm", "llm")
    assert first.v2v_ms == pytest.approx(700.0) and not first.filler
    assert first.overhead_ms == pytest.approx(700.0 - 450.0)
    assert second.filler and second.overhead_ms is None  # the wire heard the filler
    text = report(res, "python -m bench.v2v_wire --concurrency 1")
    assert "| 1 | cache | 1 | 700 | 700 | 700 | 700 | 0 |" in text
    assert "| 1 | llm | 1 | 1100 | 1100 | 1100 | 1100 | 1 |" in text
    assert "No dropped calls." in text
    assert (first.word_errors, second.word_errors) == ((0, 2), (2, 2))
    assert "| 1 | cache | 1 | 2 | 0 | 0.0% | 1 |" in text
    assert "| 1 | llm | 1 | 2 | 2 | 100.0% | 0 |" in text
    assert "| 1 | all | 2 | 4 | 2 | 50.0% | 1 |" in text


def test_evaluate_counts_dropped_calls() -> None:
    fake = FakeCall([35, 10_000], bye_by_bot=True)
    res = evaluate(collected(fake, LoggedCall()))
    [call] = res.calls
    assert call.dropped
    assert "1 of 2 questions unanswered" in call.why and "the bot hung up" in call.why
    assert [t.route for t in res.turns] == ["unjoined", "unjoined"]
    assert "call 0 (slt)" in report(res, "cmd")


def test_write_docs(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    fake = FakeCall([35, 55])
    ends = [fake.times[i] for i in fake.last_caller_packet]
    logged = LoggedCall(
        turns=[
            log_turn(1, "exact", 1000 + ends[0] + 0.15, 0.45),
            log_turn(2, "llm", 1000 + ends[1] + 0.15, 0.8),
        ]
    )
    res = evaluate(collected(fake, logged))
    write_docs(res, "python -m bench.v2v_wire", tmp_path / "latency.md", tmp_path / "latency.png")
    assert "![voice-to-voice per route](latency.png)" in (tmp_path / "latency.md").read_text()
    assert (tmp_path / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plan_questions() -> None:
    both = plan_questions("both", 4, caller=1)
    assert [p for _, p in both] == ["llm", "cache", "llm", "cache"]
    assert all(q in CACHE_QUESTIONS for q, p in both if p == "cache")
    assert all(q in OPEN_QUESTIONS for q, p in both if p == "llm")
    assert {p for _, p in plan_questions("cache", 3, caller=0)} == {"cache"}


@pytest.mark.sip
@pytest.mark.models
async def test_one_call_one_cache_turn_on_the_wire() -> None:
    try:
        res = await run_bench(
            [1],
            1,
            "cache",
            lead_s=5.0,
            answer_window_s=8.0,
            questions=lambda i: [("Where is my order?", "cache")],
        )
    except CaptureDenied:
        pytest.skip("a raw packet socket needs root")
    assert isinstance(res, Results)
    [call] = res.calls
    assert call.status == 200, call.why
    assert call.greeting_ms is not None and math.isfinite(call.greeting_ms)
    assert call.greeting_ms > 0
    assert call.bot_packets > 0
    [turn] = res.turns
    assert turn.answered and not turn.overlapped
    assert turn.v2v_ms is not None and math.isfinite(turn.v2v_ms) and turn.v2v_ms > 0
    # joined to the bot's call log: an exact phrase of an intent, answered from the cache
    assert turn.route == "cache", turn
    assert turn.intent == "order_status"
    assert "first_audio" in turn.bot_ms


def test_bench_command_leaves_out_local_files() -> None:
    argv = ["--concurrency", "1,5", "--save", "/x/run.pkl", "--write", "--analyze=/y.pkl"]
    assert bench_command(argv) == "python -m bench.v2v_wire --concurrency 1,5 --write"


def test_main_says_why_without_capture_rights(tmp_path: Path) -> None:
    # The command itself, without the right to open a raw socket (as root: CAP_NET_RAW
    # dropped). It looks for baresip before it opens the capture: a stand-in will do.
    (tmp_path / "baresip").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "baresip").chmod(0o755)
    command = [sys.executable, "-m", "bench.v2v_wire", "--concurrency", "1"]
    if os.geteuid() == 0:
        drop = ["setpriv", "--inh-caps=-net_raw", "--bounding-set=-net_raw"]
        try:
            subprocess.run([*drop, "true"], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            pytest.skip("root, and CAP_NET_RAW cannot be dropped here (setpriv)")
        command = [*drop, *command]
    env = {
        **os.environ,
        "PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}",
        # had the capture opened after all, the bot would stop at once: no benchmark run
        "SWITCHBOARD_PROFILE": str(tmp_path / "no-such-profile.toml"),
    }
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "needs root" in done.stderr


def test_is_voiced_matches_voiced_frames() -> None:
    loud = np.frombuffer(tone(0.02), "<i2")
    faint = (loud // 400).astype(np.int16)  # about -52 dBFS
    assert is_voiced(loud) and bool(voiced_frames(loud)[0])
    assert not is_voiced(faint) and not bool(voiced_frames(faint)[0])
    assert not is_voiced(np.zeros(0, dtype=np.int16))


def test_build_script_adds_each_callers_think_time_after_a_question() -> None:
    extra = iter([0.5, 1.5])
    script = build_script(
        [("first question", "cache"), ("second question", "llm")],
        "slt",
        lead_s=2.0,
        answer_window_s=3.0,
        say=fake_say,
        think_s=lambda: next(extra),
    )
    utterance = len(fake_say("", "")) / 2 / RATE
    first, second = script.turns
    assert second.start_s - first.start_s == pytest.approx(utterance + 3.0 + 0.5)
    assert script.seconds == pytest.approx(2.0 + 2 * (utterance + 3.0) + 0.5 + 1.5)

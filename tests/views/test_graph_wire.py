"""GraphView's open calls on the wire: one buffer of little-endian int32 each way (a list of
40,000 ids cost the page 25-80 ms a toggle), while ``view.expanded`` stays a list of ints."""

from __future__ import annotations

import struct

import comm
import pytest
from comm.base_comm import BaseComm

from labkit.views import GraphView


class Recorder(BaseComm):
    """A real comm that keeps what the widget publishes: (method, state, buffers by key)."""

    sent: list[tuple[str, dict, dict]] = []

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        data = dict(data or {})
        if "state" in data:
            paths = [p[0] for p in data.get("buffer_paths", [])]
            held = dict(zip(paths, [bytes(b) for b in buffers or []], strict=True))
            Recorder.sent.append((data.get("method", msg_type), data["state"], held))


@pytest.fixture
def sent(monkeypatch):
    Recorder.sent = []
    monkeypatch.setattr(comm, "create_comm", Recorder)
    return Recorder.sent


def _int32(ids) -> bytes:
    return struct.pack(f"<{len(ids)}i", *ids)


def _calls(trace) -> list[int]:
    return [n.id for n in trace.nodes if n.kind == "module"]


def test_open_calls_go_to_the_page_as_int32_and_read_back_as_a_list(cnn_trace, sent):
    calls = _calls(cnn_trace)
    view = GraphView(cnn_trace, expanded=calls, rolled=False)
    assert view.expanded == sorted(calls) and all(type(i) is int for i in view.expanded)
    opened = next(held for method, _, held in sent if "expanded" in held)
    assert opened["expanded"] == _int32(sorted(calls))
    sent.clear()
    view.expanded = view.expanded[1:]
    updates = [held["expanded"] for method, _, held in sent if "expanded" in held]
    assert updates == [_int32(sorted(calls)[1:])]


def test_a_toggle_from_the_page_is_a_list_here_and_is_not_sent_back(cnn_trace, sent):
    calls = sorted(_calls(cnn_trace))
    view = GraphView(cnn_trace, expanded=calls, rolled=False)
    before = len(view.visible().groups)
    sent.clear()
    # the page closes the second call and appends the first again (its order, not sorted)
    page = [*calls[2:], calls[0]]
    view.set_state({"expanded": memoryview(_int32(page))})
    assert view.expanded == page
    assert len(view.visible().groups) < before
    # nothing goes back: no update of the kernel's own, and no echo of the page's bytes
    # (ipywidgets echoes a synced change unless the trait says echo_update=False)
    assert [(m, held) for m, _, held in sent if "expanded" in held] == []


def test_a_saved_list_still_reads_and_bad_bytes_are_named(cnn_trace, sent):
    calls = sorted(_calls(cnn_trace))
    view = GraphView(cnn_trace, rolled=False)
    view.set_state({"expanded": calls[:2]})  # a widget state saved before the buffer form
    assert view.expanded == calls[:2]
    with pytest.raises(ValueError, match=r"GraphView.expanded: 6 bytes"):
        view.set_state({"expanded": memoryview(b"\0" * 6)})
    assert view.expanded == calls[:2]
